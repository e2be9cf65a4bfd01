"""The paper's guarantees for the logical timestamps, over random G1/G2 executions.

Theorem 3.6 (causality implies ``less``) for ⟨r, c, kn⟩, ⟨r, c⟩ and the section 5.2
variant; Lemmas 3.1-3.4 and no reset for ⟨r, c, kn⟩; Observation 3.5; Theorem 3.7
(recovery after arbitrary corruption of states and in-flight messages).
"""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from tests.test_causal_execution import Execution, executions, simulate
from timebound.core.causal import Timestamp, check, less, less_rc


def _pairs(ex: Execution, since: int = -1):  # type: ignore[no-untyped-def]
    events = [e for e in ex.events if e.real >= since]
    for f in events:
        for e in events:
            if ex.happened_before(e, f):
                yield e, f


@given(executions())
def test_theorem_3_6_rckn_causality_implies_less(ex: Execution) -> None:
    for e, f in _pairs(ex):
        assert less(e.stamp, f.stamp), (e, f)


@given(executions())
def test_theorem_3_6_rc_causality_implies_less(ex: Execution) -> None:
    for e, f in _pairs(ex):
        assert less_rc(e.rc, f.rc, ex.epsilon), (e, f)


@st.composite
def quiet_executions(draw: st.DrawFn) -> Execution:
    epsilon = draw(st.integers(1, 3))
    period = draw(st.integers(2 * epsilon + 2, 6 * epsilon + 8))
    return simulate(random.Random(draw(st.integers(0, 2**32 - 1))), epsilon,
                    draw(st.integers(0, 5)), draw(st.integers(2, 5)),
                    draw(st.integers(1, 60)), period=period)


@given(quiet_executions())
def test_theorem_3_6_bounded_c_variant(ex: Execution) -> None:
    for e, f in _pairs(ex):
        assert e.brc is not None and f.brc is not None
        assert less_rc(e.brc, f.brc, ex.epsilon), (e, f)


def _known(ex: Execution, e, t: int) -> int:  # type: ignore[no-untyped-def]
    """|{e} ∪ {f : f -> e, r.f = r.e + t}|, the virtual events at rt 0 included."""
    when = e.rt + t
    count = sum(1 for f in ex.events[: e.index + 1]
                if f.rt == when and (f is e or ex.happened_before(f, e)))
    if when == 0:  # each process whose history e knows contributes its virtual event
        count += sum(1 for k in range(ex.n) if e.vc[k] >= 1)
    return count


@given(executions())
def test_lemmas_3_1_to_3_4_hold_and_nothing_resets(ex: Execution) -> None:
    eps = ex.epsilon
    for e in ex.events:
        s = e.stamp
        assert not e.reset
        assert 0 <= s.c < eps  # Lemma 3.2
        assert s.kn_at(s.c) > 0  # Lemma 3.1
        assert all(s.kn_at(t) == 0 for t in range(s.c + 1, eps))
        for t in range(-eps, eps):
            assert 0 <= s.kn_at(t) <= _known(ex, e, t)  # Lemma 3.3
            assert s.kn_at(t) <= ex.n  # Lemma 3.4
        assert check(s.c, s.kn, ex.n)


@given(executions())
def test_observation_3_5_less_is_well_formed_and_transitive(ex: Execution) -> None:
    stamps = [e.stamp for e in ex.events][:25]
    for a in stamps:
        assert not less(a, a)
        for b in stamps:
            assert not (less(a, b) and less(b, a))
            if less(a, b):
                for c in stamps:
                    if less(b, c):
                        assert less(a, c)


@given(executions())
def test_tiebreak_orders_equal_sums_exactly_as_lexgraph(ex: Execution) -> None:
    stamps = [e.stamp for e in ex.events][:30]
    for a in stamps:
        for b in stamps:
            if a.r + a.c == b.r + b.c:
                assert less(a, b) == (a.tiebreak() < b.tiebreak())


@st.composite
def corrupted(draw: st.DrawFn) -> Execution:
    epsilon = draw(st.integers(1, 3))
    delta = draw(st.integers(0, 5))
    n = draw(st.integers(2, 4))
    corrupt_at = draw(st.integers(0, 10))
    recovery = delta + 4 * epsilon + 2
    ticks = corrupt_at + recovery + draw(st.integers(1, 25))
    return simulate(random.Random(draw(st.integers(0, 2**32 - 1))), epsilon, delta, n,
                    ticks, corrupt_at=corrupt_at)


@given(corrupted())
def test_theorem_3_7_recovers_within_epsilon_delta(ex: Execution) -> None:
    """After corrupting every state and every in-flight message (sent via the bounded
    wire form), causality is tracked again from ``δ + 4ε + 2`` ticks on: O(ε + δ)."""
    assert ex.corrupt_at is not None
    since = ex.corrupt_at + ex.delta + 4 * ex.epsilon + 2
    for e in ex.events:
        if e.real >= ex.corrupt_at:
            s = e.stamp  # every event's state is legitimate again (step 2)
            assert check(s.c, s.kn, ex.n)
    for e, f in _pairs(ex, since):
        assert less(e.stamp, f.stamp), (e, f)
        assert less_rc(e.rc, f.rc, ex.epsilon), (e, f)


def test_corruption_is_real_and_resets_fire() -> None:
    """The recovery test is not vacuous: corruption does break things and trigger resets."""
    resets = 0
    broken = 0
    for seed in range(60):
        ex = simulate(random.Random(seed), 2, 2, 3, 40, corrupt_at=5)
        resets += sum(e.reset for e in ex.events)
        broken += sum(1 for e, f in _pairs(ex) if not less(e.stamp, f.stamp))
    assert resets > 0 and broken > 0


def test_initial_stamp_is_the_virtual_event() -> None:
    from timebound.core.causal import CausalProcess, initial

    assert initial(2) == Timestamp(0, 0, (0, 0, 1, 0)) == CausalProcess(2).timestamp
