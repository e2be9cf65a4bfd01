"""Section 4's guarantees for the merger over random G1/G2 executions: Theorems 4.4
(same order at every merger), 4.5 (causal delivery), Lemma 4.2 (buffered at most
δ + 3ε), 4.3 (stacking), 4.6 (stabilization), plus duplicates and lates."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from tests.test_causal_execution import Arrival, Execution, executions, simulate
from timebound.core.causal import Timestamp
from timebound.core.merge import Delivery, Envelope, Merger, Verdict, level_parameters


def run(arrivals: list[Arrival], epsilon: int, delta: int, *, rc: bool = False,
        ) -> tuple[list[Delivery], list[Verdict]]:
    """Feed one merger its arrivals (sorted by ``at``) with the contract's timing."""
    merger = Merger(epsilon, delta)
    out: list[Delivery] = []
    verdicts = []
    last = None
    for a in sorted(arrivals, key=lambda a: a.at):
        if last is None or a.at > last:
            out += merger.handle_timer(now=a.at - 1)
            last = a.at
        verdicts.append(merger.receive(
            Envelope(f"p{a.proc}", a.msg, a.rc if rc else a.stamp), now=a.at))
    out += merger.flush()
    assert merger.statistics().buffered == 0
    return out, verdicts


def _by_merger(ex: Execution) -> dict[int, list[Arrival]]:
    lanes: dict[int, list[Arrival]] = {}
    for a in ex.arrivals:
        lanes.setdefault(a.merger, []).append(a)
    return lanes


def _check_order(ex: Execution, orders: list[list[str]], *, since: int = -1) -> None:
    sends = {e.msg: e for e in ex.events if e.kind == "send"}
    fresh = {m for m, e in sends.items() if e.real >= since}
    for order in orders:
        where = {m: i for i, m in enumerate(order)}
        for m1 in where.keys() & fresh:
            for m2 in where.keys() & fresh:
                if ex.happened_before(sends[m1], sends[m2]):
                    assert where[m1] < where[m2], (m1, m2)  # Theorem 4.5
    for a in orders:
        for b in orders:
            common = set(a) & set(b) & fresh
            assert [m for m in a if m in common] == [m for m in b if m in common]  # 4.4


@given(executions(mergers=3), st.booleans())
def test_theorems_4_4_and_4_5_and_lemma_4_2(ex: Execution, rc: bool) -> None:
    orders = []
    for arrivals in _by_merger(ex).values():
        out, verdicts = run(arrivals, ex.epsilon, ex.delta, rc=rc)
        assert all(v is Verdict.BUFFERED for v in verdicts)  # G2 kept: nothing late
        assert len(out) == len(arrivals)  # every message eventually delivered
        if not rc:
            assert all(d.buffered_for <= ex.delta + 3 * ex.epsilon for d in out)  # 4.2
        orders.append([d.envelope.msg for d in out])
    _check_order(ex, orders)


@given(executions(mergers=2, duplicates=True))
def test_repeats_are_suppressed(ex: Execution) -> None:
    for arrivals in _by_merger(ex).values():
        out, verdicts = run(arrivals, ex.epsilon, ex.delta)
        msgs = [d.envelope.msg for d in out]
        assert len(msgs) == len(set(msgs)) == len({a.msg for a in arrivals})
        assert verdicts.count(Verdict.DUPLICATE) == len(arrivals) - len(set(msgs))


@given(executions(mergers=3), st.integers(0, 3))
def test_theorem_4_3_mergers_stack(ex: Execution, link_skew_seed: int) -> None:
    """Level-1 mergers publish what they deliver, at the delivery time, to level-2
    mergers of ds(ε, δ + 3ε) whose clocks differ from theirs by at most ε: nothing is
    late at level 2 and the order is still causal and the same everywhere."""
    rng = random.Random(link_skew_seed)
    eps2, delta2 = level_parameters(ex.epsilon, ex.delta)
    assert (eps2, delta2) == (ex.epsilon, ex.delta + 3 * ex.epsilon)
    level2: dict[int, list[Arrival]] = {0: [], 1: []}
    for arrivals in _by_merger(ex).values():
        out, _ = run(arrivals, ex.epsilon, ex.delta)
        for d in out:
            for k in level2:
                if rng.random() < 0.8:
                    at = d.time + rng.randint(-ex.epsilon, ex.epsilon)
                    level2[k].append(Arrival(k, d.envelope.msg, int(d.envelope.proc[1:]), at,
                                             at, d.envelope.stamp, None, 0))  # type: ignore[arg-type]
    orders = []
    for arrivals in level2.values():
        out, verdicts = run(arrivals, eps2, delta2)
        assert Verdict.LATE not in verdicts
        orders.append([d.envelope.msg for d in out])
    _check_order(ex, orders)


@st.composite
def corrupted(draw: st.DrawFn) -> Execution:
    epsilon = draw(st.integers(1, 3))
    delta = draw(st.integers(0, 5))
    corrupt_at = draw(st.integers(0, 10))
    ticks = corrupt_at + delta + 4 * epsilon + 2 + draw(st.integers(1, 25))
    return simulate(random.Random(draw(st.integers(0, 2**32 - 1))), epsilon, delta,
                    draw(st.integers(2, 4)), ticks, mergers=3, corrupt_at=corrupt_at)


