"""The group core (``timebound.core.group``) on an in-memory lossy wire.

Checked at every ``Stable`` event: every other member has delivered that message
(no member releases a message some member has not received); every member delivers
every sender's messages once, in order; buffers drain once traffic resumes after a
member stalls; idle senders do not hold stability (null messages); a restarted member
rejoins by section 6; vector acks cost more bytes than timestamp acks.
"""

from __future__ import annotations

import random

import pytest

from timebound.core.group import Delivered, GroupMember, Stable
from timebound.core.stability import AckMode, ClockMode
from timebound.core.wire import KIND_GROUP, FrameCodec

MS = 1000


class Net:
    def __init__(self, names: list[str], *, seed: int = 0, loss: float = 0.0,
                 dup: float = 0.0, acks: AckMode = AckMode.TIMESTAMP,
                 clock: ClockMode = ClockMode.PHYSICAL) -> None:
        self.rng = random.Random(seed)
        self.loss, self.dup = loss, dup
        self.now = 1000 * MS
        self.names = names
        self.acks, self.clock = acks, clock
        self.members = {n: self.make(n, 1) for n in names}
        self.delivered: dict[str, list[tuple[str, int]]] = {n: [] for n in names}
        self.stable: dict[str, set[int]] = {n: set() for n in names}
        self.flights: list[tuple[int, int, str, bytes, str]] = []
        self.count = 0
        self.cut: set[str] = set()  # members whose datagrams are all lost

    def make(self, name: str, inc: int) -> GroupMember:
        return GroupMember("g", name, self.names, FrameCodec(), incarnation=inc,
                           acks=self.acks, clock=self.clock, ack_every=10 * MS,
                           nack_every=10 * MS, now=self.now)

    def put(self, src: str, sends: tuple[tuple[str, bytes], ...]) -> None:
        for dest, frame in sends:
            if src in self.cut or dest in self.cut or self.rng.random() < self.loss:
                continue
            for _ in range(2 if self.rng.random() < self.dup else 1):
                self.count += 1
                self.flights.append((self.now + self.rng.randint(1, 5) * MS, self.count,
                                     dest, frame, src))

    def events(self, name: str, events: tuple[object, ...]) -> None:
        for e in events:
            if isinstance(e, Delivered):
                self.delivered[name].append((e.sender, e.seq))
            elif isinstance(e, Stable):
                self.stable[name].add(e.seq)
                for other in self.names:
                    if other != name and self.members[other].peers[name].member:
                        assert (name, e.seq) in self.delivered[other], (
                            f"{name} released {e.seq} before {other} had it")

    def send(self, name: str, data: bytes) -> None:
        out = self.members[name].send(data, now=self.now)
        self.events(name, out.events)
        self.put(name, out.sends)

    def run(self, duration: int) -> None:
        end = self.now + duration
        while True:
            times = [t for n, m in self.members.items()
                     if n not in self.cut and (t := m.next_deadline()) is not None]
            times += [f[0] for f in self.flights]
            t = min(times)
            if t > end:
                self.now = end
                return
            self.now = max(self.now, t)
            due = sorted(f for f in self.flights if f[0] <= self.now)
            self.flights = [f for f in self.flights if f[0] > self.now]
            for _, _, dest, frame, src in due:
                if dest in self.cut or dest not in self.members:
                    continue
                out = self.members[dest].receive(frame, now=self.now, source=src)
                self.events(dest, out.events)
                self.put(dest, out.sends)
            for name, m in self.members.items():
                if name in self.cut:
                    continue
                nd = m.next_deadline()
                if nd is not None and nd <= self.now:
                    out = m.handle_timer(now=self.now)
                    self.events(name, out.events)
                    self.put(name, out.sends)


