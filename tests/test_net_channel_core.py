"""The channel cores (``timebound.core.channel``) through an in-memory lossy wire.

A pair harness after aioquic's loss tests: a seeded wire that loses, duplicates and
reorders datagrams both ways, time advanced to each next deadline. Checked: the
slotted paper's rules (i)-(iv), every reliable message delivered exactly once, the
opening through SCMP (replays never start a second session), back-pressure, strict
decoding.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from timebound.core.atmostonce import Fixed, MemoryStorage, Receiver, StableLatest
from timebound.core.channel import ChannelReceiver, ChannelSender, Delivery
from timebound.core.slotted import Kind
from timebound.core.wire import KIND_CHANNEL, FrameCodec
from timebound.errors import ProtocolUsageError

MS = 1000
KINDS = [Kind.FR, Kind.R, Kind.F, Kind.N]


def scmp(storage: MemoryStorage | None = None, start: int = 0) -> Receiver:
    return Receiver(Fixed(60_000 * MS), gc_every=1000 * MS,
                    resilience=StableLatest(storage or MemoryStorage(), 2000 * MS, 1000 * MS),
                    start=start)


@dataclass
class Wire:
    """Datagrams in flight: (arrival time, order, to_receiver, frame)."""

    rng: random.Random
    loss: float = 0.0
    dup: float = 0.0
    reorder: bool = True
    flights: list[tuple[int, int, bool, bytes]] = field(default_factory=list)
    n: int = 0

    def put(self, now: int, to_receiver: bool, frame: bytes) -> None:
        if self.rng.random() < self.loss:
            return
        for _ in range(2 if self.rng.random() < self.dup else 1):
            self.n += 1
            delay = self.rng.randint(1, 8) * MS if self.reorder else MS
            self.flights.append((now + delay, self.n, to_receiver, frame))


def run_pair(kinds: list[Kind], seed: int, loss: float, dup: float, *,
             window: int = 16, reorder: bool = True) -> tuple[ChannelSender, ChannelReceiver[str],
                                        list[Delivery[str]]]:
    rng = random.Random(seed)
    wire = Wire(rng, loss, dup, reorder)
    sender = ChannelSender("c1", 5 * MS, FrameCodec(), window=window, min_rto=20 * MS,
                           give_up=10**12)
    receiver: ChannelReceiver[str] = ChannelReceiver(FrameCodec(), scmp(), start=0)
    delivered: list[Delivery[str]] = []
    now = 5 * MS
    todo = list(kinds)
    for _ in range(200_000):
        while todo and sender.can_send():
            _, frame = sender.send(b"%d" % len(todo), todo.pop(0), now=now)
            wire.put(now, True, frame)
        if not todo and not sender.unacked:
            break
        candidates = [t for t in (sender.next_deadline(),) if t is not None]
        if wire.flights:
            candidates.append(min(f[0] for f in wire.flights))
        now = max(now, min(candidates))
        for frame in sender.handle_timer(now=now):
            wire.put(now, True, frame)
        due = sorted(f for f in wire.flights if f[0] <= now)
        wire.flights = [f for f in wire.flights if f[0] > now]
        for _, _, to_receiver, frame in due:
            if to_receiver:
                out = receiver.receive(frame, "peer", now=now)
                delivered.extend(out.deliveries)
                for o in out.sends:
                    wire.put(now, False, o.datagram)
            else:
                sender.receive(frame, now=now)
    else:  # pragma: no cover
        raise AssertionError("the pair did not finish")
    return sender, receiver, delivered


def check_rules(kinds: list[Kind], delivered: list[Delivery[str]]) -> None:
    ids = [d.id for d in delivered]
    assert len(ids) == len(set(ids)), "a message delivered twice"
    reliable = {i for i, k in enumerate(kinds) if k.reliable}
    assert reliable <= set(ids), "a reliable message lost"
    for d in delivered:
        assert d.kind is kinds[d.id]
    frs = [d.id for d in delivered if d.kind is Kind.FR]
    assert frs == sorted(frs), "rule (i): FR out of send order"
    # slot of each message: FRs sent before it
    slot_of, slot = [], 0
    for k in kinds:
        slot_of.append(slot)
        if k is Kind.FR:
            slot += 1
    position = {d.id: n for n, d in enumerate(delivered)}
    fr_position = {slot_of[i]: position[i] for i in frs}  # slot s closes at its FR
    for d in delivered:
        if d.kind is Kind.FR:
            continue
        s = slot_of[d.id]
        assert d.slot == s
        if s - 1 in fr_position:  # rules (ii), (iii): inside its slot
            assert position[d.id] > fr_position[s - 1]
        if s in fr_position:
            assert position[d.id] < fr_position[s]
    for s in set(slot_of):  # rule (iv): F in send order within a slot
        fs = [d.id for d in delivered if d.kind is Kind.F and slot_of[d.id] == s]
        assert fs == sorted(fs)


@pytest.mark.parametrize("seed", range(6))
def test_lossy_duplicating_reordering_wire_keeps_rules_and_reliable_data(seed: int) -> None:
    rng = random.Random(100 + seed)
    kinds = [rng.choice(KINDS) for _ in range(300)]
    sender, receiver, delivered = run_pair(kinds, seed, loss=0.2, dup=0.1)
    check_rules(kinds, delivered)
    stats = receiver.statistics()
    assert stats.opens == 1 and stats.sessions == 1
    assert sender.statistics().retransmissions > 0
    assert stats.duplicates > 0


@given(st.lists(st.sampled_from(KINDS), min_size=1, max_size=40), st.integers(0, 10**6),
       st.sampled_from([0.0, 0.3]), st.sampled_from([0.0, 0.3]))
def test_rules_hold_for_any_send_sequence(kinds: list[Kind], seed: int, loss: float,
                                          dup: float) -> None:
    _, _, delivered = run_pair(kinds, seed, loss, dup, window=4)
    check_rules(kinds, delivered)


def test_clean_wire_delivers_everything_in_send_order() -> None:
    kinds = [Kind.R, Kind.FR, Kind.F, Kind.F, Kind.N, Kind.R, Kind.FR]
    _, receiver, delivered = run_pair(kinds, 1, 0.0, 0.0, reorder=False)
    assert {d.id for d in delivered} == set(range(len(kinds)))
    check_rules(kinds, delivered)


def test_open_is_retransmitted_even_if_unreliable() -> None:
    sender = ChannelSender("c", 10, FrameCodec(), min_rto=5)
    _, frame = sender.send(b"x", Kind.N, now=10)
    assert sender.unacked == 1 and sender.next_deadline() == 15
    assert sender.handle_timer(now=15) == (frame,)
    _, frame2 = sender.send(b"y", Kind.N, now=16)
    assert sender.unacked == 1  # later unreliable ones are sent once


def _deliver_all(receiver: ChannelReceiver[str], frames: list[bytes], now: int,
                 ) -> list[Delivery[str]]:
    out: list[Delivery[str]] = []
    for f in frames:
        out.extend(receiver.receive(f, "p", now=now).deliveries)
    return out


def test_replayed_opening_never_starts_a_second_session() -> None:
    sender = ChannelSender("c", 1000, FrameCodec())
    frames = [sender.send(b"%d" % i, Kind.R, now=1000)[1] for i in range(3)]
    receiver: ChannelReceiver[str] = ChannelReceiver(FrameCodec(), scmp(), idle=10 * MS)
    assert len(_deliver_all(receiver, frames, 1000)) == 3
    # The session expires; its frames come back (replay): nothing is delivered again.
    receiver.handle_timer(now=1000 + 20 * MS)
    assert receiver.sessions == 0
    assert _deliver_all(receiver, frames, 1000 + 21 * MS) == []
    stats = receiver.statistics()
    assert stats.replayed == 1 and stats.unknown_session == 2 and stats.opens == 1


def test_replayed_opening_after_receiver_restart_is_refused_down() -> None:
    storage = MemoryStorage()
    sender = ChannelSender("c", 1000, FrameCodec())
    frames = [sender.send(b"%d" % i, Kind.R, now=1000)[1] for i in range(2)]
    first: ChannelReceiver[str] = ChannelReceiver(FrameCodec(), scmp(storage), start=0)
    assert len(_deliver_all(first, frames, 1000)) == 2
    # A crash: a new receiver from the same stable storage, a moment later.
    second: ChannelReceiver[str] = ChannelReceiver(FrameCodec(), scmp(storage, start=1500),
                                                   start=1500)
    out = second.receive(frames[0], "p", now=1500)
    assert out.deliveries == () and len(out.sends) == 1
    assert second.statistics().refused["down"] == 1
    sender.receive(out.sends[0].datagram, now=1600)
    assert sender.failed == "down"
    with pytest.raises(ProtocolUsageError):
        sender.send(b"z", Kind.R, now=1700)


def test_early_opening_is_refused() -> None:
    sender = ChannelSender("c", 10**12, FrameCodec())
    _, frame = sender.send(b"x", Kind.R, now=10**12)
    receiver: ChannelReceiver[str] = ChannelReceiver(FrameCodec(), scmp())
    out = receiver.receive(frame, "p", now=1000)
    sender.receive(out.sends[0].datagram, now=2000)
    assert sender.failed == "early"


def test_back_pressure_window() -> None:
    sender = ChannelSender("c", 10, FrameCodec(), window=3)
    for _ in range(3):
        sender.send(b"", Kind.R, now=10)
    assert not sender.can_send()
    with pytest.raises(ProtocolUsageError):
        sender.send(b"", Kind.R, now=10)


def test_no_ack_progress_gives_up() -> None:
    sender = ChannelSender("c", 10, FrameCodec(), give_up=1000, min_rto=100)
    sender.send(b"", Kind.R, now=10)
    now = 10
    while sender.failed is None:
        deadline = sender.next_deadline()
        assert deadline is not None
        now = deadline
        sender.handle_timer(now=now)
    assert sender.failed == "timeout" and now == 1010
    assert sender.next_deadline() is None


def test_every_truncation_and_garbage_is_dropped_and_counted() -> None:
    sender = ChannelSender("c", 1000, FrameCodec())
    _, frame = sender.send(b"payload", Kind.F, now=1000)
    receiver: ChannelReceiver[str] = ChannelReceiver(FrameCodec(), scmp())
    for cut in range(len(frame) - len(b"payload")):
        out = receiver.receive(frame[:cut], "p", now=1000)
        assert out == type(out)()
    assert receiver.sessions == 0
    garbage = FrameCodec().seal(KIND_CHANNEL, b"\x09\x01c" + b"\x00" * 8)
    receiver.receive(garbage, "p", now=1000)
    assert receiver.statistics().malformed == len(frame) - len(b"payload") + 1
    assert len(receiver.receive(frame, "p", now=1000).deliveries) == 1
