"""The sending end of a slotted-FIFO channel: stamps, sequence numbers, retransmission.

Theory of operation
-------------------
``ChannelSender`` is the transport layer of the slotted paper (section 6: "message
numeration at TL", retransmission of the reliable kinds) under the stamps of Fig. 3
(``SlottedSender``), opened without a handshake as section 3 of the SCMP paper
proposes for connection-based protocols:

- The caller picks the connection id ``conn`` and the opening timestamp ``ts`` (its
  clock, µs); every datagram names the session ``(conn, ts)``.
- Every send gets the next sequence number. Sequence number 0 is the OPEN: the only
  datagram the receiver passes through its SCMP receiver. It is retransmitted until
  acknowledged *whatever its kind*, because the session exists only once it is
  accepted (choice: an unreliable first send becomes reliable; pinned by
  ``tests/test_net_channel_core.py::test_open_is_retransmitted_even_if_unreliable``).
- FR and R are kept until acknowledged and retransmitted on timeout; F and N are sent
  once. The timeout follows Jacobson/Karels (``srtt + 4 rttvar``, at least
  ``min_rto``), RTT sampled only from datagrams sent once (Karn), doubled per
  retransmission up to ``max_rto``.
- ``floor`` (in every datagram) is the lowest unacknowledged reliable sequence
  number; the receiver forgets duplicates below it.
- Back-pressure: at most ``window`` sequence numbers between ``floor`` and the next
  one. ``can_send()`` says whether a send fits; ``send`` on a full window is a
  usage error (the driver waits instead). Memory is bounded by the window.
- Failure: a REFUSE of the opening (SCMP said stale, early, down or overloaded), a
  REFUSE saying the receiver no longer holds the session (``lost``: it restarted, or
  forgot the session idle or evicted; only for a segment sent after the OPEN's ACK
  came, since an earlier one may just have overtaken the OPEN), or no
  acknowledgment progress for ``give_up`` ticks while data is outstanding ends the
  channel (``failed`` names why); nothing is sent afterwards. The reliable
  datagrams not acknowledged stay listed (``unacked_ids``): the refused opening's
  never arrived; after ``lost`` or ``timeout`` each may or may not have arrived.
  ``heard`` is when the receiver last answered this session.
- Hostile input: the sender sends nothing in answer to what it receives
  (no amplification: retransmissions are driven by its timer alone), and an ACK
  acknowledging a sequence number it never sent (``cum`` above its next sequence
  number, a selective number at or above it) is counted ``malformed`` and dropped
  before it touches anything: otherwise one forged ACK with a huge ``cum`` would
  make the sender forget every outstanding reliable datagram, lost for good. Other
  fields are range-checked by ``_wire.decode``. Pinned by
  ``tests/test_net_channel_hostile.py::test_ack_of_unsent_numbers_is_dropped``.

Verbs: ``send(data, kind, *, now)``, ``receive(datagram, *, now)``,
``handle_timer(*, now)``, ``next_deadline()``, ``statistics()``.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from timebound.core.channel._wire import UNKNOWN_SESSION, Ack, Refuse, decode, encode_segment
from timebound.core.slotted import Kind, SlottedSender
from timebound.core.wire import KIND_CHANNEL, FrameCodec
from timebound.errors import MalformedDatagram, ProtocolUsageError

#: Default send window (sequence numbers in flight).
DEFAULT_WINDOW = 256
#: Largest window a receiver accepts (its duplicate-suppression memory).
MAX_WINDOW = 65536
#: Timer defaults, in ticks (µs).
DEFAULT_MIN_RTO = 20_000
DEFAULT_MAX_RTO = 1_000_000
DEFAULT_GIVE_UP = 10_000_000

_REASONS = {1: "stale", 2: "early", 3: "down", 4: "overloaded"}
#: ``failed`` when the receiver answered that it no longer holds the session.
LOST = "lost"


class _Pending:
    __slots__ = ("frame", "first", "sent", "tries", "deadline")

    def __init__(self, frame: bytes, now: int, deadline: int) -> None:
        self.frame = frame
        self.first = now
        self.sent = now
        self.tries = 1
        self.deadline = deadline


@dataclass(frozen=True, slots=True)
class SenderStatistics:
    sent: dict[str, int]
    datagrams: int
    retransmissions: int
    acks: int
    unacked: int
    in_flight: int
    srtt: int | None
    rto: int
    malformed: int
    unauthenticated: int
    failed: str | None


class ChannelSender:
    """One channel's sending end (sans-IO): data in, sealed frames out."""

    def __init__(self, conn: str, ts: int, codec: FrameCodec, *,
                 window: int = DEFAULT_WINDOW, min_rto: int = DEFAULT_MIN_RTO,
                 max_rto: int = DEFAULT_MAX_RTO, give_up: int = DEFAULT_GIVE_UP) -> None:
        if not 1 <= window <= MAX_WINDOW:
            raise ProtocolUsageError(f"window must be in [1, {MAX_WINDOW}], got {window}")
        if not 1 <= min_rto <= max_rto:
            raise ProtocolUsageError("need 1 <= min_rto <= max_rto")
        if give_up < 1:
            raise ProtocolUsageError(f"give_up must be >= 1, got {give_up}")
        self.conn = conn
        self.ts = ts
        self.codec = codec
        self.window = window
        self.min_rto = min_rto
        self.max_rto = max_rto
        self.give_up = give_up
        self.failed: str | None = None
        #: The tick of the last datagram heard from the receiver for this session
        #: (None: none yet): whether, and when, it answered.
        self.heard: int | None = None
        # The first sequence number sent after the OPEN was acknowledged (None:
        # not yet): a REFUSE of a session not held naming it or a later one means
        # the receiver lost an established session (see ``receive``).
        self._established: int | None = None
        self._stamps = SlottedSender()
        self._next = 0
        self._unacked: dict[int, _Pending] = {}
        self._timers: list[tuple[int, int]] = []  # (deadline, seq), lazily deleted
        self._srtt: int | None = None
        self._rttvar = 0
        self._progress = 0  # last tick an ack made progress (or the first send)
        self._sent = {kind.value: 0 for kind in Kind}
        self._datagrams = 0
        self._retransmissions = 0
        self._acks = 0
        self._malformed = 0

    # -- queries -----------------------------------------------------------------

    @property
    def floor(self) -> int:
        return min(self._unacked) if self._unacked else self._next

    @property
    def unacked(self) -> int:
        """Reliable datagrams sent and not yet acknowledged."""
        return len(self._unacked)

    def unacked_ids(self) -> tuple[int, ...]:
        """The sequence numbers (message ids) of the reliable datagrams sent and not
        acknowledged, in order (after a failure: what may not have arrived)."""
        return tuple(sorted(self._unacked))

    @property
    def opened(self) -> bool:
        """The receiver accepted the opening (sequence number 0 is acknowledged)."""
        return self._next > 0 and 0 not in self._unacked

    def can_send(self) -> bool:
        return self.failed is None and self._next - self.floor < self.window

    def rto(self) -> int:
        if self._srtt is None:
            return self.min_rto
        return min(self.max_rto, max(self.min_rto, self._srtt + 4 * self._rttvar))

    def next_deadline(self) -> int | None:
        if self.failed is not None or not self._unacked:
            return None
        timers = self._timers
        while timers and (timers[0][1] not in self._unacked
                          or self._unacked[timers[0][1]].deadline != timers[0][0]):
            heapq.heappop(timers)
        due = timers[0][0] if timers else None
        stop = self._progress + self.give_up
        return stop if due is None else min(due, stop)

    def statistics(self) -> SenderStatistics:
        return SenderStatistics(
            sent=dict(self._sent), datagrams=self._datagrams,
            retransmissions=self._retransmissions, acks=self._acks,
            unacked=len(self._unacked), in_flight=self._next - self.floor,
            srtt=self._srtt, rto=self.rto(),
            malformed=self.codec.malformed + self._malformed,
            unauthenticated=self.codec.unauthenticated, failed=self.failed,
        )

    # -- inputs ------------------------------------------------------------------

    def send(self, data: bytes, kind: Kind, *, now: int) -> tuple[int, bytes]:
        """Stamp and number ``data``; its sequence number and the frame to send."""
        if self.failed is not None:
            raise ProtocolUsageError(f"the channel failed: {self.failed}")
        if not self.can_send():
            raise ProtocolUsageError("send window full (wait for acknowledgments)")
        seq = self._next
        stamp = self._stamps.send(kind)
        frame = self.codec.seal(KIND_CHANNEL, encode_segment(
            self.conn, self.ts, seq, self.floor, stamp, data))
        self._next += 1
        self._sent[kind.value] += 1
        self._datagrams += 1
        if kind.reliable or seq == 0:
            if not self._unacked:
                self._progress = now
            pending = _Pending(frame, now, now + self.rto())
            self._unacked[seq] = pending
            heapq.heappush(self._timers, (pending.deadline, seq))
        return seq, frame

    def receive(self, datagram: bytes, *, now: int) -> tuple[bytes, ...]:
        """An ACK or REFUSE from the receiver. Returns nothing to send (acks need no
        answer); kept as a tuple for the verb set."""
        opened = self.codec.open(datagram, now=now)
        if opened is None:
            return ()
        if opened.kind != KIND_CHANNEL:
            self._malformed += 1
            return ()
        try:
            msg = decode(opened.body)
        except MalformedDatagram:
            self._malformed += 1
            return ()
        if msg.conn != self.conn or msg.ts != self.ts:
            return ()  # another session's (a stale ack): ignored
        self.heard = now
        if isinstance(msg, Refuse):
            if self.failed is not None:
                return ()
            if msg.reason == UNKNOWN_SESSION:
                # The segment was sent after the OPEN's ACK came, so after the
                # receiver held the session: it lost it. An earlier one may have
                # overtaken the OPEN: ignored (it is retransmitted).
                established = self._established
                if established is not None and msg.seq is not None and msg.seq >= established:
                    self.failed = LOST
            elif 0 in self._unacked:
                self.failed = _REASONS.get(msg.reason, "refused")
            return ()
        if isinstance(msg, Ack):
            if msg.cum > self._next or (msg.sack and msg.sack[-1] >= self._next):
                self._malformed += 1  # acknowledges what was never sent
                return ()
            self._ack(msg, now)
        return ()  # a segment at the sender: ignored

    def handle_timer(self, *, now: int) -> tuple[bytes, ...]:
        """Retransmit every reliable datagram whose timeout expired; give up after
        ``give_up`` ticks without progress."""
        if self.failed is not None or not self._unacked:
            return ()
        if now >= self._progress + self.give_up:
            self.failed = "timeout"
            return ()
        out: list[bytes] = []
        timers = self._timers
        while timers and timers[0][0] <= now:
            deadline, seq = heapq.heappop(timers)
            pending = self._unacked.get(seq)
            if pending is None or pending.deadline != deadline:
                continue
            pending.tries += 1
            pending.sent = now
            backoff = min(self.max_rto, self.rto() << min(pending.tries - 1, 16))
            pending.deadline = now + backoff
            heapq.heappush(timers, (pending.deadline, seq))
            self._retransmissions += 1
            self._datagrams += 1
            out.append(pending.frame)
        return tuple(out)

    # -- internals ---------------------------------------------------------------

    def _ack(self, ack: Ack, now: int) -> None:
        self._acks += 1
        unacked = self._unacked
        if not unacked:
            return
        done = [s for s in unacked if s < ack.cum]
        done.extend(s for s in ack.sack if s in unacked)
        if not done:
            return
        if self._established is None and 0 in done:
            self._established = self._next
        sample: int | None = None
        for seq in done:
            pending = unacked.pop(seq, None)
            if pending is not None and pending.tries == 1:
                rtt = now - pending.first
                sample = rtt if sample is None else min(sample, rtt)
        self._progress = now
        if sample is not None:
            if self._srtt is None:
                self._srtt, self._rttvar = sample, sample // 2
            else:
                self._rttvar = (3 * self._rttvar + abs(self._srtt - sample)) // 4
                self._srtt = (7 * self._srtt + sample) // 8
        if len(self._timers) > 4 * len(unacked) + 64:
            self._timers = [(p.deadline, s) for s, p in unacked.items()]
            heapq.heapify(self._timers)
