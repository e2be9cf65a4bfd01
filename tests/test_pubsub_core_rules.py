"""The pub-sub cores' rules one by one (``core/pubsub/_nodes.py``), each pinned where a
one-line change would break it (mutants in ``scripts/mutate.py``, protocol ``pubsub``):

- Theorem 4.4 at the deadline tick: a merger delivers what falls due at ``now`` only
  after every arrival of ``now`` (``receive`` delivers up to ``now - 1``), so replicas
  fed several messages at one tick in different orders deliver them in one order;
  a Hypothesis property over arrivals bunched on few ticks, in any order;
- G1's boundary: a stamp ``epsilon`` ahead of the merger's clock is accepted, one more
  is ``early``;
- the bounds: ``max_pending`` (a merger's buffer), ``max_waiting`` (a subscriber's
  window past its next FWD), ``gap_wait`` (a gap is skipped exactly ``gap_wait`` after
  the oldest waiting FWD arrived);
- the merger-to-subscriber leg: a lost FWD is skipped, a duplicate is dropped, and the
  subscriber delivers the rest in the merger's order.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from timebound.core.pubsub import MergerNode, Publisher, Subscriber
from timebound.core.wire import FrameCodec

EPS, DELTA, N = 4, 30, 8


def _merger(**options: int) -> MergerNode[str]:
    return MergerNode("m", EPS, DELTA, N, FrameCodec(), **options)  # type: ignore[arg-type]


def _publications(seed: int, count: int) -> list[tuple[int, bytes]]:
    """``(publication tick, PUB frame)`` of 3 publishers, several per tick."""
    rng = random.Random(seed)
    pubs = [Publisher(f"p{i}", EPS, DELTA, N, FrameCodec()) for i in range(3)]
    out = []
    t = 1000
    for i in range(count):
        t += rng.choice((0, 0, 1, 2))
        p = pubs[rng.randrange(3)]
        _, stamp, frame = p.publish(b"%d" % i, now=t)
        out.append((stamp.r, frame))
    return out


def _replica(arrivals: list[tuple[int, int, bytes]]) -> list[tuple[str, int]]:
    """Feed a fresh merger ``(tick, order, frame)`` arrivals: at each tick, the due
    deliveries of the tick before, then the tick's arrivals in ``order``; returns the
    delivered ``(proc, msg)`` sequence."""
    merger = _merger()
    out: list[tuple[str, int]] = []
    by_tick: dict[int, list[tuple[int, bytes]]] = {}
    for tick, order, frame in arrivals:
        by_tick.setdefault(tick, []).append((order, frame))
    for tick in sorted(by_tick):
        out += [(m.proc, m.msg) for m in merger.handle_timer(now=tick - 1).delivered]
        for _, frame in sorted(by_tick[tick], key=lambda x: x[0]):
            out += [(m.proc, m.msg) for m in merger.receive(frame, "p", now=tick).delivered]
    out += [(m.proc, m.msg) for m in merger.handle_timer(now=10**6).delivered]
    return out


def _due(frame: bytes, r: int) -> int:
    """The tick a merger delivers ``frame`` (stamped ``r``) at, alone."""
    probe = _merger()
    probe.receive(frame, "p", now=r)
    due = probe.next_deadline()
    assert due is not None
    return due


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_replicas_fed_one_tick_in_different_orders_deliver_one_order(seed: int) -> None:
    rng = random.Random(seed)
    pubs = _publications(seed, 40)
    dues = [_due(frame, r) for r, frame in pubs]
    # Arrivals bunched on few ticks: half of them exactly at their deadline (where the
    # order of one tick's arrivals matters), the others after a delay that is a
    # multiple of 5 within delta; each replica with its own order inside a tick.
    replicas = []
    for _ in range(3):
        arrivals = [(due if rng.random() < 0.5 else r + 5 * rng.randrange(DELTA // 5 + 1),
                     rng.random(), frame) for (r, frame), due in zip(pubs, dues)]
        replicas.append(_replica(arrivals))
    assert len(replicas[0]) == 40
    assert replicas[1] == replicas[0] and replicas[2] == replicas[0]


def test_two_messages_due_at_one_tick_arriving_at_that_tick_in_opposite_orders() -> None:
    a = Publisher("a", EPS, DELTA, N, FrameCodec())
    b = Publisher("b", EPS, DELTA, N, FrameCodec())
    _, sa, fa = a.publish(b"a", now=1000)
    _, sb, fb = b.publish(b"b", now=1000)
    assert (sa.r, sa.c) == (sb.r, sb.c)  # one deadline for both
    probe = _merger()
    probe.receive(fa, "p", now=1000)
    due = probe.next_deadline()
    assert due is not None and due > 1000
    orders = []
    for first, second in ((fa, fb), (fb, fa)):
        merger = _merger()
        delivered = [*merger.receive(first, "p", now=due).delivered,
                     *merger.receive(second, "p", now=due).delivered]
        assert delivered == []  # nothing due at `due` leaves before the tick's arrivals
        delivered += merger.handle_timer(now=due).delivered
        orders.append([m.proc for m in delivered])
    assert orders[0] == orders[1] and sorted(orders[0]) == ["a", "b"]


def test_a_stamp_epsilon_ahead_is_accepted_one_more_is_early() -> None:
    pub = Publisher("p", EPS, DELTA, N, FrameCodec())
    _, stamp, frame = pub.publish(b"x", now=1000)
    on_edge = _merger()
    on_edge.receive(frame, "p", now=stamp.r - EPS)
    assert on_edge.statistics().early == 0 and on_edge.statistics().buffered == 1
    beyond = _merger()
    beyond.receive(frame, "p", now=stamp.r - EPS - 1)
    assert beyond.statistics().early == 1 and beyond.statistics().buffered == 0


def test_a_merger_holds_at_most_max_pending_messages() -> None:
    merger = _merger(max_pending=2)
    pubs = _publications(7, 5)
    for r, frame in pubs:
        merger.receive(frame, "p", now=r)
    stats = merger.statistics()
    assert stats.buffered == 2 and stats.max_buffered == 2 and stats.overflow == 3
    merger.receive(pubs[0][1], "p", now=pubs[0][0])  # a copy of a held one: no overflow
    assert merger.statistics().overflow == 3
    delivered = merger.handle_timer(now=10**6).delivered
    assert len(delivered) == 2
    r, frame = _publications(8, 1)[0]
    merger.receive(frame, "p", now=r + 10**6)  # room again (late, but not overflow)
    assert merger.statistics().overflow == 3


def _fwds(count: int) -> list[bytes]:
    """The FWD frames a merger sends one subscriber for ``count`` publications."""
    merger = _merger()
    sub = Subscriber("s", FrameCodec(), now=0)
    merger.receive(sub.subscription(), "s", now=0)
    frames = []
    for r, frame in _publications(3, count):
        frames += [f for _, f in merger.receive(frame, "p", now=r).sends]
        merger.receive(sub.subscription(), "s", now=r)
    frames += [f for _, f in merger.handle_timer(now=2000).sends]
    assert len(frames) == count
    return frames


def test_a_subscriber_waits_at_most_max_waiting_past_its_next() -> None:
    fwds = _fwds(8)
    sub = Subscriber("s", FrameCodec(), max_waiting=4, now=0)
    assert len(sub.receive(fwds[0], now=10).delivered) == 1  # joins at seq 0; next is 1
    sub.receive(fwds[5], now=10)  # seq 5 = next + max_waiting: out of range
    assert sub.statistics().out_of_range == 1 and sub.statistics().waiting == 0
    sub.receive(fwds[4], now=10)  # seq 4: waits for the gap
    assert sub.statistics().out_of_range == 1 and sub.statistics().waiting == 1


def test_a_gap_is_skipped_exactly_gap_wait_after_the_oldest_arrival() -> None:
    fwds = _fwds(4)
    sub = Subscriber("s", FrameCodec(), gap_wait=50, now=0)
    sub.receive(fwds[0], now=100)
    sub.receive(fwds[2], now=100)  # seq 1 lost
    deliveries = sub.handle_timer(now=149).delivered
    assert deliveries == () and sub.statistics().skipped == 0
    deliveries = sub.handle_timer(now=150).delivered
    assert [d.seq for d in deliveries] == [2] and sub.statistics().skipped == 1


def test_loss_and_duplication_on_the_merger_to_subscriber_leg() -> None:
    fwds = _fwds(10)
    whole = Subscriber("w", FrameCodec(), now=0)
    order = [d for f in fwds for d in whole.receive(f, now=0).delivered]
    lossy = Subscriber("l", FrameCodec(), gap_wait=20, now=0)
    got = []
    for i, frame in enumerate(fwds):
        if i == 4:
            continue  # lost
        got += lossy.receive(frame, now=i).delivered
        if i in (5, 6):
            got += lossy.receive(frame, now=i).delivered  # duplicated while waiting for seq 4
    got += lossy.handle_timer(now=100).delivered
    stats = lossy.statistics()
    assert stats.skipped == 1 and stats.duplicates == 2 and stats.delivered == 9
    assert [(d.proc, d.msg) for d in got] == [(d.proc, d.msg) for d in order if d.seq != 4]
