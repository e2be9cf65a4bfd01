"""The decision order of ``at_most_once``: how a receiver takes its rows, defined once.

A receiver takes its rows in ``at`` order; rows with equal ``at`` by the caller's
``order`` column (nulls first), then ``ts``, then ``conn`` (as a string), then
Spark's ``xxhash64`` of the row's columns (the operator's ``TIE`` column). Every
other key is never null (the row checks refuse a null before a row is decided).

``DECISION_ORDER`` is that rule as data; the two places that sort derive from it:
``spark_keys`` gives the ``Column`` keys Spark sorts a batch DataFrame's partitions
by (``_batch``), ``frame_order`` puts one key's rows of a micro-batch in that order
in the Python worker (``_stream``, where Spark hands the rows of a group in no
particular order), with Arrow's sort. Strings compare the same way on both sides:
Spark and Arrow compare UTF-8 bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column

#: (role, nulls first) in priority order. ``order`` is present only when the caller
#: names an order column; ``tie`` is the row hash.
DECISION_ORDER: tuple[tuple[str, bool], ...] = (
    ("at", False), ("order", True), ("ts", False), ("conn", False), ("tie", False))


def _present(names: Mapping[str, str | None]) -> list[tuple[str, bool]]:
    return [(names[role], nulls_first) for role, nulls_first in DECISION_ORDER  # type: ignore[misc]
            if names.get(role) is not None]


def spark_keys(names: Mapping[str, str | None]) -> list[Column]:
    """Spark sort keys for the roles' columns (``names``: role -> column; a role
    without a column, ``order`` without one, is left out)."""
    from pyspark.sql import functions as F

    keys = []
    for name, nulls_first in _present(names):
        column = F.col("`" + name.replace("`", "``") + "`")
        keys.append(column.asc_nulls_first() if nulls_first else column.asc())
    return keys


def frame_order(frame: Any, names: Mapping[str, str | None]) -> Any:
    """``frame`` (pandas) in decision order: Arrow's multi-key sort of the roles'
    columns (stable), then one ``take`` of the rows."""
    import pyarrow as pa
    import pyarrow.compute as pc

    present = _present(names)
    keys = pa.table({name: pa.array(frame[name], from_pandas=True) for name, _ in present})
    try:
        order = pc.sort_indices(keys, sort_keys=[
            (name, "ascending", "at_start" if nulls_first else "at_end")
            for name, nulls_first in present])
    except (TypeError, ValueError, pa.ArrowInvalid):  # pragma: no cover - pyarrow < 25
        # one placement for every key: only a nulls-first key may hold nulls
        order = pc.sort_indices(keys, sort_keys=[(name, "ascending") for name, _ in present],
                                null_placement="at_start")
    return frame.take(order.to_numpy()).reset_index(drop=True)
