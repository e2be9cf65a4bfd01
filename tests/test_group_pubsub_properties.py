"""Properties and bounds of the group and pub-sub cores, each pinned where a one-line
change breaks it (mutants in ``scripts/mutate.py``, protocols ``group`` and ``pubsub``).

Properties (Hypothesis draws the publications, the delays, the orders, the losses):

- causal merge paper, Theorem 4.4: replicated ``MergerNode``s fed the same
  publications, several arriving at one tick and in a different order at each
  replica, deliver them in one order; a ``Subscriber`` of each replica delivers that
  order and reports the same digest, the SHA-256 of its ``(proc, msg)`` lines;
- stability paper, Theorem 1 (every member is sender and receiver, section 3's
  setting of Theorem 2): under loss, duplication and reordering of data (MSG, NACK
  answers) and acks (heartbeats), drawn separately, (a) a member never declares one of
  its messages stable before every member has delivered it, and (b) once the network
  lets acks and data through again, every message is declared stable and every send
  buffer drains.

Bounds, each at the bound and one past it: ``max_buffer`` (back-pressure, lifted by
stability), ``MAX_AHEAD``, ``max_skew`` (the group's allowed clock skew), ``max_waiting``,
``gap_wait``, the ε boundary of G1 (a stamp ε ahead of the merger's clock is
accepted, ε + 1 is ``early``), the subscriber's lease (``LEASE``) and a loss on the
merger-to-subscriber leg (skipped after ``gap_wait`` and counted, the digest then
covers what was delivered).
"""

from __future__ import annotations

import hashlib
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from timebound.core.group import (
    MAX_AHEAD,
    Delivered,
    GroupMember,
    Stable,
)
from timebound.core.group import decode as decode_group
from timebound.core.group._wire import Head, Heartbeat, encode_msg
from timebound.core.pubsub import (
    LEASE,
    LEASE_RENEW,
    MergerNode,
    MergerOutput,
    Publisher,
    Subscriber,
)
from timebound.core.stability import AckMode, ClockMode
from timebound.core.wire import KIND_GROUP, FrameCodec
from timebound.errors import ProtocolUsageError

EPS, DELTA, N = 4, 30, 8
MS = 1000  # the group core's ticks are µs


# -- pub-sub: Theorem 4.4 with subscribers and digests ------------------------------

def _merger(**options: int) -> MergerNode[str]:
    return MergerNode("m", EPS, DELTA, N, FrameCodec(), **options)  # type: ignore[arg-type]


def _lines_digest(order: list[tuple[str, int]]) -> str:
    h = hashlib.sha256()
    for proc, msg in order:
        h.update(f"{proc}\x00{msg}\n".encode())
    return h.hexdigest()


def _deadline(frame: bytes, r: int) -> int:
    probe = _merger()
    probe.receive(frame, "p", now=r)
    due = probe.next_deadline()
    assert due is not None
    return due


def _replica(arrivals: list[tuple[int, int, bytes]]
             ) -> tuple[list[tuple[str, int]], list[tuple[str, int]], str, MergerNode[str]]:
    """A merger with one subscriber fed ``(tick, rank, frame)``: at each tick the due
    deliveries of the tick before, then that tick's arrivals by rank. Returns the
    merger's order, the subscriber's order, its digest and the merger."""
    merger = _merger()
    sub = Subscriber("s", FrameCodec(), now=0)
    merger.receive(sub.subscription(), "s", now=0)
    merged: list[tuple[str, int]] = []
    read: list[tuple[str, int]] = []

    def take(out_now: int, out: MergerOutput[str]) -> None:
        merged.extend((m.proc, m.msg) for m in out.delivered)
        for peer, frame in out.sends:
            assert peer == "s"
            read.extend((d.proc, d.msg) for d in sub.receive(frame, now=out_now).delivered)

    by_tick: dict[int, list[tuple[int, bytes]]] = {}
    for tick, rank, frame in arrivals:
        by_tick.setdefault(tick, []).append((rank, frame))
    for tick in sorted(by_tick):
        take(tick - 1, merger.handle_timer(now=tick - 1))
        for _, frame in sorted(by_tick[tick], key=lambda x: x[0]):
            take(tick, merger.receive(frame, "p", now=tick))
    take(2000, merger.handle_timer(now=2000))
    return merged, read, sub.digest, merger


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.sampled_from((0, 0, 1, 2))),
                min_size=2, max_size=24),
       st.data())
