"""What the streaming processors share with the file source and the runner.

- ``grouping_key``: a processor's grouping values;
- ``frames_of``, ``arrow_frame``: a key's pandas frames of a micro-batch as one frame,
  and a frame as Arrow columns of their declared types (exact integers, nulls kept);
- ``FILE_COLUMN``, ``LINE_COLUMN``: the provenance columns the file source
  (``timebound stream``'s) adds to every row, which the processors name in errors;
- ``ROCKSDB``: the state store provider the stateful streams need;
- ``clocked``: the late-row rule of every stream (a row behind its key's clock is
  taken at the clock and marked ``late_arrival``), the one copy.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa

from timebound.sparkutil import FILE_COLUMN as FILE_COLUMN
from timebound.sparkutil import LINE_COLUMN as LINE_COLUMN
from timebound.sparkutil import ROCKSDB as ROCKSDB

#: Below every clock: the first row of a key is never late.
FLOOR = np.iinfo(np.int64).min


def clocked(at: np.ndarray, clock: int | None) -> tuple[np.ndarray, np.ndarray]:
    """The late-row rule over one key's rows in decision order: each row is decided at
    the larger of its ``at`` and the key's clock before it (``clock``: the
    restored receiver's or merger's, None for a new one), and it is late when that
    raised it.
    Returns the ``at`` each row is decided at and the ``late_arrival`` mask."""
    before = np.maximum.accumulate(np.r_[FLOOR if clock is None else clock, at])[:-1]
    return np.maximum(at, before), at < before


def grouping_key(key: Any) -> tuple[Any, ...]:
    """The grouping values: Spark passes them as a tuple; ``TwsTester`` wraps the key
    it is given in one more tuple."""
    values = tuple(key)
    if len(values) == 1 and isinstance(values[0], tuple):
        return values[0]
    return values


def frames_of(frames: Iterable[Any]) -> Any:
    """A key's pandas frames of one micro-batch as one frame (None: no row)."""
    import warnings

    import pandas as pd

    parts = [frame for frame in frames if len(frame)]
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    with warnings.catch_warnings():
        # pandas' notice that all-NA columns will count towards the dtype: the rows
        # are typed by their declared schema afterwards (``arrow_frame``)
        warnings.filterwarnings("ignore", category=FutureWarning,
                                message="The behavior of DataFrame concatenation")
        return pd.concat(parts, ignore_index=True)


def arrow_frame(frame: Any, schema: pa.Schema) -> pa.Table:
    """``frame``'s columns as Arrow, each of its type in ``schema`` (nulls kept). The
    columns are taken by position: Spark rebuilds a ``transformWithStateInPandas``
    frame from ``itertuples``, which renames the columns whose name starts with ``_``."""
    if len(frame.columns) != len(schema):
        raise AssertionError(f"{len(frame.columns)} columns, expected {schema.names}")
    arrays = []
    for index, field in enumerate(schema):
        column = frame.iloc[:, index]
        if column.dtype == object:
            column = column.where(column.notna(), None)
        arrays.append(pa.array(column, type=field.type, from_pandas=True))
    return pa.Table.from_arrays(arrays, schema=schema)
