"""A random-execution generator that keeps the paper's guarantees G1 and G2.

Used by the causal and merge property tests (imported as ``test_causal_execution``);
the tests in this file check the generator itself.

Real time advances in integer ticks T. Process j's clock is ``T + o_j(T)`` with the
offset ``o_j`` a random walk in ``[0, ε]`` that never makes the clock go backwards,
so any two clocks differ by at most ε (G1). Each process has at most one event per
clock value. A message sent at clock s may be received at clock ``<= s + δ`` (G2) and,
so that the knowledge it carries is possible under G1 with one event per tick (the
paper's "can be received at j only when rt.j is incremented"), only once
``r.m + c.m < rt + ε``; otherwise it is lost. Within a tick, local and send events
happen before receives, so a message can be received with zero delay. The trace order
(real time, then that order) is causally consistent.

Each process runs ``CausalProcess`` (stamps sent through the bounded ``WireCodec``) and
``RCProcess`` side by side. Causality is tracked exactly with vector clocks. Messages
can also be published to mergers (arrival at a merger clock within ``[.., s + δ]``).
``corrupt_at`` corrupts, at that real tick, every process's state, every in-flight
message's bytes and stamps, and inserts junk envelopes for the mergers.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from hypothesis import given
from hypothesis import strategies as st

from timebound.core.causal import (
    BoundedRCProcess,
    CausalProcess,
    QuietWindows,
    RCProcess,
    RCTimestamp,
    Timestamp,
    WireCodec,
)


@dataclass
class Event:
    index: int
    kind: str  # local | send | recv
    proc: int
    rt: int
    real: int
    msg: str | None
    stamp: Timestamp
    rc: RCTimestamp
    seq: int  # 1-based index of the event on its process
    vc: tuple[int, ...]  # vector clock (events of each process in the causal past)
    reset: bool = False
    brc: RCTimestamp | None = None  # section 5.2 stamp, when quiet windows are on


@dataclass
class Arrival:
    merger: int
    msg: str
    proc: int
    at: int
    real: int
    stamp: Timestamp
    rc: RCTimestamp
    send_index: int  # -1 for junk


@dataclass
class _Flight:
    msg: str
    sender: int
    send_index: int
    dest: int
    wire: bytes
    rc: RCTimestamp
    brc: RCTimestamp | None
    s: int  # sender clock at send
    earliest: int  # the receive condition r.m + c.m < rt + ε as a clock bound
    real: int


@dataclass
class Execution:
    epsilon: int
    delta: int
    n: int
    events: list[Event] = field(default_factory=list)
    arrivals: list[Arrival] = field(default_factory=list)
    corrupt_at: int | None = None

    def happened_before(self, e: Event, f: Event) -> bool:
        return e is not f and f.vc[e.proc] >= e.seq

    def rows(self) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        for e in self.events:
            row: dict[str, object] = {"type": e.kind, "proc": f"p{e.proc}", "rt": e.rt}
            if e.msg is not None:
                row["msg"] = e.msg
            out.append(row)
        return out


def simulate(
    rng: random.Random,
    epsilon: int,
    delta: int,
    n: int,
    ticks: int,
    *,
    mergers: int = 0,
    corrupt_at: int | None = None,
    duplicates: bool = False,
    period: int | None = None,
) -> Execution:
    ex = Execution(epsilon, delta, n, corrupt_at=corrupt_at)
    codec = WireCodec(epsilon, delta, n)
    procs = [CausalProcess(epsilon, n) for _ in range(n)]
    rcs = [RCProcess(epsilon) for _ in range(n)]
    windows = QuietWindows(epsilon, period) if period is not None else None
    brcs = [BoundedRCProcess(epsilon, period) for _ in range(n)] if period is not None else []
    offsets = [rng.randint(0, epsilon) for _ in range(n)]
    m_offsets = [rng.randint(0, epsilon) for _ in range(mergers)]
    last_rt = [0] * n
    seqs = [0] * n
    vcs = [[0] * n for _ in range(n)]
    flights: list[_Flight] = []
    send_vc: dict[str, tuple[int, ...]] = {}
    counter = 0

    def clock(j: int, T: int) -> int:
        return T + offsets[j]

    def record(kind: str, j: int, T: int, msg: str | None, stamp: Timestamp,
               rc: RCTimestamp, reset: bool, brc: RCTimestamp | None = None) -> Event:
        seqs[j] += 1
        vcs[j][j] = seqs[j]
        ev = Event(len(ex.events), kind, j, clock(j, T), T, msg, stamp, rc, seqs[j],
                   tuple(vcs[j]), reset, brc)
        ex.events.append(ev)
        last_rt[j] = clock(j, T)
        return ev

    for T in range(ticks):
        for j in range(n):
            offsets[j] = min(epsilon, max(0, offsets[j] + rng.choice((-1, 0, 0, 1))))
        for k in range(mergers):
            m_offsets[k] = min(epsilon, max(0, m_offsets[k] + rng.choice((-1, 0, 0, 1))))
        if corrupt_at is not None and T == corrupt_at:
            _corrupt(rng, ex, procs, rcs, flights, codec, T, mergers, m_offsets)
        # drop messages whose G2 window has closed
        flights = [f for f in flights if clock(f.dest, T) <= f.s + delta]
        order = list(range(n))
        rng.shuffle(order)
        wants_recv = []
        for j in order:
            rt = clock(j, T)
            if rt <= last_rt[j] or (windows is not None and windows.quiet(rt)):
                continue
            roll = rng.random()
            if roll < 0.45:
                wants_recv.append(j)
            elif roll < 0.6:
                before = procs[j].resets
                stamp = procs[j].local(rt)
                record("local", j, T, None, stamp, rcs[j].local(rt), procs[j].resets > before,
                       brcs[j].local(rt) if brcs else None)
            elif roll < 0.85:
                counter += 1
                msg = f"m{counter}"
                before = procs[j].resets
                stamp = procs[j].send(now=rt)
                rc = rcs[j].send(now=rt)
                ev = record("send", j, T, msg, stamp, rc, procs[j].resets > before,
                            brcs[j].send(now=rt) if brcs else None)
                send_vc[msg] = ev.vc
                dests = [k for k in range(n) if rng.random() < 0.5]
                for k in dests:
                    flights.append(_Flight(msg, j, ev.index, k, codec.encode(stamp), rc, ev.brc, rt,
                                           stamp.r + stamp.c - epsilon + 1, T))
                for k in range(mergers):
                    if rng.random() < 0.7:
                        _publish(rng, ex, k, msg, j, ev, T, m_offsets, delta, duplicates)
        for j in wants_recv:
            rt = clock(j, T)
            ready = [f for f in flights if f.dest == j and f.earliest <= rt <= f.s + delta]
            if not ready:
                continue
            f = min(ready, key=lambda f: (f.s, f.msg))
            flights.remove(f)
            before = procs[j].resets
            stamp = procs[j].receive(codec.decode(f.wire, rt), now=rt)
            rc = rcs[j].receive(f.rc, now=rt)
            brc = brcs[j].receive(f.brc, now=rt) if brcs and f.brc is not None else None
            vcs[j] = [max(a, b) for a, b in zip(vcs[j], send_vc[f.msg], strict=True)]
            record("recv", j, T, f.msg, stamp, rc, procs[j].resets > before, brc)
    ex.arrivals.sort(key=lambda a: (a.merger, a.real, a.at))
    return ex


def _publish(rng: random.Random, ex: Execution, k: int, msg: str, j: int, ev: Event,
             T: int, m_offsets: list[int], delta: int, duplicates: bool) -> None:
    """Arrival at merger k at a real time whose merger clock is <= s + δ (G2).

    The merger's future offsets are unknown here, so the arrival's merger clock is
    taken as ``real + offset now`` bounded by the window; offsets then move at most 1
    per tick, and mergers read clocks only through ``at``, so we record ``at`` directly:
    ``at`` lies in ``[max(s - ε, real clock now), s + δ]`` and is non-decreasing in real
    time per merger after sorting.
    """
    s = ev.rt
    low = max(T + m_offsets[k], s - ex.epsilon)
    high = s + delta
    if low > high:
        return
    copies = 2 if duplicates and rng.random() < 0.2 else 1
    for _ in range(copies):
        at = rng.randint(low, high)
        ex.arrivals.append(Arrival(k, msg, j, at, at, ev.stamp, ev.rc, ev.index))


def _corrupt(rng: random.Random, ex: Execution, procs: list[CausalProcess],
             rcs: list[RCProcess], flights: list[_Flight], codec: WireCodec, T: int,
             mergers: int, m_offsets: list[int]) -> None:
    eps, n = ex.epsilon, ex.n
    for j, proc in enumerate(procs):
        r = T + rng.randint(-3 * eps - ex.delta, 3 * eps)
        kn = [rng.randint(-1, n + 2) for _ in range(2 * eps)]
        proc.restore(r, rng.randint(-2, 3 * eps), kn)
        rcs[j].restore(r, rng.randint(0, 5 * eps))
    for f in flights:
        f.wire = bytes(rng.randrange(256) for _ in range(codec.size))
        f.rc = RCTimestamp(f.rc.r + rng.randint(-eps, eps), rng.randint(0, 5 * eps))
    for k in range(mergers):
        for i in range(rng.randint(0, 4)):
            kn = tuple(rng.randint(-1, n + 2) for _ in range(2 * eps))
            junk = Timestamp(T + rng.randint(-10, 40), rng.randint(-3, 3 * eps), kn)
            at = T + m_offsets[k]
            ex.arrivals.append(Arrival(k, f"junk{T}.{k}.{i}", rng.randrange(n), at, at, junk,
                                       RCTimestamp(junk.r, max(0, junk.c)), -1))


# -- strategies shared by the property tests ------------------------------------


@st.composite
def executions(draw: st.DrawFn, *, mergers: int = 0, max_n: int = 5, max_ticks: int = 40,
               duplicates: bool = False) -> Execution:
    epsilon = draw(st.integers(1, 4))
    delta = draw(st.integers(0, 6))
    n = draw(st.integers(2, max_n))
    ticks = draw(st.integers(1, max_ticks))
    seed = draw(st.integers(0, 2**32 - 1))
    return simulate(random.Random(seed), epsilon, delta, n, ticks, mergers=mergers,
                    duplicates=duplicates)


# -- the generator keeps its promises --------------------------------------------


@given(executions(mergers=2))
def test_generator_keeps_g1_g2_and_one_event_per_tick(ex: Execution) -> None:
    last: dict[int, int] = {}
    by_index = {e.index: e for e in ex.events}
    sends = {e.msg: e for e in ex.events if e.kind == "send"}
    for e in ex.events:
        assert e.rt > last.get(e.proc, 0)
        last[e.proc] = e.rt
        assert 0 <= e.rt - e.real <= ex.epsilon
        if e.kind == "recv":
            s = sends[e.msg]
            assert s.index < e.index and s.real <= e.real
            assert e.rt <= s.rt + ex.delta  # G2
            assert s.stamp.r + s.stamp.c < e.rt + ex.epsilon
    for a in ex.arrivals:
        s = by_index[a.send_index]
        assert s.rt - ex.epsilon <= a.at <= s.rt + ex.delta


def test_generator_is_deterministic() -> None:
    a = simulate(random.Random(7), 2, 3, 4, 30, mergers=2)
    b = simulate(random.Random(7), 2, 3, 4, 30, mergers=2)
    assert [(e.kind, e.proc, e.rt, e.msg) for e in a.events] == [
        (e.kind, e.proc, e.rt, e.msg) for e in b.events
    ]
    assert len(a.events) > 20