def test_replicated_mergers_deliver_one_order_and_digest(
        schedule: list[tuple[int, int]], data: st.DataObject) -> None:
    pubs = [Publisher(f"p{i}", EPS, DELTA, N, FrameCodec()) for i in range(3)]
    sent = []
    t = 1000
    for i, (who, gap) in enumerate(schedule):
        t += gap  # gap 0: several publications stamped at one tick
        _, stamp, frame = pubs[who].publish(b"%d" % i, now=t)
        sent.append((stamp.r, frame))
    dues = [_deadline(frame, r) for r, frame in sent]
    delays = st.sampled_from((-1, 0, 5, 10, DELTA))  # -1: exactly at its deadline
    results = []
    for _ in range(3):
        # each replica: its own delay per message (many land exactly on their
        # deadline tick, where the order of one tick's arrivals matters), its own
        # order inside a tick
        chosen = data.draw(st.lists(delays, min_size=len(sent), max_size=len(sent)))
        ranks = data.draw(st.permutations(range(len(sent))))
        arrivals = [(due if d < 0 else r + d, rank, frame)
                    for (r, frame), due, d, rank in zip(sent, dues, chosen, ranks)]
        results.append(_replica(arrivals))
    merged, read, digest, merger = results[0]
    assert len(merged) == len(sent) and merger.statistics().late == 0
    assert read == merged and digest == _lines_digest(merged)
    for other in results[1:]:
        assert other[0] == merged  # Theorem 4.4
        assert other[2] == digest


# -- group: Theorem 1 of the stability paper under hostile data and ack channels -----

class _Group:
    """Three members on an in-memory network that loses, duplicates and reorders
    (1-5 ms flights) data and acks with separate probabilities."""

    def __init__(self, rng: random.Random, acks: AckMode, clock: ClockMode) -> None:
        self.rng = rng
        self.now = 1000 * MS
        self.names = ["a", "b", "c"]
        self.members = {n: GroupMember("g", n, self.names, FrameCodec(), incarnation=1,
                                       acks=acks, clock=clock, ack_every=10 * MS,
                                       nack_every=10 * MS, now=self.now)
                        for n in self.names}
        self.delivered: dict[str, set[tuple[str, int]]] = {n: set() for n in self.names}
        self.order: dict[str, list[tuple[str, int]]] = {n: [] for n in self.names}
        self.data_loss = self.ack_loss = self.dup = 0.0
        self.flights: list[tuple[int, int, str, bytes, str]] = []
        self.count = 0
        self.early: list[str] = []  # Theorem 1(a) violations

    def put(self, src: str, sends: tuple[tuple[str, bytes], ...]) -> None:
        for dest, frame in sends:
            opened = FrameCodec().open(frame, now=0)
            assert opened is not None and opened.kind == KIND_GROUP
            is_ack = isinstance(decode_group(opened.body), Heartbeat)
            if self.rng.random() < (self.ack_loss if is_ack else self.data_loss):
                continue
            for _ in range(2 if self.rng.random() < self.dup else 1):
                self.count += 1
                self.flights.append((self.now + self.rng.randint(1, 5) * MS, self.count,
                                     dest, frame, src))

    def events(self, name: str, events: tuple[object, ...]) -> None:
        for e in events:
            if isinstance(e, Delivered):
                self.delivered[name].add((e.sender, e.seq))
                self.order[name].append((e.sender, e.seq))
            elif isinstance(e, Stable):
                missing = [o for o in self.names if (name, e.seq) not in self.delivered[o]]
                if missing:
                    self.early.append(f"{name} declared {e.seq} stable before {missing}")

    def send(self, name: str, data: bytes) -> None:
        member = self.members[name]
        if member.can_send():
            out = member.send(data, now=self.now)
            self.events(name, out.events)
            self.put(name, out.sends)

    def run(self, duration: int) -> None:
        end = self.now + duration
        while True:
            times = [t for m in self.members.values() if (t := m.next_deadline()) is not None]
            times += [f[0] for f in self.flights]
            t = min(times)
            if t > end:
                self.now = end
                return
            self.now = max(self.now, t)
            due = sorted(f for f in self.flights if f[0] <= self.now)
            self.flights = [f for f in self.flights if f[0] > self.now]
            for _, _, dest, frame, src in due:
                out = self.members[dest].receive(frame, now=self.now, source=src)
                self.events(dest, out.events)
                self.put(dest, out.sends)
            for name, m in self.members.items():
                deadline = m.next_deadline()
                if deadline is not None and deadline <= self.now:
                    out = m.handle_timer(now=self.now)
                    self.events(name, out.events)
                    self.put(name, out.sends)


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 2**32 - 1),
       st.sampled_from((0.0, 0.2, 0.5)), st.sampled_from((0.0, 0.2, 0.6)),
       st.sampled_from((0.0, 0.3)),
       st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 4)), min_size=1,
                max_size=30),
       st.sampled_from(list(AckMode)), st.sampled_from(list(ClockMode)))
