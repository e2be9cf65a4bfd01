"""Incarnation-marked messages (``core/atmostonce/_receiver.py``, invariant
(M)): a message made after the receiver's current incarnation began may be accepted
below the recovered ``upper``, and still no message is ever accepted twice.

The executions are hostile: crashes at any moment (with a deferred ``latest`` write
in flight that lands or not, or in process), clocks stepped back, messages lost,
duplicated, reordered, retransmissions after GC, and an attacker re-sending any frame
ever sent, with its incarnation mark. Each client marks a *new* message with the
last incarnation it heard from (it heard only from an incarnation that had begun);
the driver passes ``marked=True`` only for the current incarnation's mark.

The rules and what breaks them: the receiver's separate bound (``upper_marked``, raised
by GC; mutants in ``scripts/mutate.py``, protocol ``atmostonce``), honouring only the
current incarnation's mark (``test_honouring_an_older_mark_breaks_at_most_once``)
and keeping a retransmission's original mark
(``test_re_marking_a_retransmission_breaks_at_most_once``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from timebound.core.atmostonce import (
    Fixed,
    MemoryStorage,
    Receiver,
    StableLatest,
    StableRecord,
    Verdict,
)

CONNS = ("a", "b", "c")
#: How the rule-breaking tests search: derandomized, no shrinking (any example will do).
SEARCH = settings(max_examples=5000, database=None, derandomize=True,
                  phases=(Phase.generate,))



def actions_of(seed: int) -> list[tuple[int, int, int, int]]:
    """One execution's steps, ``(action, x, y, z)`` as ``run`` reads them, drawn
    uniformly from ``seed``: Hypothesis picks the seeds (derandomized in CI). Its own
    draws favour small values and short lists, which rarely reach "accepted, then
    forgotten by GC, then re-sent in the same incarnation"; uniform steps do."""
    rng = random.Random(seed)
    return [(rng.randrange(10), rng.randrange(1001), rng.randrange(1001),
             rng.randrange(1001)) for _ in range(rng.randrange(20, 121))]


seeds = st.integers(0, 2**32 - 1)


@dataclass
class Execution:
    """What ``run`` saw: duplicates accepted, marked acceptances below ``upper``."""

    duplicates: list[tuple[str, int]] = field(default_factory=list)
    marked_below_upper: int = 0


class _Disk(MemoryStorage):
    pass


def run(actions: list[tuple[int, int, int, int]], *, deferred: bool, window: int = 1,
        honour_old_marks: bool = False, re_mark: bool = False) -> Execution:
    """Drive one execution; never asserts (the tests do, on what it returns)."""
    disk = _Disk()
    beta, every, gc_every, rho = 40, 10, 4, 12  # GC often: forgetting is the risk

    def build(start: int) -> Receiver:
        return Receiver(Fixed(rho), gc_every=gc_every,
                        resilience=StableLatest(disk, beta, every, deferred=deferred),
                        start=start, reorder_window=window)

    now = 100
    receiver = build(now)
    incarnation = 1
    down = False
    in_flight: StableRecord | None = None
    last: dict[str, int] = {}                    # a connection's last timestamp
    heard: dict[str, int] = {}                   # the incarnation a client heard from
    sent: list[tuple[str, int, int | None]] = []  # every frame ever sent: (conn, ts, mark)
    accepted: set[tuple[str, int]] = set()
    seen = Execution()

    def deliver(conn: str, ts: int, mark: int | None) -> None:
        marked = mark is not None and (honour_old_marks or mark == incarnation)
        upper = receiver.upper
        verdict = receiver.receive(conn, ts, now=now, marked=marked)
        if verdict is Verdict.ACCEPTED:
            if (conn, ts) in accepted:
                seen.duplicates.append((conn, ts))
            accepted.add((conn, ts))
            if marked and ts <= upper:
                seen.marked_below_upper += 1
        if verdict is not Verdict.DOWN:
            heard[conn] = incarnation  # the answer names this incarnation

    for action, x, y, z in actions:
        now += y % 30 - 8  # the clock may step back
        conn = CONNS[x % len(CONNS)]
        if action <= 2:  # a new message: stamped by a client clock with its own skew
            ts = max(now + z % 90 - 45, last.get(conn, 0) + 1, 1)
            last[conn] = ts
            mark = heard.get(conn)
            sent.append((conn, ts, mark))
            if not down and z % 4:  # else lost on the way
                deliver(conn, ts, mark)
        elif action == 3 and conn in last:  # the client retransmits its last message
            ts = last[conn]
            original = next(m for c, t, m in reversed(sent) if (c, t) == (conn, ts))
            mark = heard.get(conn) if re_mark else original
            sent.append((conn, ts, mark))
            if not down:
                deliver(conn, ts, mark)
        elif action == 4 and sent and not down:  # an attacker re-sends an old frame
            recent = y % 2 == 0  # half the time one of the last few (after a GC)
            deliver(*sent[-1 - z % min(12, len(sent))] if recent else sent[z % len(sent)])
        elif action == 5 and not down:
            receiver.handle_timer(now=now)
        elif action == 6 and deferred and not down:
            if in_flight is None:
                in_flight = receiver.take_write()
            elif z % 3:
                disk.write(in_flight)
                receiver.write_done(in_flight)
                in_flight = None
            else:
                receiver.write_failed(in_flight)
                in_flight = None
        elif action == 7 and not down and z % 4 == 0:  # crash (rarer: incarnations last)
            if deferred:  # the process dies; its write in flight landed or not
                if in_flight is not None and z % 2:
                    disk.write(in_flight)
                in_flight = None
                down = True
            else:
                receiver.crash(now=now)
                down = True
        elif action == 8 and down:  # restart: a new incarnation begins
            now += z % 30
            if deferred:
                receiver = build(now)
            else:
                receiver.restart(now=now)
            incarnation += 1
            down = False
        elif action == 9 and sent and not down:  # a reordered copy of a recent frame
            deliver(*sent[-1 - z % min(5, len(sent))])
    return seen


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(seed=seeds, deferred=st.booleans(), window=st.sampled_from([1, 3]))
def test_marked_messages_never_accepted_twice(seed: int, deferred: bool,
                                              window: int) -> None:
    seen = run(actions_of(seed), deferred=deferred, window=window)
    assert seen.duplicates == [], f"accepted twice: {seen.duplicates}"


