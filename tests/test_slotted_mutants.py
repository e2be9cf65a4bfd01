"""Slotted FIFO liveness as a property: with no loss and arrival in send order, every
message is delivered at once, in send order (written for a mutant of
``scripts/mutate.py`` -- the sender not restarting its F numbering at a new slot --
that the safety properties allow, since holding messages back is always safe, and
that only an exhaustive hand-listed permutation test caught)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.test_slotted_properties import KINDS, run
from timebound.core.slotted import Kind


@given(kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=30),
       f_hold=st.sampled_from([None, 0, 5]))
def test_in_order_arrivals_are_all_delivered_at_once(kinds: list[Kind],
                                                     f_hold: int | None) -> None:
    r = run(kinds, list(range(len(kinds))), f_hold=f_hold)
    assert [(step, m, what) for step, m, what, _ in r.actions] == [
        (i, i, "deliver") for i in range(len(kinds))]
    assert not r.buffered