def test_group_stability_theorem_1_under_hostile_data_and_ack_channels(
        seed: int, data_loss: float, ack_loss: float, dup: float,
        schedule: list[tuple[str, int]], acks: AckMode, clock: ClockMode) -> None:
    group = _Group(random.Random(seed), acks, clock)  # the fate of each datagram
    group.data_loss, group.ack_loss, group.dup = data_loss, ack_loss, dup
    for i, (who, pause) in enumerate(schedule):
        group.send(who, b"%d" % i)
        group.run(pause * MS)  # flights take 1-5 ms: they overtake each other
    group.run(100 * MS)
    assert group.early == []  # (a), checked at every Stable event
    group.data_loss = group.ack_loss = group.dup = 0.0  # acks and data get through
    group.run(300 * MS)
    assert group.early == []
    for name, member in group.members.items():
        stats = member.statistics()
        assert stats.stable == stats.sent and member.buffered == 0  # (b)
        for sender in group.names:  # reliable FIFO underneath
            seqs = [s for src, s in group.order[name] if src == sender]
            assert seqs == list(range(group.members[sender].statistics().sent))


# -- group bounds -------------------------------------------------------------------

def _member(**options: int) -> GroupMember:
    return GroupMember("g", "b", ["a", "b"], FrameCodec(), incarnation=1, now=1000,
                       **options)  # type: ignore[arg-type]


def _msg(inc: int, seq: int, ts: int) -> bytes:
    return FrameCodec().seal(KIND_GROUP, encode_msg(Head("g", "a", inc), seq, ts, b"x"))


def test_max_buffer_blocks_at_the_bound_and_stability_lifts_it() -> None:
    a = GroupMember("g", "a", ["a", "b"], FrameCodec(), incarnation=1, now=1000,
                    max_buffer=2, ack_every=10)
    b = GroupMember("g", "b", ["a", "b"], FrameCodec(), incarnation=1, now=1000,
                    ack_every=10)
    frames = [f for _, f in a.send(b"1", now=1001).sends]
    assert a.can_send()  # one below the bound
    frames += [f for _, f in a.send(b"2", now=1002).sends]
    assert not a.can_send()  # at the bound
    with pytest.raises(ProtocolUsageError, match="buffer full"):
        a.send(b"3", now=1003)  # one past it
    for f in frames:
        b.receive(f, now=1004, source="a")
    acks = [f for _, f in b.handle_timer(now=1010).sends]
    for f in acks:
        a.receive(f, now=1011, source="b")
    a.handle_timer(now=1020)  # a's own ack covers its messages
    for f in [f for _, f in b.handle_timer(now=1020).sends]:
        a.receive(f, now=1021, source="b")
    assert a.buffered == 0 and a.can_send()


def test_max_ahead_holds_one_below_and_drops_at_the_bound() -> None:
    member = _member()
    member.receive(_msg(5, MAX_AHEAD - 1, 900), now=1000, source="a")
    member.receive(_msg(5, MAX_AHEAD, 901), now=1000, source="a")
    assert member.statistics().out_of_range == 1
    assert member.peers["a"].ahead.keys() == {MAX_AHEAD - 1}


def test_max_skew_accepts_an_incarnation_at_the_bound_not_one_past() -> None:
    member = _member(max_skew=500)
    member.receive(_msg(1501, 0, 900), now=1000, source="a")  # 1 past now + max_skew
    assert member.statistics().out_of_range == 1 and member.peers["a"].inc is None
    member.receive(_msg(1500, 0, 900), now=1000, source="a")  # exactly now + max_skew
    assert member.statistics().out_of_range == 1 and member.peers["a"].inc == 1500
    member.receive(_msg(1500, 1, 1501), now=1000, source="a")  # ts 1 past the bound
    assert member.statistics().out_of_range == 2 and member.peers["a"].expect == 1
    member.receive(_msg(1500, 1, 1500), now=1000, source="a")  # ts exactly at it
    assert member.statistics().out_of_range == 2 and member.peers["a"].expect == 2