def test_marks_do_accept_below_the_recovered_bound() -> None:
    """The rule is not vacuous: some execution accepts a marked message at or below
    ``upper`` (what the paper's rule refuses, the outage the marks remove)."""
    found = find(seeds, lambda s: run(actions_of(s), deferred=False).marked_below_upper > 0,
                 settings=SEARCH)
    assert run(actions_of(found), deferred=False).marked_below_upper > 0


def test_honouring_an_older_mark_breaks_at_most_once() -> None:
    found = find(seeds, lambda s: bool(run(actions_of(s), deferred=False,
                                           honour_old_marks=True).duplicates),
                 settings=SEARCH)
    assert run(actions_of(found), deferred=False, honour_old_marks=True).duplicates
    assert not run(actions_of(found), deferred=False).duplicates  # the rule holds there


def test_re_marking_a_retransmission_breaks_at_most_once() -> None:
    found = find(seeds, lambda s: bool(run(actions_of(s), deferred=False,
                                           re_mark=True).duplicates),
                 settings=SEARCH)
    assert run(actions_of(found), deferred=False, re_mark=True).duplicates
    assert not run(actions_of(found), deferred=False).duplicates


def test_unmarked_messages_decide_exactly_as_before() -> None:
    """``marked=False`` is the paper's rule: the same receiver fed the same messages
    with and without the keyword decides alike (the replay and simulator paths)."""
    def build() -> Receiver:
        return Receiver(Fixed(30), gc_every=10,
                        resilience=StableLatest(MemoryStorage(), 40, 10), start=100)

    plain, keyword = build(), build()
    for i in range(400):
        conn, ts, now = CONNS[i % 3], 100 + (i * 37) % 200, 100 + i
        assert plain.receive(conn, ts, now=now) is keyword.receive(conn, ts, now=now,
                                                                    marked=False)
        if i == 200:
            plain.crash(now=now)
            keyword.crash(now=now)
            plain.restart(now=now + 5)
            keyword.restart(now=now + 5)
    assert plain.statistics() == keyword.statistics()
    assert keyword.accepted_marked == 0


def test_rpc_server_accepts_a_marked_call_below_the_recovered_bound_once() -> None:
    """The RPC core passes the mark through (``Server.receive(..., marked=)``): after
    a restart a marked CALL stamped below the recovered bound runs, its copies are
    duplicates, and once GC forgot it a re-sent copy is stale; an unmarked one is
    refused as the paper says."""
    from timebound.core.rpc import Call, Server

    storage = MemoryStorage()
    server: Server[str] = Server(receiver=Receiver(
        Fixed(30), gc_every=10, resilience=StableLatest(storage, 40, 10), start=100))
    server.crash(now=110)
    server.restart(now=120)
    upper = server.receiver.upper  # type: ignore[union-attr]
    assert upper >= 140
    call = Call("c", 125, b"x").encode()  # made after the restart, below the bound
    assert server.receive(call, "p", now=126).starts == ()  # unmarked: refused
    (start,) = server.receive(call, "p", now=126, marked=True).starts
    assert server.receive(call, "p", now=127, marked=True).starts == ()  # a duplicate
    server.complete(start, b"r", now=128)
    server.handle_timer(now=400)  # GC forgets it (its reply too)
    assert server.state("c") is None
    assert server.receive(call, "p", now=401, marked=True).starts == ()  # stale now
