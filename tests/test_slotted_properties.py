"""Slotted-FIFO receiver: Definition 4.2 rules (i)-(iv) and the obligations of docs/replay-slotted.md,
under any arrival order with loss -- by Hypothesis and exhaustively over permutations."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from timebound.core.slotted import (
    Deliver,
    DiscardReason,
    Kind,
    SlottedReceiver,
    SlottedSender,
    Stamp,
)

KINDS = [Kind.FR, Kind.R, Kind.F, Kind.N]


@dataclass
class Run:
    stamps: list[Stamp]  # by send index
    arrivals: list[int]  # send indices, in arrival order
    actions: list[tuple[int, int, str, DiscardReason | None]]  # (step, msg, deliver|discard, why)
    buffered: set[int]


def run(kinds: list[Kind], arrivals: list[int], f_hold: int | None = None) -> Run:
    sender = SlottedSender()
    stamps = [sender.send(kind) for kind in kinds]
    receiver: SlottedReceiver[int] = SlottedReceiver(f_hold=f_hold)
    actions: list[tuple[int, int, str, DiscardReason | None]] = []
    for step, index in enumerate(arrivals):
        for act in receiver.receive(index, stamps[index], now=step):
            if isinstance(act, Deliver):
                actions.append((step, act.message, "deliver", None))
            else:
                actions.append((step, act.message, "discard", act.reason))
    buffered = {message for message, _ in receiver.held()}
    assert len(buffered) == receiver.buffered
    return Run(stamps, arrivals, actions, buffered)


def check_obligations(r: Run) -> None:
    stamps = r.stamps
    acted = [m for _, m, _, _ in r.actions]
    # nothing acted on twice; only arrived messages; acted-on and buffered are disjoint
    assert len(acted) == len(set(acted))
    assert set(acted) <= set(r.arrivals)
    assert not (set(acted) & r.buffered)
    # every arrived message is either acted on or still buffered
    assert set(acted) | r.buffered == set(r.arrivals)
    delivered = [m for _, m, what, _ in r.actions if what == "deliver"]
    position = {m: i for i, m in enumerate(delivered)}
    frs = [i for i, s in enumerate(stamps) if s.kind is Kind.FR]
    fr_of_slot = {stamps[i].slot: i for i in frs}
    delivered_frs = [m for m in delivered if stamps[m].kind is Kind.FR]
    # (i) FR delivered in send order, with no gap
    assert delivered_frs == frs[: len(delivered_frs)]
    closed = {stamps[m].slot for m in delivered_frs}
    for m in delivered:
        slot = stamps[m].slot
        opener = fr_of_slot.get(slot - 1)
        # (ii)/(iii): delivered only inside its slot (after its opener, before its closer)
        if opener is not None:
            assert opener in position and position[opener] < position[m]
        closer = fr_of_slot.get(slot)
        if closer is not None and closer != m and closer in position:
            assert position[m] < position[closer]
    # (ii) every R of a closed slot is delivered
    for i, s in enumerate(stamps):
        if s.kind is Kind.R and s.slot in closed:
            assert i in position
    # (iv) F delivered in send order within a slot
    by_slot: dict[int, list[int]] = {}
    for m in delivered:
        if stamps[m].kind is Kind.F:
            by_slot.setdefault(stamps[m].slot, []).append(m)
    for ms in by_slot.values():
        assert ms == sorted(ms)
    # every arrived message of a closed slot gets exactly one row; buffered ones none
    for m in r.buffered:
        assert stamps[m].slot not in closed
    # discards are justified by their reason
    for _step, m, what, why in r.actions:
        if what == "discard":
            assert not stamps[m].kind.reliable
            if why is DiscardReason.SLOT_CLOSED:
                assert stamps[m].slot in closed
            else:
                assert why is DiscardReason.OVERTAKEN and stamps[m].kind is Kind.F


def reliable_schedule(r: Run) -> dict[int, int]:
    """For each delivered reliable message: reliable arrivals processed by then."""
    count = 0
    seen_by_step = []
    for index in r.arrivals:
        if r.stamps[index].kind.reliable:
            count += 1
        seen_by_step.append(count)
    return {m: seen_by_step[step] for step, m, what, _ in r.actions
            if what == "deliver" and r.stamps[m].kind.reliable}


@st.composite
def scenarios(draw: st.DrawFn, max_size: int = 24) -> tuple[list[Kind], list[int]]:
    kinds = draw(st.lists(st.sampled_from(KINDS), max_size=max_size))
    lost = draw(st.lists(st.booleans(), min_size=len(kinds), max_size=len(kinds)))
    surviving = [i for i, k in enumerate(kinds) if k.reliable or not lost[i]]
    order = draw(st.permutations(surviving))
    return kinds, list(order)


@given(scenarios())
def test_definition_4_2_under_any_arrival_order_with_loss(case: tuple[list[Kind], list[int]]) -> None:
    kinds, arrivals = case
    r = run(kinds, arrivals)
    check_obligations(r)
    # liveness: every reliable message arrived, so every one is delivered
    delivered = {m for _, m, what, _ in r.actions if what == "deliver"}
    assert {i for i, k in enumerate(kinds) if k.reliable} <= delivered
    # without f_hold nothing is ever overtaken (an F waits for its gap until slot end)
    assert all(why is not DiscardReason.OVERTAKEN for *_, why in r.actions)


@given(scenarios(), st.integers(min_value=0, max_value=4))
def test_f_hold_keeps_obligations(case: tuple[list[Kind], list[int]], hold: int) -> None:
    kinds, arrivals = case
    check_obligations(run(kinds, arrivals, f_hold=hold))


@given(scenarios())
def test_reliable_never_waits_on_unreliable(case: tuple[list[Kind], list[int]]) -> None:
    kinds, arrivals = case
    with_unreliable = reliable_schedule(run(kinds, arrivals))
    only_reliable = [i for i in arrivals if kinds[i].reliable]
    without = reliable_schedule(run(kinds, only_reliable))
    assert with_unreliable == without


@given(scenarios())
def test_open_slot_r_and_n_are_delivered_on_arrival(case: tuple[list[Kind], list[int]]) -> None:
    kinds, arrivals = case
    sender = SlottedSender()
    stamps = [sender.send(kind) for kind in kinds]
    receiver: SlottedReceiver[int] = SlottedReceiver()
    for step, index in enumerate(arrivals):
        open_slot = receiver.slot
        acts = receiver.receive(index, stamps[index], now=step)
        if stamps[index].slot == open_slot and stamps[index].kind in (Kind.R, Kind.N):
            assert isinstance(acts[0], Deliver) and acts[0].message == index


PATTERNS = [
    [Kind.F, Kind.F, Kind.R, Kind.FR, Kind.F, Kind.N],
    [Kind.R, Kind.F, Kind.FR, Kind.R, Kind.F, Kind.FR],
    [Kind.N, Kind.FR, Kind.F, Kind.F, Kind.F, Kind.FR],
    [Kind.F, Kind.FR, Kind.FR, Kind.R, Kind.N],
]


@pytest.mark.parametrize("kinds", PATTERNS, ids=lambda ks: "-".join(k.value for k in ks))
def test_every_permutation_and_loss_pattern(kinds: list[Kind]) -> None:
    unreliable = [i for i, k in enumerate(kinds) if not k.reliable]
    runs = 0
    for lost_mask in range(1 << len(unreliable)):
        lost = {unreliable[b] for b in range(len(unreliable)) if lost_mask >> b & 1}
        surviving = [i for i in range(len(kinds)) if i not in lost]
        for order in itertools.permutations(surviving):
            r = run(kinds, list(order))
            check_obligations(r)
            runs += 1
            delivered = {m for _, m, what, _ in r.actions if what == "deliver"}
            assert {i for i, k in enumerate(kinds) if k.reliable} <= delivered
            # with nothing lost and in send order, everything is delivered at once
            if not lost and list(order) == surviving:
                assert [m for _, m, _, _ in r.actions] == surviving
                assert all(step == m for step, m, _, _ in r.actions)
    assert runs > 0


@st.composite
def duplicating_scenarios(draw: st.DrawFn, max_size: int = 16) -> tuple[list[Kind], list[int]]:
    """Like ``scenarios``, plus transport duplicates of unreliable (F, N) messages at
    any position (the reliable transport numbers FR/R and drops its own copies)."""
    kinds, order = draw(scenarios(max_size))
    unreliable = [i for i in order if not kinds[i].reliable]
    if unreliable:
        copies = draw(st.lists(st.sampled_from(unreliable), max_size=6))
        for copy in copies:
            order.insert(draw(st.integers(0, len(order))), copy)
    return kinds, order


@given(duplicating_scenarios(), st.one_of(st.none(), st.integers(0, 4)))
def test_a_duplicate_f_is_never_delivered_twice(
    case: tuple[list[Kind], list[int]], hold: int | None
) -> None:
    kinds, arrivals = case
    r = run(kinds, arrivals, f_hold=hold)
    delivered = [m for _, m, what, _ in r.actions if what == "deliver"]
    f_delivered = [m for m in delivered if kinds[m] is Kind.F]
    assert len(f_delivered) == len(set(f_delivered))
    # (iv) still: F of one slot delivered in send order
    by_slot: dict[int, list[int]] = {}
    for m in f_delivered:
        by_slot.setdefault(r.stamps[m].slot, []).append(m)
    assert all(ms == sorted(ms) for ms in by_slot.values())
    assert {i for i, k in enumerate(kinds) if k.reliable} <= set(delivered)
    # every F arrival gets at most one deliver-or-discard row per copy
    assert len([m for m in r.actions if kinds[m[1]] is Kind.F]) <= \
        len([m for m in arrivals if kinds[m] is Kind.F])


def test_regression_transport_duplicate_of_a_delivered_f() -> None:
    """The reviewer's mutant: a duplicate of the last delivered F (order == R_F) was
    buffered as a new gap-waiter and delivered again when its slot closed."""
    r = run([Kind.F, Kind.F, Kind.FR], [0, 0, 1, 2])
    delivered = [m for _, m, what, _ in r.actions if what == "deliver"]
    assert delivered == [0, 1, 2]