@pytest.mark.parametrize("acks", [AckMode.TIMESTAMP, AckMode.VECTOR])
@pytest.mark.parametrize("clock", [ClockMode.PHYSICAL, ClockMode.LAMPORT])
def test_lossy_group_delivers_everything_in_order_and_never_releases_early(
        acks: AckMode, clock: ClockMode) -> None:
    names = ["a", "b", "c", "d"]
    net = Net(names, seed=3, loss=0.15, dup=0.1, acks=acks, clock=clock)
    rng = random.Random(1)
    for i in range(200):
        net.send(rng.choice(names[:3]), b"%d" % i)  # d never sends (idle)
        net.run(rng.randint(0, 2) * MS)
    net.run(1000 * MS)
    for name in names:
        for sender in names:
            seqs = [s for src, s in net.delivered[name] if src == sender]
            assert seqs == list(range(net.members[sender].statistics().sent))
        assert net.members[name].buffered == 0, name
        assert net.members[name].statistics().stable == net.members[name].statistics().sent


def test_idle_sender_does_not_hold_stability() -> None:
    net = Net(["a", "b", "c"])
    net.send("a", b"x")
    net.run(100 * MS)
    assert net.stable["a"] == {0}
    assert net.members["b"].statistics().nulls > 0


def test_stalled_member_holds_buffers_then_they_drain() -> None:
    net = Net(["a", "b", "c"], seed=2)
    net.run(50 * MS)
    net.cut = {"c"}
    for i in range(30):
        net.send("a", b"%d" % i)
        net.run(2 * MS)
    net.run(300 * MS)
    assert net.members["a"].buffered == 30  # c has none of them: none released
    assert net.stable["a"] == set()
    net.cut = set()
    net.run(500 * MS)
    assert net.members["a"].buffered == 0 and net.stable["a"] == set(range(30))
    assert [s for src, s in net.delivered["c"] if src == "a"] == list(range(30))


def test_restarted_member_rejoins_by_section_6() -> None:
    net = Net(["a", "b", "c"], seed=4)
    for i in range(5):
        net.send("a", b"%d" % i)
    net.run(200 * MS)
    assert net.members["a"].buffered == 0
    net.members["c"] = net.make("c", 2)  # a new incarnation: state lost
    net.delivered["c"] = []
    net.run(100 * MS)
    for i in range(5, 10):
        net.send("a", b"%d" % i)
        net.run(5 * MS)
    net.run(300 * MS)
    assert net.members["a"].buffered == 0
    got = [s for src, s in net.delivered["c"] if src == "a"]
    assert got == list(range(5, 10))
    assert net.members["a"].statistics().leaves == 1  # the old incarnation left


def test_leave_releases_what_only_the_leaver_held() -> None:
    net = Net(["a", "b", "c"])
    net.cut = {"c"}
    net.send("a", b"x")
    net.run(100 * MS)
    assert net.members["a"].buffered == 1
    net.cut = set()
    out = net.members["c"].leave(now=net.now)
    net.flights.clear()
    net.put("c", out.sends)
    net.members.pop("c")
    net.names = ["a", "b"]
    net.run(100 * MS)
    assert net.members["a"].buffered == 0


def test_vector_acks_cost_more_bytes_than_timestamp_acks() -> None:
    sizes = {}
    for acks in AckMode:
        net = Net([f"m{i}" for i in range(8)], acks=acks)
        net.send("m0", b"x")
        net.run(200 * MS)
        sizes[acks] = net.members["m1"].statistics().ack_bytes
    assert sizes[AckMode.VECTOR] == 8 * sizes[AckMode.TIMESTAMP]


def test_malformed_and_foreign_datagrams_are_dropped() -> None:
    net = Net(["a", "b"])
    out = net.members["a"].send(b"payload", now=net.now)
    frame = out.sends[0][1]
    b = net.members["b"]
    for cut in range(len(frame) - len(b"payload")):
        assert b.receive(frame[:cut], now=net.now).events == ()
    b.receive(FrameCodec().seal(KIND_GROUP, b"\x07junk"), now=net.now)
    stats = b.statistics()
    assert stats.malformed == len(frame) - len(b"payload") + 1
    other = GroupMember("g", "zed", ["zed", "b"], FrameCodec(), incarnation=1, now=net.now)
    b.receive(other.send(b"x", now=net.now).sends[0][1], now=net.now)
    assert b.statistics().strangers == 1
    assert len(b.receive(frame, now=net.now).events) >= 1
