"""A message row's ranges are written once (``contract.MESSAGE_MINIMUMS``,
``contract.MESSAGE_IDS``) and every Python engine checks a row by them, exactly at the
boundary: the replay adapter's fast test (``well_formed``) and its error path (a
``TraceError`` naming the field), and the column-wise re-check (``columnar``: a
segment with a row below the minimum leaves the fast path for the row path, whose
error is the replay's). The Spark checks read the same declaration
(``spark._check.prepared``; their texts are tested in ``test_spark_errors_readable``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from timebound.adapters import Row
from timebound.adapters.atmostonce import AtMostOnceAdapter, AtMostOnceOptions, well_formed
from timebound.columnar import decide_table
from timebound.contract import MESSAGE_IDS, MESSAGE_MINIMUMS
from timebound.errors import TraceError

SOURCE = "messages[run 'r']"
SCHEMA = pa.schema([("type", pa.string()), ("receiver", pa.string()), ("conn", pa.string()),
                    ("ts", pa.int64()), ("at", pa.int64())])


def _rows(field: str, value: Any) -> list[dict[str, Any]]:
    """Six plain message rows; the fourth has ``field`` = ``value``."""
    rows = [{"type": "msg", "receiver": "s", "conn": f"c{i % 2}", "ts": 10 + i, "at": 20 + i}
            for i in range(6)]
    rows[3][field] = value
    return rows


def _adapter() -> AtMostOnceAdapter:
    return AtMostOnceAdapter(AtMostOnceOptions.from_values(
        {"estimator": "fixed", "rho": 1000, "gc_every": 10}))


def _feed_all(rows: list[dict[str, Any]]) -> list[str]:
    a = _adapter()
    return [out["verdict"] for i, r in enumerate(rows, 1)
            for out in a.feed(Row(SOURCE, i, r))]


def _columnar(rows: list[dict[str, Any]]) -> tuple[int, int]:
    """(rows decided on the fast path, on the row path)."""
    a = _adapter()
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    lines = np.arange(1, len(rows) + 1)
    decided = decide_table(a, SOURCE, table, lines,
                           lambda i: list(a.feed(Row(SOURCE, i + 1, rows[i]))))
    return decided.fast_rows, decided.slow_rows


@pytest.mark.parametrize("field", sorted(MESSAGE_MINIMUMS))
def test_the_least_value_passes_and_one_less_is_refused(field: str) -> None:
    least = MESSAGE_MINIMUMS[field]
    # "at" never decreases per receiver: the boundary row leads the trace
    rows = _rows(field, least) if field == "ts" else [
        dict(r, at=least + i) for i, r in enumerate(_rows(field, least))]
    assert well_formed("s", "c", *(least if f == field else 5 for f in ("ts", "at")))
    assert not well_formed("s", "c", *(least - 1 if f == field else 5 for f in ("ts", "at")))
    assert len(_feed_all(rows)) == len(rows)
    assert _columnar(rows) == (len(rows), 0)

    rows[3 if field == "ts" else 0][field] = least - 1
    with pytest.raises(TraceError) as caught:
        _feed_all(rows)
    assert caught.value.field == field
    assert f"must be >= {least}, got {least - 1}" in str(caught.value)
    with pytest.raises(TraceError):
        _columnar(rows)


@pytest.mark.parametrize("field", MESSAGE_IDS)
def test_an_empty_identifier_is_refused_on_every_path(field: str) -> None:
    rows = _rows(field, "")
    assert not well_formed(*("" if f == field else "x" for f in MESSAGE_IDS), 5, 5)
    with pytest.raises(TraceError) as caught:
        _feed_all(rows)
    assert caught.value.field == field
    with pytest.raises(TraceError):
        _columnar(rows)
