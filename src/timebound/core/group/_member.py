"""One member of a stable multicast group over datagrams (stability paper, Fig. 1, §6).

Theory of operation
-------------------
Berket et al.'s Fig. 1 assumes reliable FIFO message channels and unreliable ack
channels; ``GroupMember`` builds the first from datagrams and runs Fig. 1 on top of
it through a ``StabilityNode`` (every member is sender and receiver, and receives
its own messages and acks, as the replay contract prescribes).

*Reliable FIFO per sender.* Messages are multicast by unicast fan-out, numbered per
sender (``seq``, from 0 per incarnation). A receiver delivers them in sequence order;
one that arrives ahead of a gap waits (at most ``MAX_AHEAD`` ahead) and the gap is
asked for with a NACK, at most every ``nack_every`` ticks per sender, answered from
the sender's send buffer. A lost tail is found through the heartbeat's ``next``.

*Send buffer = stability buffer.* A message stays in its sender's buffer (and can be
retransmitted) until Fig. 1 finds it stable: every member of the receiver group has
acknowledged a timestamp at or above its own. Then it is released (a ``Stable``
event). ``max_buffer`` bounds the buffer: ``can_send()`` is False while it is full,
and the driver's ``send`` waits (back-pressure).

*Periodic acks.* Every ``ack_every`` ticks (absolute multiples) a member makes its
ack (Fig. 1: the minimum of its timestamp vector; or the vector, ``AckMode.VECTOR``,
the baseline) and multicasts it in a heartbeat (HB) that also carries ``next``,
``base`` (its lowest buffered sequence number) and ``promise``.

*Null messages (choice: Fig. 1 is silent on idle senders).* An idle sender's entry in
every vector would stay put and hold the timestamp ack down for everyone. The HB's
``promise`` is a timestamp the sender will never again stamp at or below (physical
clock: its clock reading; Lamport: its counter; its next message is stamped above
it), so a receiver that has delivered *everything* below ``next`` treats it as a
message without data: the vector entry rises to it. This is sound for the same
reason a real message is (reliable FIFO, increasing timestamps), and it is what lets
the timestamp ack advance under uneven traffic. A member does the same for itself
before each ack. Pinned by ``tests/test_net_group_core.py::test_idle_sender_does_not_hold_stability``.

*Membership (section 6).* The members named at start-up are members from the start
with entry 0 (static, as the replay contract has it): nothing is stable before every
one of them has acknowledged it. A member that restarts comes back with a new
incarnation; the others then apply the paper's disconnection (``remove_sender`` /
``remove_receiver``) to the old one and its join steps to the new one: it enters
S_r at r's next ack (sent at once) with that ack's value as its entry (step 2), and
R_s when s next sends a message stamped above the ack received from it (step 4).
``leave()`` multicasts LEAVE (both channels closed, step 1 of disconnection);
with ``dead_after`` a member silent that long is disconnected too. A disconnected
member heard from again rejoins by the join steps. A receiver whose expected
sequence number is below a sender's ``base`` skips to it (those messages were stable
among R_s without it, so it was not owed them) -- never otherwise.

*Range checks at receive time (one datagram must not poison a member).*
Every field of a decoded frame is checked before any state is touched; a frame with
one out of range is dropped and counted (``out_of_range``), never stored and never
raised later. Bounds (choices): an incarnation is a µs clock reading at the member's
start, so ``1 <= inc <= now + max_skew`` (``max_skew``: how far another member's
clock may run ahead of ours, default ``DEFAULT_MAX_SKEW`` = 10 s); physical
timestamps (MSG ``ts``, HB ``promise``, ack values) likewise ``<= now + max_skew``;
Lamport ones ``<= clock + LAMPORT_SLACK`` (2^32 events ahead of ours; they are also
kept below ``SEQ_LIMIT``, so our own counter never outgrows its u64); sequence
numbers (``seq``, ``next``, ``base``, NACK ``first``) below ``SEQ_LIMIT`` (2^62); a
vector ack names at most every member, each one a member. A forged heartbeat
claiming incarnation 2^64-1 (which used to make a member ignore the real one for good
and acknowledge messages it never got) is thus dropped. Without a key an attacker
who reads the traffic can still forge frames whose every field is in range: only a
key (``FrameCodec``) stops those (``docs/net.md``, threat model). Pinned by
``tests/test_net_group_hostile.py::test_forged_frames_never_break_stability``.

*Answers to datagrams (no amplification).* A member sends only to the
configured addresses of the members. A NACK is answered (up to ``MAX_NACK``
retransmissions) only when the driver says the datagram came from the configured
address of the member it names (``receive(..., source=name)``; ``check_sources=False``
drops that check, for members behind relays that change source addresses), at most
once per ``nack_every // 2`` ticks per member (a member NACKs a sender at most every
``nack_every``), and the retransmissions go to that member's configured address: a
spoofed or replayed NACK cannot aim them at another host, nor multiply them.
Unanswered NACKs are counted (``unanswered``). Pinned by
``tests/test_net_group_hostile.py::test_spoofed_nack_is_not_answered``.

Verbs: ``send(data, *, now)``, ``receive(datagram, *, now, source)``, ``handle_timer(*, now)``,
``leave(*, now)``, ``next_deadline()``, ``statistics()``. Outputs name destinations by
member name; the driver maps names to addresses.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from timebound.core.group._wire import (
    MAX_NACK,
    Head,
    Heartbeat,
    Leave,
    Msg,
    Nack,
    check_name,
    decode,
    encode_heartbeat,
    encode_leave,
    encode_msg,
    encode_nack,
)
from timebound.core.stability import AckMode, ClockMode, StabilityNode, TimestampAck
from timebound.core.wire import KIND_GROUP, FrameCodec
from timebound.errors import MalformedDatagram, ProtocolUsageError

#: Messages a receiver holds ahead of a gap, per sender.
MAX_AHEAD = 4096
#: Defaults, ticks (µs).
DEFAULT_ACK_EVERY = 20_000
DEFAULT_NACK_EVERY = 20_000
DEFAULT_MAX_BUFFER = 4096
#: How far (ticks, µs) another member's clock (incarnation, physical timestamps) may
#: run ahead of ours before its frames count as out of range.
DEFAULT_MAX_SKEW = 10_000_000
#: How far a Lamport timestamp may run ahead of our own counter.
LAMPORT_SLACK = 1 << 32
#: Sequence numbers and timestamps at or above this are out of range (never reached:
#: 2^62 µs is 146,000 years; it keeps every counter far from its u64's end).
SEQ_LIMIT = 1 << 62


@dataclass(frozen=True, slots=True)
class Delivered:
    sender: str
    seq: int
    ts: int
    data: bytes
    at: int


@dataclass(frozen=True, slots=True)
class Stable:
    """One of this member's messages became stable (every member has it)."""

    seq: int
    ts: int
    latency: int  # ticks from its send


