"""The decision order of ``at_most_once``: how a receiver takes its rows, defined once.

A receiver takes its rows in ``at`` order; rows with equal ``at`` by the caller's
``order`` column (nulls first), then ``ts``, then ``conn`` (as a string), then
Spark's ``xxhash64`` of the row's columns (the operator's ``TIE`` column). Every
other key is never null (the row checks refuse a null before a row is decided).

``DECISION_ORDER`` is that rule as data; every place that sorts derives from it:
``arrow_order`` sorts a batch DataFrame's partition in its Python worker (``_batch``)
and ``frame_order`` one key's rows of a micro-batch (``_stream``: Spark hands the rows
of a group in no particular order), both with Arrow's sort, in the worker that decides
the rows: no row order is left to Spark. Strings compare as UTF-8 bytes, as Spark
compares them too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: (role, nulls first) in priority order. ``order`` is present only when the caller
#: names an order column; ``tie`` is the row hash.
DECISION_ORDER: tuple[tuple[str, bool], ...] = (
    ("at", False), ("order", True), ("ts", False), ("conn", False), ("tie", False))


def _present(names: Mapping[str, str | tuple[str, ...] | None]) -> list[tuple[str, bool]]:
    """The sort keys: each role's column (``order`` may be several columns, each nulls
    first: ``timebound stream``'s ``seq``, file and line), a column once: one that
    several roles name (a stream reads the caller's columns, and ``ts`` and ``at`` may
    be one) sorts at its first role, where a later role adds nothing."""
    keys: dict[str, bool] = {}
    for role, nulls_first in DECISION_ORDER:
        name = names.get(role)
        if name is None:
            continue
        for part in name if isinstance(name, tuple) else (name,):
            keys.setdefault(part, nulls_first)
    return list(keys.items())


def frame_order(frame: Any, names: Mapping[str, str | tuple[str, ...] | None]) -> Any:
    """``frame`` (pandas) in decision order: Arrow's multi-key sort of the roles'
    columns (stable), then one ``take`` of the rows."""
    import pyarrow as pa

    keys = pa.table({name: pa.array(frame[name], from_pandas=True)
                     for name, _ in _present(names)})
    return frame.take(arrow_order(keys, names).to_numpy()).reset_index(drop=True)


def arrow_order(table: Any, names: Mapping[str, str | tuple[str, ...] | None]) -> Any:
    """The row indices of ``table`` (Arrow, holding the roles' columns) in decision
    order (a stable sort)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    present = _present(names)
    keys = table.select([name for name, _ in present])
    try:
        order = pc.sort_indices(keys, sort_keys=[
            (name, "ascending", "at_start" if nulls_first else "at_end")
            for name, nulls_first in present])
    except (TypeError, ValueError, pa.ArrowInvalid):  # pragma: no cover - pyarrow < 25
        # one placement for every key: only a nulls-first key may hold nulls
        order = pc.sort_indices(keys, sort_keys=[(name, "ascending") for name, _ in present],
                                null_placement="at_start")
    return order
