"""``AtMostOnceAdapter.decide_receiver`` (the column path over plain columns) decides
exactly as ``decide`` row by row: same verdicts, estimates, table sizes, counters and
clock, for every estimator, resilient receivers going down, and hash classes split
inside one call; it owns the ``at`` rule (an error naming the row, nothing decided)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from timebound.adapters.atmostonce import VERDICT_NAMES, AtMostOnceAdapter, AtMostOnceOptions
from timebound.core.atmostonce import VERDICT_CODES, crc32_classes
from timebound.errors import TraceError

OPTIONS: list[dict[str, Any]] = [
    {"estimator": "fixed", "rho": 40, "gc_every": 25},
    {"estimator": "unlimited", "gc_every": 30},
    {"estimator": "limited", "window": 4, "spikes": 1, "p": 2},
    {"estimator": "fixed", "rho": 40, "gc_every": 25, "resilient": True, "beta": 50,
     "latest_every": 20, "reorder_window": 3},
]

messages = st.lists(st.tuples(st.integers(0, 7), st.integers(1, 400), st.integers(0, 9)),
                    min_size=1, max_size=120)


def _adapter(values: dict[str, Any], classes: int) -> AtMostOnceAdapter:
    return AtMostOnceAdapter(AtMostOnceOptions.from_values({**values, "classes": classes}))


@given(messages, st.sampled_from(range(len(OPTIONS))), st.integers(1, 3),
       st.integers(0, 119))
def test_column_path_equals_the_row_path(rows: list[tuple[int, int, int]], which: int,
                                         classes: int, crash_after: int) -> None:
    values = OPTIONS[which]
    conns = [f"c{c}" for c, _, _ in rows]
    stamps = [ts for _, ts, _ in rows]
    times, now = [], 0
    for _, _, step in rows:
        now += step
        times.append(now)
    lines = list(range(1, len(rows) + 1))
    by_row, by_column = _adapter(values, classes), _adapter(values, classes)
    if values.get("resilient"):  # both receivers crash at the same point: some rows are down
        for a in (by_row, by_column):
            a.open_receiver("t", 0, "s1", 0).crash(now=0, down=5 + crash_after % 40)
    expected = [by_row.decide("t", line, "s1", conn, ts, at)
                for line, conn, ts, at in zip(lines, conns, stamps, times)]
    per_row = crc32_classes(conns, classes)
    cls: int | list[int] = per_row[0] if len(set(per_row)) == 1 else per_row
    got = by_column.decide_receiver("t", lines, "s1", conns, stamps, times, cls)
    up = got.up if got.up is not None else [True] * len(rows)
    assert [(VERDICT_NAMES[code], rho if ok else None, size if ok else None)
            for code, rho, size, ok in zip(got.codes, got.estimates, got.sizes, up)] == expected
    assert by_column.summary() == by_row.summary()
    assert by_column.clock("s1") == by_row.clock("s1") == times[-1]


def test_time_going_back_is_an_error_naming_the_row_and_nothing_is_decided() -> None:
    a = _adapter(OPTIONS[0], 1)
    with pytest.raises(TraceError, match=r"t:12: field 'at': goes back in time .*\(4 < 9\)"):
        a.decide_receiver("t", [10, 11, 12], "s1", ["a", "b", "c"], [1, 2, 3], [1, 9, 4], 0)
    assert dict(a.summary())["messages"] == 0 and a.clock("s1") is None
    a.decide_receiver("t", [1], "s1", ["a"], [5], [9], 0)
    with pytest.raises(TraceError, match=r"t:7: field 'at': goes back in time .*\(0 < 9\)"):
        a.decide_receiver("t", [7, 8], "s1", ["a", "b"], [6, 7], [0, 10], 0)
    assert dict(a.summary())["messages"] == 1 and a.clock("s1") == 9


def test_verdict_names_are_the_cores_codes() -> None:
    assert {name: VERDICT_NAMES.index(name) for name in VERDICT_NAMES} == VERDICT_CODES