# -- pub-sub bounds -------------------------------------------------------------------

def test_epsilon_boundary_an_arrival_exactly_at_and_one_past_the_allowed_skew() -> None:
    pub = Publisher("p", EPS, DELTA, N, FrameCodec())
    _, stamp, frame = pub.publish(b"x", now=1000)
    at_bound = _merger()
    at_bound.receive(frame, "p", now=stamp.r - EPS)  # stamp.r == now + epsilon
    one_past = _merger()
    one_past.receive(frame, "p", now=stamp.r - EPS - 1)  # stamp.r == now + epsilon + 1
    assert (at_bound.statistics().early, at_bound.statistics().buffered) == (0, 1)
    assert (one_past.statistics().early, one_past.statistics().buffered) == (1, 0)


def _fwds(count: int) -> list[bytes]:
    merger = _merger()
    sub = Subscriber("s", FrameCodec(), now=0)
    merger.receive(sub.subscription(), "s", now=0)
    pubs = [Publisher(f"p{i}", EPS, DELTA, N, FrameCodec()) for i in range(2)]
    frames = []
    for i in range(count):
        _, stamp, frame = pubs[i % 2].publish(b"%d" % i, now=1000 + i)
        frames += [f for _, f in merger.receive(frame, "p", now=stamp.r).sends]
    frames += [f for _, f in merger.handle_timer(now=2000).sends]
    assert len(frames) == count
    return frames


def test_max_waiting_holds_one_below_the_bound_and_drops_at_it() -> None:
    fwds = _fwds(8)
    sub = Subscriber("s", FrameCodec(), max_waiting=3, now=0)
    sub.receive(fwds[0], now=10)  # joins at seq 0; next is 1
    sub.receive(fwds[4], now=10)  # next + max_waiting: dropped
    assert (sub.statistics().out_of_range, sub.statistics().waiting) == (1, 0)
    sub.receive(fwds[3], now=10)  # next + max_waiting - 1: waits
    assert (sub.statistics().out_of_range, sub.statistics().waiting) == (1, 1)


def test_gap_wait_a_lost_fwd_is_skipped_at_the_bound_not_a_tick_before() -> None:
    fwds = _fwds(4)
    sub = Subscriber("s", FrameCodec(), gap_wait=30, now=0)
    sub.receive(fwds[0], now=100)
    sub.receive(fwds[2], now=105)  # seq 1 lost on the merger-to-subscriber leg
    assert sub.next_deadline() == 0  # the first SUB is due: renewal first
    sub.handle_timer(now=100)
    assert sub.next_deadline() == 135  # the oldest waiting arrival + gap_wait
    assert sub.handle_timer(now=134).delivered == () and sub.statistics().skipped == 0
    out = sub.handle_timer(now=135)
    assert [d.seq for d in out.delivered] == [2]
    assert sub.statistics().skipped == 1  # reported, never delivered
    assert out.delivered[0].digest == _lines_digest(
        [(d.proc, d.msg) for d in Subscriber("x", FrameCodec(), now=0).receive(
            fwds[0], now=0).delivered] + [(out.delivered[0].proc, out.delivered[0].msg)])


def test_a_subscriber_after_leave_has_no_deadline_and_sends_nothing() -> None:
    fwds = _fwds(3)
    sub = Subscriber("s", FrameCodec(), gap_wait=30, now=0)
    assert sub.handle_timer(now=0).sends == (sub.subscription(),)
    assert sub.next_deadline() == LEASE_RENEW
    sub.leave()
    assert sub.next_deadline() is None  # nothing pending
    sub.receive(fwds[0], now=5)
    sub.receive(fwds[2], now=5)  # a gap: its wait is pending again
    assert sub.next_deadline() == 35
    out = sub.handle_timer(now=LEASE_RENEW)
    assert out.sends == () and [d.seq for d in out.delivered] == [2]
    assert sub.next_deadline() is None


def test_a_lease_lapses_exactly_lease_after_the_last_sub() -> None:
    merger = _merger()
    sub = Subscriber("s", FrameCodec(), now=0)
    merger.receive(sub.subscription(), "s", now=100)
    assert merger.next_deadline() == 100 + LEASE
    merger.handle_timer(now=100 + LEASE - 1)
    assert merger.statistics().subscribers == 1
    merger.handle_timer(now=100 + LEASE)
    assert merger.statistics().subscribers == 0
