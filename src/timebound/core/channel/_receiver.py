"""The receiving end of slotted-FIFO channels: SCMP opening, dedup, acks, Fig. 4.

Theory of operation
-------------------
One ``ChannelReceiver`` serves every channel that senders open towards one socket.
A datagram goes through three layers, all here and all pure:

1. *Opening* (SCMP section 3). A session is named by ``(conn, ts)``. The first
   datagram of a session (the OPEN, sequence number 0) is an at-most-once message:
   it goes through the SCMP ``Receiver`` given to the constructor, and only it does
   (the paper: SCMP is sensitive to reordering, so applying it to later datagrams of
   the stream would reject them). ACCEPTED starts the session; an OPEN of the live
   session again (a retransmission) is handled as a duplicate segment and
   re-acknowledged; DUPLICATE for a session no longer held (forgotten, or of another
   ``ts``) is a replay and is dropped (``replayed``) -- so a late or replayed opening
   never starts a second session. STALE, EARLY, DOWN, RECOVERING and FULL are answered
   with REFUSE (stale, early, down, down, overloaded; STALE while the clock has not
   passed the ``upper`` recovered from stable storage is reported as down, as the
   RPC does). A DATA datagram of an unknown session is dropped (``unknown_session``)
   and answered with a REFUSE naming it (reason ``UNKNOWN_SESSION``): a DATA that
   overtook its OPEN is retransmitted once the OPEN is in (its sender ignores that
   REFUSE), and a sender whose established session this receiver lost (a restart, an
   idle expiry, an eviction) learns it at once instead of after its ``give_up``.
2. *Transport* (the slotted paper's "message numeration at TL"). Per session, the
   sequence numbers received at or above the sender's ``floor`` are remembered, so a
   duplicate datagram is suppressed (``duplicates``) and never reaches the slotted
   receiver; below the floor everything is old (a late unreliable datagram is lost,
   which its kind allows). Sequence numbers ``MAX_WINDOW`` or more above the floor
   are dropped (``out_of_window``), so memory per session is bounded. Every reliable
   datagram (and the OPEN) is acknowledged at once, duplicates too: ``cum`` plus the
   datagram's own number and the smallest other reliable numbers received above
   ``cum``. Cost per datagram stays small whatever a sender names (a
   forged hole below 60,000 reliable numbers, or a floor moved by one per datagram,
   cost 0.15 and 1.3 ms a datagram with sets rebuilt each time): the reliable
   numbers are a sorted list (an ACK reads the few it lists after a bisection) and
   ``seen`` is pruned only once the floor has moved by half its size
   (``test_dedup_memory_stays_bounded_as_the_floor_creeps``).
3. *Slotted FIFO* (Fig. 4): each new datagram is handed, in arrival order, to the
   session's ``SlottedReceiver``, whose deliveries come out as ``Delivery`` records.

Sessions idle for ``idle`` ticks are forgotten (``expired``); with ``max_sessions``
the least recently active session is evicted to admit a new one (``evicted``).
Either way SCMP still guards the opening: its table or ``upper`` refuses a replay.

Bounded memory: the data bytes held in the sessions' resequencing buffers (all
sessions together) are counted (``held_bytes``). Once they reach
``max_held_bytes``, a session holding at least its fair share (``max_held_bytes``
over the sessions held) has a segment that might only be held dropped
unacknowledged (``held_full``): one of a later slot than the open one, or an F.
Choices: never one that may be deliverable now (an R, N or FR of the open slot),
so the open slot can always close and activate what is held (a dropped R or FR
comes back by retransmission, a dropped F or N is a loss its kind allows); and
only from a session over its share, so sessions that hog the budget (a flood of
forged sessions without a key) do not cost the others their F. The total stays
below ``max_held_bytes`` plus one datagram per session. Pinned by
``tests/test_net_channel_hostile.py::test_held_bytes_are_bounded_and_the_channel_lives``.

No amplification (RFC 9000 section 8's rule): to an address that has not
proved it receives our datagrams we never send more than 3x the bytes it sent us.
The receiver keeps that rule per datagram, which implies it per address: it only
ever *answers* (no timer sends anything), every answer goes to the address the
triggering datagram came from (not to the session's first peer, so a DATA sent from
B cannot aim acknowledgments at the A an OPEN named), and every answer is at most 3x
the triggering datagram. A REFUSE is shorter than the OPEN it answers (same session
head, 1 byte against the segment's 29 or more). An ACK carries as many selective
numbers as fit in 3x the segment it answers (``_ack``; at most ``MAX_SACK``): its
own number first, then the smallest others above ``cum``; the cumulative ack always
advances, so a sender loses nothing but some selective information (it may
retransmit a datagram that had arrived). The smallest segment (no data, 1-byte
connection id, no key) is 44 bytes, the ACK head 25: 13 selective numbers always
fit, so the own number always does. Choice: no address validation round trip --
a session's OPEN from an address proves nothing (it may be spoofed) and the
per-datagram cap already bounds every answer; a validated address would only buy
longer ACKs. Pinned by ``tests/test_net_channel_hostile.py::
test_no_answer_exceeds_three_times_its_trigger`` (measured per message type, key or
not).

Nothing one datagram can poison: every field is range-checked when the
datagram is decoded (``_wire.decode``: ``ts``, the stamp against ``seq``), counted
``malformed`` and dropped, never kept to raise or block later. ``seq`` and ``floor``
are bounded by the window (``out_of_window``); a ``floor`` or ``seq`` jump within it
is something a legitimate sender does (a run of lost unreliable datagrams), so only a
key tells a forged one (``docs/net.md``, threat model).

Verbs: ``receive(datagram, peer, *, now)``, ``handle_timer(*, now)``,
``next_deadline()``, ``statistics()``. Tests: ``tests/test_net_channel_core.py``.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from timebound.core.atmostonce import Receiver, Verdict
from timebound.core.channel._sender import MAX_WINDOW
from timebound.core.channel._wire import (
    MAX_SACK,
    UNKNOWN_SESSION,
    Segment,
    decode,
    encode_ack,
    encode_refuse,
)
from timebound.core.slotted import Deliver, Discard, Kind, SlottedReceiver
from timebound.core.wire import HEADER_BYTES, KIND_CHANNEL, TAG_BYTES, FrameCodec, Key, Outgoing
from timebound.errors import MalformedDatagram, ProtocolUsageError

P = TypeVar("P", bound=Hashable)

#: Default idle time before a session is forgotten, ticks (µs): 5 minutes.
DEFAULT_IDLE = 300_000_000
#: Default most sessions held at once.
DEFAULT_MAX_SESSIONS = 1024
#: Most bytes an answer may have per byte of the datagram it answers (RFC 9000 s. 8).
AMPLIFICATION = 3
#: Default most data bytes held for resequencing, all sessions together: 64 MiB.
DEFAULT_MAX_HELD_BYTES = 64 << 20

_REFUSALS = {Verdict.STALE: 1, Verdict.EARLY: 2, Verdict.DOWN: 3, Verdict.RECOVERING: 3,
             Verdict.FULL: 4}
_REASON_NAMES = {1: "stale", 2: "early", 3: "down", 4: "overloaded"}


@dataclass(frozen=True, slots=True)
class Delivery(Generic[P]):
    """One message handed to the application, in slotted-FIFO order."""

    peer: P
    conn: str
    id: int  # the sender's sequence number (0-based send order on the channel)
    kind: Kind
    slot: int
    data: bytes
    arrived: int
    delivered: int


@dataclass(frozen=True, slots=True)
class ChannelReceiverOutput(Generic[P]):
    sends: tuple[Outgoing, ...] = ()
    deliveries: tuple[Delivery[P], ...] = ()


@dataclass(frozen=True, slots=True)
class ChannelReceiverStatistics:
    datagrams: int
    opens: int
    sessions: int
    refused: dict[str, int]
    replayed: int
    duplicates: int
    out_of_window: int
    unknown_session: int
    delivered: dict[str, int]
    discarded: dict[str, int]
    buffered: int
    max_buffered: int
    acks: int
    expired: int
    evicted: int
    malformed: int
    unauthenticated: int
    held_bytes: int = 0
    held_full: int = 0


class _Session(Generic[P]):
    __slots__ = ("peer", "ts", "floor", "cum", "seen", "reliable", "slotted", "active",
                 "key", "held", "pruned")

    def __init__(self, peer: P, ts: int, now: int, f_hold: int | None,
                 key: Key | None) -> None:
        self.peer = peer
        self.ts = ts
        self.floor = 0
        self.cum = 0
        self.seen: set[int] = set()  # may keep numbers below floor (see _segment)
        self.pruned = 0  # the floor when ``seen`` was last pruned
        self.reliable: list[int] = []  # sorted, all >= floor
        self.slotted: SlottedReceiver[tuple[int, bytes]] = SlottedReceiver(now, f_hold=f_hold)
        self.active = now
        self.key = key
        self.held = 0  # data bytes in ``slotted``'s buffers


class ChannelReceiver(Generic[P]):
    """Every channel towards one endpoint (sans-IO): frames in, deliveries and acks out."""

    def __init__(self, codec: FrameCodec, scmp: Receiver, *, idle: int = DEFAULT_IDLE,
                 max_sessions: int = DEFAULT_MAX_SESSIONS, f_hold: int | None = None,
                 start: int = 0, max_held_bytes: int = DEFAULT_MAX_HELD_BYTES) -> None:
        if idle < 1:
            raise ProtocolUsageError(f"idle must be >= 1, got {idle}")
        if max_sessions < 1:
            raise ProtocolUsageError(f"max_sessions must be >= 1, got {max_sessions}")
        if max_held_bytes < 0:
            raise ProtocolUsageError(f"max_held_bytes must be >= 0, got {max_held_bytes}")
        self.max_held_bytes = max_held_bytes
        self._held_bytes = self._held_full = 0
        self.codec = codec
        self.scmp = scmp
        self.idle = idle
        self.max_sessions = max_sessions
        self.f_hold = f_hold
        self.down_until = scmp.upper
        self._now = start
        self._sessions: OrderedDict[str, _Session[P]] = OrderedDict()  # by activity
        self._datagrams = self._opens = self._replayed = self._duplicates = 0
        self._out_of_window = self._unknown = self._acks = 0
        self._expired = self._evicted = self._malformed = 0
        self._refused = dict.fromkeys(_REASON_NAMES.values(), 0)
        self._delivered = {kind.value: 0 for kind in Kind}
        self._discarded: dict[str, int] = {}
        self._past_buffered = 0
        self._max_buffered = 0

    # -- queries -----------------------------------------------------------------

    @property
    def sessions(self) -> int:
        return len(self._sessions)

    def next_deadline(self) -> int | None:
        deadlines = [d for d in (self.scmp.next_deadline(),) if d is not None]
        if self._sessions:
            oldest = next(iter(self._sessions.values()))
            deadlines.append(oldest.active + self.idle)
            if self.f_hold is not None:
                deadlines.extend(d for s in self._sessions.values()
                                 if (d := s.slotted.next_deadline()) is not None)
        return min(deadlines) if deadlines else None

    def statistics(self) -> ChannelReceiverStatistics:
        discarded = dict(self._discarded)
        buffered = 0
        for s in self._sessions.values():
            st = s.slotted.statistics()
            buffered += st.buffered
            for reason, n in st.discarded.items():
                discarded[reason] = discarded.get(reason, 0) + n
        return ChannelReceiverStatistics(
            datagrams=self._datagrams, opens=self._opens, sessions=len(self._sessions),
            refused=dict(self._refused), replayed=self._replayed,
            duplicates=self._duplicates, out_of_window=self._out_of_window,
            unknown_session=self._unknown, delivered=dict(self._delivered),
            discarded=discarded, buffered=buffered,
            max_buffered=max(self._max_buffered, buffered), acks=self._acks,
            expired=self._expired, evicted=self._evicted,
            malformed=self.codec.malformed + self._malformed,
            unauthenticated=self.codec.unauthenticated,
            held_bytes=self._held_bytes, held_full=self._held_full,
        )

    # -- inputs ------------------------------------------------------------------

    def receive(self, datagram: bytes, peer: P, *, now: int) -> ChannelReceiverOutput[P]:
        self._now = max(self._now, now)
        now = self._now
        self._datagrams += 1
        opened = self.codec.open(datagram, now=now)
        if opened is None:
            return ChannelReceiverOutput()
        if opened.kind != KIND_CHANNEL:
            self._malformed += 1
            return ChannelReceiverOutput()
        try:
            msg = decode(opened.body)
        except MalformedDatagram:
            self._malformed += 1
            return ChannelReceiverOutput()
        if not isinstance(msg, Segment):
            return ChannelReceiverOutput()  # acks and refusals go to senders
        trigger = len(datagram)
        session = self._sessions.get(msg.conn)
        if session is not None and session.ts == msg.ts:
            return self._segment(session, msg, now, peer, trigger)
        if not msg.opening:
            self._unknown += 1
            # Tell the sender (a REFUSE shorter than the segment, 9 bytes against 29
            # or more): an established session it names was lost here (the sender
            # knows which; a DATA that overtook its OPEN is refused too, harmlessly).
            frame = self.codec.seal(KIND_CHANNEL, encode_refuse(
                msg.conn, msg.ts, UNKNOWN_SESSION, msg.seq), opened.key)
            return ChannelReceiverOutput(sends=(Outgoing(peer, frame),))
        verdict = self.scmp.receive(msg.conn, msg.ts, now=now)
        if verdict is Verdict.ACCEPTED:
            self._opens += 1
            if session is not None:
                self._retire(msg.conn)  # the sender reused its id for a newer session
            while len(self._sessions) >= self.max_sessions:
                self._retire(next(iter(self._sessions)))
                self._evicted += 1
            session = _Session(peer, msg.ts, now, self.f_hold, opened.key)
            self._sessions[msg.conn] = session
            return self._segment(session, msg, now, peer, trigger)
        if verdict is Verdict.DUPLICATE:
            self._replayed += 1
            return ChannelReceiverOutput()
        reason = _REFUSALS[verdict]
        if reason == 1 and now <= self.down_until:
            reason = 3
        self._refused[_REASON_NAMES[reason]] += 1
        # Shorter than the OPEN it answers (same head; 1 byte against 29 or more).
        frame = self.codec.seal(KIND_CHANNEL, encode_refuse(msg.conn, msg.ts, reason),
                                opened.key)
        return ChannelReceiverOutput(sends=(Outgoing(peer, frame),))

    def handle_timer(self, *, now: int) -> ChannelReceiverOutput[P]:
        self._now = max(self._now, now)
        now = self._now
        self.scmp.handle_timer(now=now)
        sessions = self._sessions
        while sessions:
            conn, oldest = next(iter(sessions.items()))
            if oldest.active + self.idle > now:
                break
            self._retire(conn)
            self._expired += 1
        if self.f_hold is None:
            return ChannelReceiverOutput()
        out: list[Delivery[P]] = []
        for conn, s in sessions.items():
            if s.slotted.next_deadline() is not None:
                self._actions(conn, s, s.slotted.handle_timer(now=now), out)
        return ChannelReceiverOutput(deliveries=tuple(out))

    # -- internals ---------------------------------------------------------------

    def _segment(self, s: _Session[P], seg: Segment, now: int, peer: P,
                 trigger: int) -> ChannelReceiverOutput[P]:
        s.active = now
        self._sessions.move_to_end(seg.conn)
        reliable = seg.stamp.kind.reliable or seg.seq == 0
        seq = seg.seq
        if seg.floor > s.floor:
            s.floor = seg.floor
            # Numbers below the floor are never looked up again; pruning ``seen``
            # costs its size, so it waits until the floor has moved by half of it
            # (amortized O(1) per datagram, whatever floors a sender names).
            if s.floor - s.pruned >= max(64, len(s.seen) // 2):
                s.seen = {x for x in s.seen if x >= seg.floor}
                s.pruned = s.floor
            del s.reliable[:bisect_left(s.reliable, s.floor)]
            if s.cum < s.floor:
                s.cum = s.floor
            while s.cum in s.seen:
                s.cum += 1
        if seq < s.floor or seq in s.seen:
            self._duplicates += 1
            return ChannelReceiverOutput(
                sends=self._ack(s, seg, seq, peer, trigger) if reliable else ())
        if seq >= s.floor + MAX_WINDOW:
            self._out_of_window += 1
            return ChannelReceiverOutput()
        if (self._held_bytes >= self.max_held_bytes
                and s.held * len(self._sessions) >= self.max_held_bytes
                and (seg.stamp.slot > s.slotted.slot or seg.stamp.kind is Kind.F)):
            self._held_full += 1  # could only be held: dropped unacknowledged
            return ChannelReceiverOutput()
        s.seen.add(seq)
        if reliable:
            insort(s.reliable, seq)
        while s.cum in s.seen:
            s.cum += 1
        out: list[Delivery[P]] = []
        actions = s.slotted.receive((seq, seg.data), seg.stamp, now=now)
        self._hold(s, len(seg.data))  # counted held until an action says otherwise
        self._actions(seg.conn, s, actions, out)
        buffered = s.slotted.buffered
        if buffered > self._max_buffered:
            self._max_buffered = buffered
        sends = self._ack(s, seg, seq, peer, trigger) if reliable else ()
        return ChannelReceiverOutput(sends, tuple(out))

    def _actions(self, conn: str, s: _Session[P],
                 actions: list[Deliver[tuple[int, bytes]] | Discard[tuple[int, bytes]]],
                 out: list[Delivery[P]]) -> None:
        for act in actions:
            self._hold(s, -len(act.message[1]))
            if isinstance(act, Deliver):
                seq, data = act.message
                self._delivered[act.stamp.kind.value] += 1
                out.append(Delivery(s.peer, conn, seq, act.stamp.kind, act.stamp.slot, data,
                                    act.arrived, act.delivered))

    def _ack(self, s: _Session[P], seg: Segment, seq: int, peer: P,
             trigger: int) -> tuple[Outgoing, ...]:
        """The ACK of ``seg`` (``trigger`` bytes, from ``peer``): to ``peer``, at most
        ``AMPLIFICATION`` times ``trigger`` bytes (module docstring)."""
        cum = s.cum
        head = (HEADER_BYTES + (TAG_BYTES if s.key is not None else 0)
                + len(encode_ack(seg.conn, s.ts, cum, ())))
        fit = min(MAX_SACK, max(0, (AMPLIFICATION * trigger - head) // 8))
        own = seq > cum  # a duplicate below cum needs no selective entry
        room = fit - 1 if own else fit
        first = bisect_right(s.reliable, cum)
        sack = [x for x in s.reliable[first:first + room + 1] if x != seq][:max(0, room)]
        if own and fit:
            sack.append(seq)
        sack.sort()
        self._acks += 1
        frame = self.codec.seal(KIND_CHANNEL, encode_ack(seg.conn, s.ts, cum, tuple(sack)),
                                s.key)
        return (Outgoing(peer, frame),)

    def _hold(self, s: _Session[P], size: int) -> None:
        s.held += size
        self._held_bytes += size

    def _retire(self, conn: str) -> None:
        s = self._sessions.pop(conn)
        self._hold(s, -s.held)
        st = s.slotted.statistics()
        for reason, n in st.discarded.items():
            self._discarded[reason] = self._discarded.get(reason, 0) + n
