"""The at-most-once rule across a change of ``--classes`` (core.atmostonce.aligned_records,
used by the live server's class files): every class starts from the largest ``latest``
of any class storage, so a connection whose class changed is still bounded."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from timebound.core.atmostonce import StableRecord, aligned_records
from timebound.errors import ProtocolUsageError

R = StableRecord


def test_one_class_and_no_other_storage_is_left_alone() -> None:
    assert aligned_records([R(50, 10, 1)], 1, R(99, 1, 1)) == [None]
    assert aligned_records([None], 1, None) == [None]


def test_an_empty_class_gets_the_largest_latest_or_the_start() -> None:
    start = R(70, 5, 1)
    assert aligned_records([None, None], 2, start) == [start, start]
    got = aligned_records([R(100, 10, 2), None], 2, start)
    assert got == [None, R(100, 10, 2)]
    got = aligned_records([R(40, 10, 2), None], 2, start)
    assert got == [None, R(70, 10, 2)]  # max(start, largest), the largest's estimate


def test_a_class_behind_is_raised_and_a_dropped_class_still_counts() -> None:
    # a run with 3 classes wrote class 2 furthest; this start has 2 classes
    got = aligned_records([R(10, 1, 1), R(20, 2, 1), R(90, 3, 1)], 2, None)
    assert got == [R(90, 1, 1), R(90, 2, 1)]


def test_too_few_records_is_a_usage_error() -> None:
    with pytest.raises(ProtocolUsageError):
        aligned_records([None], 2, None)


records = st.lists(st.one_of(st.none(), st.builds(R, st.integers(1, 10**6),
                                                   st.integers(1, 100), st.integers(1, 4))),
                   min_size=1, max_size=6)


@given(records, st.integers(1, 6), st.one_of(st.none(), st.builds(
    R, st.integers(1, 10**6), st.integers(1, 100), st.integers(1, 4))))
def test_after_aligning_no_class_is_behind_any_storage(
        held: list[StableRecord | None], classes: int, start: StableRecord | None) -> None:
    """The theorem's condition: after the start every class's latest is at least every
    latest any storage held (and the start's, for a class that had none)."""
    held = held + [None] * max(0, classes - len(held))
    wanted = aligned_records(held, classes, start)
    after = [w if w is not None else h for w, h in zip(wanted, held[:classes], strict=True)]
    present = [r.latest for r in held if r is not None]
    if not present and start is None:
        assert after == held[:classes]
        return
    if classes == 1 and len(held) == 1 and held[0] is not None:
        return  # nothing else to be bounded by
    for k, record in enumerate(after):
        assert record is not None
        assert record.latest >= max(present, default=0)
        if held[k] is None and start is not None:
            assert record.latest >= start.latest