@dataclass(frozen=True, slots=True)
class Joined:
    member: str
    inc: int


@dataclass(frozen=True, slots=True)
class Left:
    member: str
    reason: str  # "leave", "silent", "restart"


Event = Delivered | Stable | Joined | Left


@dataclass(frozen=True, slots=True)
class GroupOutput:
    sends: tuple[tuple[str, bytes], ...] = ()
    events: tuple[Event, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupStatistics:
    members: int
    sent: int
    delivered: int
    ignored: int
    duplicates: int
    skipped: int
    nulls: int
    stable: int
    buffered: int
    max_buffered: int
    buffer_area: int
    stability_latency_sum: int
    stability_latency_max: int
    acks_sent: int
    ack_bytes: int
    ack_frame_bytes: int
    nacks_sent: int
    retransmissions: int
    joins: int
    leaves: int
    strangers: int
    malformed: int
    unauthenticated: int
    out_of_range: int = 0
    unanswered: int = 0  # NACKs not from their member's configured address


@dataclass(slots=True)
class _Counters:
    """A member's own counters (the stability node's are read from it)."""

    delivered: int = 0
    ignored: int = 0
    duplicates: int = 0
    skipped: int = 0
    nulls: int = 0
    ack_frame_bytes: int = 0
    nacks: int = 0
    retransmissions: int = 0
    joins: int = 0
    leaves: int = 0
    strangers: int = 0
    malformed: int = 0
    out_of_range: int = 0
    unanswered: int = 0


class _Peer:
    __slots__ = ("name", "inc", "expect", "ahead", "known_next", "heard", "nack_due",
                 "member", "answered")

    def __init__(self, name: str) -> None:
        self.name = name
        self.inc: int | None = None
        self.expect = 0
        self.ahead: dict[int, tuple[int, bytes]] = {}
        self.known_next = 0
        self.heard: int | None = None
        self.nack_due = 0
        self.member = True  # in S_r and R_s (or joining); False: disconnected
        self.answered: int | None = None  # when its last NACK was answered


class GroupMember:
    """One member (sans-IO): data and datagrams in; frames and events out."""

    def __init__(self, group: str, name: str, members: Iterable[str], codec: FrameCodec, *,
                 incarnation: int, acks: AckMode = AckMode.TIMESTAMP,
                 clock: ClockMode = ClockMode.PHYSICAL, ack_every: int = DEFAULT_ACK_EVERY,
                 nack_every: int = DEFAULT_NACK_EVERY, dead_after: int | None = None,
                 max_buffer: int = DEFAULT_MAX_BUFFER, max_skew: int = DEFAULT_MAX_SKEW,
                 check_sources: bool = True, now: int = 0) -> None:
        check_name(group)
        check_name(name)
        others = sorted({check_name(m) for m in members} - {name})
        if ack_every < 1 or nack_every < 1:
            raise ProtocolUsageError("ack_every and nack_every must be >= 1")
        if dead_after is not None and dead_after < 1:
            raise ProtocolUsageError("dead_after must be >= 1 or None")
        if max_buffer < 1:
            raise ProtocolUsageError("max_buffer must be >= 1")
        if max_skew < 0:
            raise ProtocolUsageError("max_skew must be >= 0")
        self.group = group
        self.name = name
        self.codec = codec
        self.head = Head(group, name, incarnation)
        self.acks = acks
        self.clock_mode = clock
        self.ack_every = ack_every
        self.nack_every = nack_every
        self.dead_after = dead_after
        self.max_buffer = max_buffer
        self.max_skew = max_skew
        self.check_sources = check_sources
        everyone = [*others, name]
        self.node = StabilityNode(name, senders=everyone, receivers=everyone, acks=acks,
                                  clock=clock, now=now)
        self.peers = {p: _Peer(p) for p in others}
        self._now = now
        self._started = now
        self._seq = 0
        self._last_ts = 0
        self._promised = 0
        self._frames: dict[int, bytes] = {}  # seq -> sealed MSG (the send buffer)
        self._by_ts: dict[int, tuple[int, int]] = {}  # ts -> (seq, sent at)
        self._next_ack = (now // ack_every + 1) * ack_every
        self._c = _Counters()

    # -- queries -----------------------------------------------------------------

    def can_send(self) -> bool:
        return len(self._frames) < self.max_buffer

    @property
    def buffered(self) -> int:
        """This member's messages not yet stable (its send buffer)."""
        return len(self._frames)

    @property
    def next_seq(self) -> int:
        """The sequence number of this member's next message."""
        return self._seq

    def members(self) -> list[str]:
        """Peers currently connected (not left or silent), and this member."""
        return sorted([p.name for p in self.peers.values() if p.member] + [self.name])

    def next_deadline(self) -> int | None:
        deadline = self._next_ack
        for p in self.peers.values():
            if self._gap(p):
                deadline = min(deadline, max(p.nack_due, self._now))
            if self.dead_after is not None and p.member and p.heard is not None:
                deadline = min(deadline, p.heard + self.dead_after)
        return deadline

    def statistics(self) -> GroupStatistics:
        s = self.node.statistics()
        assert s.sender is not None and s.receiver is not None
        c = self._c
        return GroupStatistics(
            members=len(self.members()), sent=s.sender.sent, delivered=c.delivered,
            ignored=c.ignored, duplicates=c.duplicates, skipped=c.skipped,
            nulls=c.nulls, stable=s.sender.stable, buffered=len(self._frames),
            max_buffered=s.sender.max_buffered, buffer_area=s.sender.buffer_area,
            stability_latency_sum=s.sender.latency_sum,
            stability_latency_max=s.sender.max_latency, acks_sent=s.receiver.acks_sent,
            ack_bytes=s.receiver.ack_bytes, ack_frame_bytes=c.ack_frame_bytes,
            nacks_sent=c.nacks, retransmissions=c.retransmissions, joins=c.joins,
            leaves=c.leaves, strangers=c.strangers,
            malformed=self.codec.malformed + c.malformed,
            unauthenticated=self.codec.unauthenticated, out_of_range=c.out_of_range,
            unanswered=c.unanswered,
        )

    # -- inputs ------------------------------------------------------------------

    def send(self, data: bytes, *, now: int) -> GroupOutput:
        """Multicast ``data``; ``ProtocolUsageError`` while the buffer is full."""
        self._at(now)
        if not self.can_send():
            raise ProtocolUsageError("send buffer full (wait for stability)")
        if self.clock_mode is ClockMode.LAMPORT:
            sent = self.node.send(now=now)
        else:
            ts = max(now, self._last_ts + 1, self._promised + 1)
            sent = self.node.send(now=now, ts=ts)
        ts = sent.ts
        self._last_ts = ts
        seq = self._seq
        self._seq += 1
        frame = self.codec.seal(KIND_GROUP, encode_msg(self.head, seq, ts, data))
        self._frames[seq] = frame
        self._by_ts[ts] = (seq, now)
        events: list[Event] = []
        if sent.self_delivered:
            self._c.delivered += 1
            events.append(Delivered(self.name, seq, ts, data, now))
        self._stable(sent.stable, events)
        return GroupOutput(tuple((p, frame) for p in self.peers), tuple(events))

    def receive(self, datagram: bytes, *, now: int, source: str | None = None
                ) -> GroupOutput:
        """A datagram; ``source``: the member whose configured address it came from
        (None: none of them). Only a NACK from its own member's address is answered."""
        self._at(now)
        opened = self.codec.open(datagram, now=now)
        if opened is None:
            return GroupOutput()
        if opened.kind != KIND_GROUP:
            self._c.malformed += 1
            return GroupOutput()
        try:
            msg = decode(opened.body)
        except MalformedDatagram:
            self._c.malformed += 1
            return GroupOutput()
        head = msg.head
        peer = self.peers.get(head.member)
        if head.group != self.group or peer is None:
            self._c.strangers += 1
            return GroupOutput()
        if not self._in_range(msg, now):
            self._c.out_of_range += 1
            return GroupOutput()
        sends: list[tuple[str, bytes]] = []
        events: list[Event] = []
        if not self._incarnation(peer, head.inc, now, sends, events):
            return GroupOutput()
        peer.heard = now
        if isinstance(msg, Leave):
            if peer.member:
                self._disconnect(peer, "leave", now, events)
            return GroupOutput(tuple(sends), tuple(events))
        if not peer.member:
            self._rejoin(peer, now, sends, events)
        if isinstance(msg, Msg):
            self._message(peer, msg, now, events)
        elif isinstance(msg, Heartbeat):
            self._heartbeat(peer, msg, now, events)
        elif isinstance(msg, Nack):
            if msg.to != self.name or msg.to_inc != self.head.inc:
                pass
            elif ((self.check_sources and source != peer.name)
                  or (peer.answered is not None
                      and now < peer.answered + self.nack_every // 2)):
                self._c.unanswered += 1
            else:
                peer.answered = now
                for seq in range(msg.first, msg.first + msg.count):
                    frame = self._frames.get(seq)
                    if frame is not None:
                        self._c.retransmissions += 1
                        sends.append((peer.name, frame))
        if self._gap(peer) and peer.nack_due <= now:
            self._nack(peer, now, sends)
        return GroupOutput(tuple(sends), tuple(events))

    def handle_timer(self, *, now: int) -> GroupOutput:
        self._at(now)
        sends: list[tuple[str, bytes]] = []
        events: list[Event] = []
        if self.dead_after is not None:
            for p in self.peers.values():
                if p.member and p.heard is not None and now >= p.heard + self.dead_after:
                    self._disconnect(p, "silent", now, events)
        for p in self.peers.values():
            if self._gap(p) and p.nack_due <= now:
                self._nack(p, now, sends)
        if now >= self._next_ack:
            self._next_ack = (now // self.ack_every + 1) * self.ack_every
            self._ack(now, sends, events)
        return GroupOutput(tuple(sends), tuple(events))

    def leave(self, *, now: int) -> GroupOutput:
        """The LEAVE datagrams to multicast (send them a few times: they may be lost)."""
        self._at(now)
        frame = self.codec.seal(KIND_GROUP, encode_leave(self.head))
        return GroupOutput(tuple((p, frame) for p in self.peers))

    # -- internals ---------------------------------------------------------------

    def _at(self, now: int) -> None:
        if now < self._now:
            now = self._now  # the driver's clock never goes back; be lenient by a tick
        self._now = now

    def _in_range(self, msg: Msg | Heartbeat | Nack | Leave, now: int) -> bool:
        """Every field of ``msg`` within its bound (module docstring)."""
        if not 1 <= msg.head.inc <= now + self.max_skew:
            return False
        if self.clock_mode is ClockMode.LAMPORT:
            limit = min(self.node.clock + LAMPORT_SLACK, SEQ_LIMIT - 1)
        else:
            limit = min(now + self.max_skew, SEQ_LIMIT - 1)
        if isinstance(msg, Msg):
            return msg.seq < SEQ_LIMIT and msg.ts <= limit
        if isinstance(msg, Heartbeat):
            if msg.next >= SEQ_LIMIT or msg.promise > limit:
                return False
            ack = msg.ack
            if isinstance(ack, TimestampAck):
                return ack.value <= limit
            entries = ack.entries
            return (len(entries) <= len(self.peers) + 1
                    and all((n == self.name or n in self.peers) and v <= limit
                            for n, v in entries.items()))
        if isinstance(msg, Nack):
            return msg.first < SEQ_LIMIT
        return True

    def _gap(self, p: _Peer) -> bool:
        return p.member and (bool(p.ahead) or p.known_next > p.expect)

    def _incarnation(self, p: _Peer, inc: int, now: int, sends: list[tuple[str, bytes]],
                     events: list[Event]) -> bool:
        if p.inc == inc:
            return True
        if p.inc is None:
            p.inc = inc  # first heard: a static member (entry 0 from start-up)
            self._c.joins += 1
            events.append(Joined(p.name, inc))
            return True
        if inc < p.inc:
            return False  # a datagram of an older incarnation
        if p.member:
            self._disconnect(p, "restart", now, events)
        p.inc = inc
        p.expect = 0
        p.ahead.clear()
        p.known_next = 0
        self._rejoin(p, now, sends, events)
        return True

    def _rejoin(self, p: _Peer, now: int, sends: list[tuple[str, bytes]],
                events: list[Event]) -> None:
        """Section 6 connection: steps 1-2 (r: ack channel, S_r at the next ack, sent
        now) and 3-4 (s: message channel; R_s at the next message stamped above r's ack)."""
        p.member = True
        assert self.node.receiver is not None and self.node.sender is not None
        self.node.receiver.add_sender(p.name)
        self.node.sender.add_receiver(p.name)
        self._c.joins += 1
        assert p.inc is not None
        events.append(Joined(p.name, p.inc))
        self._ack(now, sends, events)

    def _disconnect(self, p: _Peer, reason: str, now: int, events: list[Event]) -> None:
        p.member = False
        assert self.node.receiver is not None and self.node.sender is not None
        self.node.receiver.remove_sender(p.name)
        released = self.node.sender.remove_receiver(p.name, now=now)
        self._c.leaves += 1
        events.append(Left(p.name, reason))
        self._stable(released, events)

    def _message(self, p: _Peer, msg: Msg, now: int, events: list[Event]) -> None:
        seq = msg.seq
        if seq < p.expect or seq in p.ahead:
            self._c.duplicates += 1
            return
        if seq >= p.expect + MAX_AHEAD:
            self._c.out_of_range += 1
            return
        if seq + 1 > p.known_next:
            p.known_next = seq + 1
        if seq > p.expect:
            p.ahead[seq] = (msg.ts, msg.data)
            return
        self._deliver(p, seq, msg.ts, msg.data, now, events)
        self._drain(p, now, events)

    def _deliver(self, p: _Peer, seq: int, ts: int, data: bytes, now: int,
                 events: list[Event]) -> None:
        p.expect = seq + 1
        if self.node.receive(p.name, ts, now=now):
            self._c.delivered += 1
            events.append(Delivered(p.name, seq, ts, data, now))
        else:
            self._c.ignored += 1

    def _drain(self, p: _Peer, now: int, events: list[Event]) -> None:
        ahead = p.ahead
        while ahead:
            item = ahead.pop(p.expect, None)
            if item is None:
                return
            self._deliver(p, p.expect, item[0], item[1], now, events)

    def _heartbeat(self, p: _Peer, hb: Heartbeat, now: int, events: list[Event]) -> None:
        if hb.base > p.expect:
            self._c.skipped += hb.base - p.expect
            for seq in [s for s in p.ahead if s < hb.base]:
                del p.ahead[seq]
            p.expect = hb.base
            self._drain(p, now, events)
        if hb.next > p.known_next:
            p.known_next = hb.next
        receiver = self.node.receiver
        assert receiver is not None
        last = receiver.last(p.name)
        if p.expect >= hb.next and last is not None and hb.promise > last:
            self.node.receive(p.name, hb.promise, now=now)
            self._c.nulls += 1
        self._stable(self.node.receive_ack(hb.ack, now=now), events)

    def _ack(self, now: int, sends: list[tuple[str, bytes]], events: list[Event]) -> None:
        receiver = self.node.receiver
        assert receiver is not None
        promise = self.node.clock if self.clock_mode is ClockMode.LAMPORT else now
        promise = max(promise, self._last_ts, self._promised)
        self._promised = promise
        last = receiver.last(self.name)
        if last is not None and promise > last:
            self.node.receive(self.name, promise, now=now)  # our own null message
        acked = self.node.make_ack(now=now)
        self._stable(acked.stable or [], events)
        base = min(self._frames) if self._frames else self._seq
        frame = self.codec.seal(KIND_GROUP, encode_heartbeat(
            self.head, self._seq, base, promise, acked.ack))
        self._c.ack_frame_bytes += len(frame) * len(self.peers)
        sends.extend((p, frame) for p in self.peers)

    def _nack(self, p: _Peer, now: int, sends: list[tuple[str, bytes]]) -> None:
        end = max([p.known_next, *(s + 1 for s in p.ahead)])
        first = p.expect
        while first < end and first in p.ahead:
            first += 1
        count = min(MAX_NACK, end - first)
        if count < 1 or p.inc is None:
            return
        frame = self.codec.seal(KIND_GROUP, encode_nack(self.head, p.name, p.inc, first,
                                                        count))
        self._c.nacks += 1
        p.nack_due = now + self.nack_every
        sends.append((p.name, frame))

    def _stable(self, released: list[int], events: list[Event]) -> None:
        for ts in released:
            item = self._by_ts.pop(ts, None)
            if item is None:
                continue
            seq, sent = item
            self._frames.pop(seq, None)
            events.append(Stable(seq, ts, self._now - sent))

