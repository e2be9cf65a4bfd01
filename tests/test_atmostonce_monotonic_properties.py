"""SCMP section 2.2's alternative for a monotonic clock, as properties.

The receiver with ``MonotonicClock(epsilon)`` is compared with the naive reference
(``tests/atmostonce_reference.py``, ``Options.epsilon``: written from the paper's
paragraph) on traces aimed at the alternative's own boundaries: a timestamp equal to
``now + epsilon`` and one above it, arrivals exactly when the restart window ends
(``restart + epsilon``, where ``upper`` becomes that time) and one tick before, a
timestamp equal to the new ``upper`` and one above it, crashes exactly at GC times.
Time never steps back (the alternative requires a monotonic clock).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.atmostonce_reference import Options, RefReceiver
from timebound.core.atmostonce import (
    Fixed,
    LimitedHorizon,
    MonotonicClock,
    Receiver,
    UnlimitedHorizon,
    Verdict,
)

CONNS = ("a", "b", "c")
TS_MODES = ("ct", "ct+1", "upper", "upper+1", "now+eps", "now+eps+1", "now", "now-est",
            "now-est+1", "any")


def monotonic_ts(data: st.DataObject, receiver: Receiver, conn: str, now: int,
                 epsilon: int) -> int:
    mode = data.draw(st.sampled_from(TS_MODES), label="ts mode")
    ct = receiver.lookup(conn)
    base = {
        "ct": ct,
        "ct+1": None if ct is None else ct + 1,
        "upper": receiver.upper,
        "upper+1": receiver.upper + 1,
        "now+eps": now + epsilon,
        "now+eps+1": now + epsilon + 1,
        "now": now,
        "now-est": now - receiver.estimate,
        "now-est+1": now - receiver.estimate + 1,
    }.get(mode)
    if base is None:
        base = data.draw(st.integers(0, 400), label="ts")
    return max(1, base)


def build(data: st.DataObject, kind: str) -> tuple[Receiver, RefReceiver, int]:
    o = Options(estimator=kind, epsilon=data.draw(st.integers(0, 40), label="epsilon"))
    if kind == "fixed":
        o.rho = data.draw(st.integers(1, 40), label="rho")
        estimator = Fixed(o.rho)
    elif kind == "unlimited":
        estimator = UnlimitedHorizon()
    else:
        o.window = data.draw(st.integers(1, 6), label="S")
        o.spikes = data.draw(st.integers(0, o.window - 1), label="H")
        o.p = data.draw(st.integers(1, 4), label="p")
        estimator = LimitedHorizon(o.window, o.spikes, o.p)
    if kind != "limited":
        o.gc_every = data.draw(st.integers(1, 20), label="gc")
    o.recovery_grace = data.draw(st.sampled_from([0, 0, 7]), label="grace")
    receiver = Receiver(estimator, gc_every=o.gc_every,
                        resilience=MonotonicClock(o.epsilon),
                        recovery_grace=o.recovery_grace)
    assert o.epsilon is not None
    return receiver, RefReceiver(o), o.epsilon


def next_now(data: st.DataObject, receiver: Receiver, now: int) -> int:
    """Forward only: to the next timer (the window's end included), one tick before
    it, or by a drawn step."""
    due = receiver.next_deadline()
    choice = data.draw(st.sampled_from(["timer", "before timer", "step"]), label="when")
    if due is not None and due >= now and choice == "timer":
        return due
    if due is not None and due - 1 >= now and choice == "before timer":
        return due - 1
    return now + data.draw(st.integers(0, 25), label="dt")


@given(data=st.data(), kind=st.sampled_from(["fixed", "unlimited", "limited"]))
def test_monotonic_receiver_equals_the_naive_reference(data: st.DataObject,
                                                        kind: str) -> None:
    """Every verdict, ``upper`` and estimate equal the reference's."""
    receiver, ref, epsilon = build(data, kind)
    now = 0
    for _ in range(data.draw(st.integers(1, 50), label="steps")):
        now = next_now(data, receiver, now)
        if not receiver.down and data.draw(st.integers(0, 7), label="crash?") == 0:
            down = data.draw(st.integers(1, 40), label="down")
            receiver.crash(now=now, down=down)
            ref.crash(now, down)
            continue
        conn = data.draw(st.sampled_from(CONNS), label="conn")
        ts = monotonic_ts(data, receiver, conn, now, epsilon)
        verdict = receiver.receive(conn, ts, now=now)
        expected, _, _ = ref.message(conn, ts, now)
        assert verdict.value == expected, (conn, ts, now)
        if not receiver.down:
            assert receiver.upper == ref.upper, now
            assert receiver.estimate == ref.est, now


@given(data=st.data(), kind=st.sampled_from(["fixed", "unlimited", "limited"]))
def test_monotonic_receiver_never_accepts_a_copy_across_crashes(data: st.DataObject,
                                                                 kind: str) -> None:
    """SCMP 2.3 for the alternative: a copy of an accepted ``(conn, ts)`` -- sent again
    right after the restart window, or at ``now + epsilon`` before a crash -- is never
    accepted twice, and a connection's accepted timestamps only increase."""
    receiver, _, epsilon = build(data, kind)
    accepted: dict[str, list[int]] = {}
    now = 0
    for _ in range(data.draw(st.integers(1, 60), label="steps")):
        now = next_now(data, receiver, now)
        action = data.draw(st.sampled_from(["msg", "msg", "again", "crash"]), label="do")
        if action == "crash":
            if receiver.down:
                receiver.restart(now=now)
            else:
                down = data.draw(st.one_of(st.none(), st.integers(1, 40)), label="down")
                receiver.crash(now=now, down=down)
            continue
        conn = data.draw(st.sampled_from(CONNS), label="conn")
        if action == "again" and accepted.get(conn):
            ts = data.draw(st.sampled_from(accepted[conn]), label="old ts")
        else:
            ts = monotonic_ts(data, receiver, conn, now, epsilon)
        if receiver.receive(conn, ts, now=now) is Verdict.ACCEPTED:
            accepted.setdefault(conn, []).append(ts)
    for conn, stamps in accepted.items():
        assert all(a < b for a, b in zip(stamps, stamps[1:])), (conn, stamps)


def test_window_end_boundaries() -> None:
    """The two mutants this file was written for, as one trace: the restart window
    ends exactly at ``restart + epsilon`` with ``upper`` equal to that time, and
    ``now + epsilon`` is the largest timestamp accepted."""
    r = Receiver(Fixed(100), gc_every=50, resilience=MonotonicClock(epsilon=10))
    assert r.receive("a", 11, now=0) is Verdict.EARLY
    assert r.receive("a", 10, now=0) is Verdict.ACCEPTED
    r.crash(now=5, down=15)                      # restart at 20, window [20, 30)
    assert r.receive("b", 25, now=29) is Verdict.RECOVERING
    assert r.receive("b", 30, now=30) is Verdict.STALE
    assert r.upper == 30
    assert r.receive("b", 31, now=30) is Verdict.ACCEPTED