@given(corrupted())
def test_theorem_4_6_merge_stabilizes(ex: Execution) -> None:
    """Corrupted process states, in-flight messages and junk in the mergers' buffers:
    nothing deadlocks (everything buffered is delivered once, at its deadline) and
    messages sent from δ + 4ε + 2 after the fault on are merged causally and alike."""
    assert ex.corrupt_at is not None
    orders = []
    for arrivals in _by_merger(ex).values():
        out, _ = run(arrivals, ex.epsilon, ex.delta)
        assert [d.time for d in out] == sorted(d.time for d in out)
        assert len({d.envelope.msg for d in out}) == len(out)
        orders.append([d.envelope.msg for d in out])
    _check_order(ex, orders, since=ex.corrupt_at + ex.delta + 4 * ex.epsilon + 2)


def test_late_and_duplicate_classification_and_statistics() -> None:
    m = Merger(2, 3)
    stamp = Timestamp(5, 1, (0, 0, 1, 1))  # deadline 5 + 1 + 3 + 2 = 11
    assert m.deadline(stamp) == 11
    assert m.receive(Envelope("p1", "a", stamp), now=6) is Verdict.BUFFERED
    assert m.receive(Envelope("p1", "a", stamp), now=7) is Verdict.DUPLICATE
    assert m.receive(Envelope("p2", "a", stamp), now=7) is Verdict.BUFFERED  # other proc
    assert m.receive(Envelope("p1", "b", Timestamp(0, 0, (0, 0, 1, 0))), now=8) is Verdict.LATE
    assert m.next_deadline() == 11
    assert m.handle_timer(now=10) == []
    got = m.handle_timer(now=11)
    assert [(d.envelope.proc, d.time, d.buffered_for) for d in got] == [("p1", 11, 5), ("p2", 11, 4)]
    assert m.next_deadline() is None
    assert m.receive(Envelope("p1", "a", stamp), now=11) is Verdict.DUPLICATE  # delivered
    s = m.statistics()
    assert (s.received, s.delivered, s.late, s.duplicates) == (5, 2, 1, 2)
    assert (s.buffered, s.max_buffered, s.total_buffering, s.max_buffering) == (0, 2, 9, 5)


def test_equal_deadlines_go_by_less_then_proc_then_msg() -> None:
    m = Merger(2, 0)
    low = Timestamp(4, 1, (0, 0, 1, 1))  # kn[c]=1
    high = Timestamp(5, 0, (0, 1, 2, 0))  # same r + c, kn[c]=2: less(low, high)
    for proc, msg, stamp in [("p0", "z", high), ("p9", "y", low), ("p1", "b", low),
                             ("p1", "a", low)]:
        m.receive(Envelope(proc, msg, stamp), now=0)
    assert [(d.envelope.proc, d.envelope.msg) for d in m.flush()] == [
        ("p1", "a"), ("p1", "b"), ("p9", "y"), ("p0", "z")]


def test_retain_forgets_old_ids_only() -> None:
    m = Merger(1, 0, retain=2)
    s = Timestamp(3, 0, (0, 1))
    m.receive(Envelope("p", "a", s), now=3)
    assert [d.time for d in m.handle_timer(now=4)] == [4]
    assert m.receive(Envelope("p", "a", Timestamp(9, 0, (0, 1))), now=6) is Verdict.DUPLICATE
    m.handle_timer(now=7)  # deadline 4 < 7 - 2: forgotten
    assert m.receive(Envelope("p", "a", Timestamp(9, 0, (0, 1))), now=7) is Verdict.BUFFERED


@given(epsilon=st.integers(1, 8), delta=st.integers(0, 30), r=st.integers(0, 1000),
       data=st.data())
def test_arrivals_using_the_full_epsilon_slack_are_never_late(
    epsilon: int, delta: int, r: int, data: st.DataObject
) -> None:
    """G2 puts the arrival by ``r + c + δ`` on the sender's clock and G1 lets the
    merger's clock run up to ε ahead: every arrival up to ``r + c + δ + ε`` is buffered
    and delivered exactly then; one tick later it is late. (The old generator capped
    arrivals at s + δ on the merger's clock, so a deadline without ε survived.)"""
    c = data.draw(st.integers(0, epsilon - 1), label="c")
    slack = data.draw(st.one_of(st.just(delta + epsilon), st.integers(0, delta + epsilon)),
                      label="slack")
    kn = tuple([0] * (2 * epsilon))
    stamp = Timestamp(r, c, kn)
    merger = Merger(epsilon, delta)
    now = r + c + slack
    assert merger.receive(Envelope("p", "m", stamp), now=now) is Verdict.BUFFERED
    assert merger.next_deadline() == r + c + delta + epsilon
    assert merger.handle_timer(now=r + c + delta + epsilon - 1) == []
    [got] = merger.handle_timer(now=r + c + delta + epsilon)
    assert got.time == r + c + delta + epsilon
    late = Merger(epsilon, delta)
    assert late.receive(Envelope("p", "m", stamp), now=r + c + delta + epsilon + 1) \
        is Verdict.LATE
