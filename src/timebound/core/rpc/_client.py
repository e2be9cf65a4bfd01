"""The at-most-once RPC client: SCMP paper, section 3.1.

Theory of operation
-------------------
"The client makes an RPC by sending a CALL message to the server ... To ensure
reliability, clients retransmit CALL messages on a periodic basis; the server responds
with an ACK message if it receives a duplicate call. (If the client learns from such
an ack that the server has received the CALL message, subsequent retransmissions send
a truncated message that contains only the connection and call ids.) If several
retransmissions have occurred without a response from the server, the client times
out the call." and "the client may optionally send a REPLY-ACK message as a hint".

A call is identified by ``(conn, ts)``. The caller supplies the connection id (or
the client's default one) and its clock reading ``now``; the call's timestamp is
``now``, except that **timestamps never go backwards on a connection**: if the caller's
clock stepped back (or did not move) since the last call on that connection, the call
gets ``last ts + 1``. Each connection has at most one outstanding call (section 2.2:
concurrent calls use distinct connections).

Schedule (all absolute times, in the caller's ticks; ``Policy``): the call is sent at
``t0``; retransmissions are due at ``t0 + i1``, then ``+ i2``, ... where ``i1 =
interval`` and ``i(k+1) = min(ik * backoff, max_interval)``; once an ACK arrives the
retransmissions carry no payload. The call gives up at ``heard + give_up_after``,
where ``heard`` is ``t0`` or the time of the last ACK; a retransmission due at the
give-up time is not sent. ``next_deadline()`` is the earliest due time;
``handle_timer(now=)`` performs everything due by ``now`` (a late timer sends one
retransmission and keeps the absolute schedule, skipping the slots it missed).

Choices where the paper leaves room
-----------------------------------
- *An ACK postpones giving up* (it is "a response from the server"): a long
  computation is not timed out while the server keeps ACKing the probes. It does not
  change the retransmission interval. Test: ``tests/test_rpc_client.py::
  test_ack_truncates_and_postpones_give_up``.
- *Every REPLY is answered with a REPLY-ACK*, also a repeated reply or one for a call
  already finished or abandoned: a repeat means the server did not get the first
  REPLY-ACK, and the server ignores a REPLY-ACK that does not match its entry.
  Except, with ``reply_ack_min_bytes`` (default 0: none), a reply shorter than that
  gets no REPLY-ACK: the hint only lets the server drop the stored reply before GC
  drops it with the entry, and for a short reply the datagram costs more than the
  bytes it frees ("only these two messages are needed", section 3.1).
- ACKs and REPLYs for calls that are not outstanding change nothing else; malformed
  datagrams and CALL/REPLY-ACK messages are counted and dropped.
- The give-up outcome says whether the server had ACKed the call (``acked``): an
  unacked give-up may still have run once, an acked one probably did or will.

Hot path: a connection's id is checked and encoded once (its message header is
kept); datagrams are read with ``_messages.parse`` and written with
``_messages.frame``, without message objects. ``receive_outcome`` is ``receive``
returning a lone ``Completed`` when that is all there is (the live caller's hot
path: no ``ClientOutput`` around it).

Verbs (aioquic's): ``call(payload, *, now, conn=None)`` (``start``: the same
without the ``Calling`` record), ``receive(datagram, *,
now)``, ``handle_timer(*, now)``, ``next_deadline()``, ``statistics()``; and
``abandon(conn, ts=None)`` for a layer above that learnt a call's fate another way
(its caller stopped waiting, or the server refused it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from timebound.core._frozen import by_constructor
from timebound.core.rpc._messages import (
    ACK_TYPE,
    CALL_TYPE,
    MAX_BODY_BYTES,
    MAX_TS,
    REPLY_ACK_TYPE,
    REPLY_TYPE,
    TRUNCATED_TYPE,
    frame,
    head,
    parse,
)
from timebound.errors import MalformedDatagram, ProtocolUsageError


@dataclass(frozen=True, slots=True)
class Policy:
    """Retransmission schedule and give-up bound, in ticks."""

    interval: int
    give_up_after: int
    backoff: int = 1
    max_interval: int | None = None

    def __post_init__(self) -> None:
        if self.interval < 1:
            raise ProtocolUsageError(f"interval must be >= 1, got {self.interval}")
        if self.give_up_after < 1:
            raise ProtocolUsageError(f"give_up_after must be >= 1, got {self.give_up_after}")
        if self.backoff < 1:
            raise ProtocolUsageError(f"backoff must be >= 1, got {self.backoff}")
        if self.max_interval is not None and self.max_interval < self.interval:
            raise ProtocolUsageError("max_interval must be >= interval")

    def after(self, interval: int) -> int:
        grown = interval * self.backoff
        return grown if self.max_interval is None else min(grown, self.max_interval)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return by_constructor(self)


@dataclass(frozen=True, slots=True)
class CallId:
    conn: str
    ts: int

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return by_constructor(self)


@dataclass(frozen=True, slots=True, init=False)
class Completed:
    """Call ``(conn, ts)`` returned ``result``."""

    conn: str
    ts: int
    result: bytes

    def __init__(self, conn: str, ts: int, result: bytes) -> None:
        # Written out (``init=False``): compiled, it stores the fields natively, about
        # 30 ns where the dataclass's generated ``__init__`` runs interpreted (0.45 µs);
        # one is made per completed call.
        object.__setattr__(self, "conn", conn)
        object.__setattr__(self, "ts", ts)
        object.__setattr__(self, "result", result)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return by_constructor(self)


@dataclass(frozen=True, slots=True)
class GaveUp:
    """Call ``(conn, ts)`` timed out; ``acked``: the server had said it was computing."""

    conn: str
    ts: int
    acked: bool

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return by_constructor(self)


Outcome = Completed | GaveUp


@dataclass(frozen=True, slots=True)
class Calling:
    """What ``Client.call`` returns: the new call's id and the datagram to send."""

    id: CallId
    datagrams: tuple[bytes, ...]

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return by_constructor(self)


@dataclass(frozen=True, slots=True)
class ClientOutput:
    """Datagrams to send to the server and outcomes of finished calls."""

    datagrams: tuple[bytes, ...] = ()
    outcomes: tuple[Outcome, ...] = ()

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return by_constructor(self)


@dataclass(frozen=True, slots=True)
class ClientStatistics:
    outstanding: int
    calls: int
    completed: int
    gave_up: int
    retransmissions: int
    truncated: int
    clock_bumps: int
    ignored: int
    malformed: int

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return by_constructor(self)


class _Pending:
    __slots__ = ("ts", "payload", "acked", "next_send", "interval", "give_up_at")

    def __init__(self, ts: int, payload: bytes, now: int, policy: Policy) -> None:
        self.ts = ts
        self.payload = payload
        self.acked = False
        self.interval = policy.interval
        self.next_send = now + policy.interval
        self.give_up_at = now + policy.give_up_after

    def due(self) -> int:
        return min(self.next_send, self.give_up_at)


_NOTHING: Final = ClientOutput()
#: A new client's counters (copied: a fresh client is built per call in the paper's
#: Fig. 3-3, and a copy is cheaper than building the dict).
_ZERO_COUNTS: Final = dict.fromkeys(
    ("gave_up", "retransmissions", "truncated", "clock_bumps", "ignored", "malformed"), 0)


class Client:
    """One RPC client talking to one server over any number of connections."""

    def __init__(self, name: str, policy: Policy, *, reply_ack_min_bytes: int = 0) -> None:
        if not name:
            raise ProtocolUsageError("client name (default connection id) must not be empty")
        if reply_ack_min_bytes < 0:
            raise ProtocolUsageError(
                f"reply_ack_min_bytes must be >= 0, got {reply_ack_min_bytes}")
        self.name = name
        self.policy = policy
        self.reply_ack_min_bytes = reply_ack_min_bytes
        self._pending: dict[str, _Pending] = {}
        self._last_ts: dict[str, int] = {}
        self._heads: dict[str, bytes] = {}  # conn -> CALL header (type, length, id)
        self._calls = self._completed = 0
        self._counts = _ZERO_COUNTS.copy()

    # -- queries -------------------------------------------------------------

    def outstanding(self) -> tuple[CallId, ...]:
        return tuple(CallId(conn, p.ts) for conn, p in self._pending.items())

    def next_deadline(self) -> int | None:
        """The earliest retransmission or give-up time, or None when idle."""
        pending = self._pending
        if not pending:
            return None
        if len(pending) == 1:
            for p in pending.values():
                return min(p.next_send, p.give_up_at)  # p.due(), inlined
        return min(p.due() for p in pending.values())

    def statistics(self) -> ClientStatistics:
        return ClientStatistics(outstanding=len(self._pending), calls=self._calls,
                                completed=self._completed, **self._counts)

    # -- inputs --------------------------------------------------------------

    def call(self, payload: bytes, *, now: int, conn: str | None = None) -> Calling:
        """Start a call on ``conn`` (default: the client's name) at client time ``now``.

        The call's timestamp is ``now``, bumped to the connection's last timestamp + 1
        if the caller's clock went backwards or stood still: timestamps on a connection
        strictly increase whatever the clock does, so ``(conn, ts)`` is unique and a
        new call is never mistaken by the server for a duplicate of an older one.
        """
        conn = self.name if conn is None else conn
        ts, datagram = self.start(payload, now=now, conn=conn)
        return Calling(CallId(conn, ts), (datagram,))

    def start(self, payload: bytes, *, now: int, conn: str) -> tuple[int, bytes]:
        """``call`` without its record: the call's timestamp and its CALL datagram."""
        if conn in self._pending:
            raise ProtocolUsageError(f"connection {conn!r} already has an outstanding call")
        heads = self._heads
        prefix = heads.get(conn)
        if prefix is None:
            prefix = head(CALL_TYPE, conn)  # validates conn
            last = 0
        else:
            last = self._last_ts[conn]
        ts = now if now > last and now >= 1 else max(now, last + 1, 1)
        if ts > MAX_TS:
            raise ProtocolUsageError(f"timestamp must be in [1, 2**64), got {ts}")
        if len(payload) > MAX_BODY_BYTES:
            raise ProtocolUsageError(f"body longer than {MAX_BODY_BYTES} bytes")
        if ts != now:
            self._counts["clock_bumps"] += 1
        if last == 0:
            heads[conn] = prefix  # the connection's first call (ts >= 1 from then on)
        self._last_ts[conn] = ts
        self._pending[conn] = _Pending(ts, payload, now, self.policy)
        self._calls += 1
        return ts, frame(prefix, ts, payload)

    def abandon(self, conn: str, ts: int | None = None) -> bool:
        """Forget the outstanding call on ``conn`` (only if its timestamp is ``ts``,
        when given): no more retransmissions, no outcome. Whether there was one."""
        pending = self._pending.get(conn)
        if pending is None or (ts is not None and pending.ts != ts):
            return False
        del self._pending[conn]
        return True

    def payload_of(self, conn: str, ts: int) -> bytes | None:
        """The payload of outstanding call ``(conn, ts)``; None if it is not outstanding."""
        p = self._pending.get(conn)
        return None if p is None or p.ts != ts else p.payload

    def resend(self, conn: str, ts: int) -> bytes | None:
        """The message the client would retransmit now for call ``(conn, ts)`` (the
        full CALL, or the truncated one once ACKed), without touching its schedule;
        None if that call is not outstanding. The live caller sends it at once after
        answering a server's address-validation challenge (``_live``)."""
        p = self._pending.get(conn)
        if p is None or p.ts != ts:
            return None
        prefix = self._heads[conn]
        self._counts["retransmissions"] += 1
        if p.acked:
            self._counts["truncated"] += 1
            return frame(bytes((TRUNCATED_TYPE,)) + prefix[1:], p.ts)
        return frame(prefix, p.ts, p.payload)

    def receive(self, datagram: bytes, *, now: int) -> ClientOutput:
        """A datagram from the server arrived at client time ``now``."""
        out = self.receive_outcome(datagram, now=now)
        if type(out) is Completed:
            return ClientOutput((), (out,))
        return out  # type: ignore[return-value]

    def receive_outcome(self, datagram: bytes, *, now: int) -> ClientOutput | Completed:
        """``receive``, except that a completed call with no datagram to send comes
        alone, not in a ``ClientOutput`` (the live caller's hot path)."""
        try:
            kind, conn, ts, body = parse(datagram)
        except MalformedDatagram:
            self._counts["malformed"] += 1
            return _NOTHING
        if kind == REPLY_TYPE:
            assert body is not None
            if len(body) < self.reply_ack_min_bytes:
                # Not worth a REPLY-ACK (see the module doc).
                pending = self._pending.get(conn)
                if pending is None or pending.ts != ts:
                    self._counts["ignored"] += 1
                    return _NOTHING
                del self._pending[conn]
                self._completed += 1
                return Completed(conn, ts, body)
            prefix = self._heads.get(conn)
            if prefix is None:
                prefix = head(REPLY_ACK_TYPE, conn)
            else:
                prefix = bytes((REPLY_ACK_TYPE,)) + prefix[1:]
            ack = (frame(prefix, ts),)
            pending = self._pending.get(conn)
            if pending is None or pending.ts != ts:
                self._counts["ignored"] += 1
                return ClientOutput(ack)
            del self._pending[conn]
            self._completed += 1
            return ClientOutput(ack, (Completed(conn, ts, body),))
        if kind == ACK_TYPE:
            pending = self._pending.get(conn)
            if pending is None or pending.ts != ts:
                self._counts["ignored"] += 1
                return _NOTHING
            pending.acked = True
            pending.give_up_at = max(pending.give_up_at, now + self.policy.give_up_after)
            return _NOTHING
        self._counts["ignored"] += 1  # CALL and REPLY-ACK go to servers
        return _NOTHING

    def handle_timer(self, *, now: int) -> ClientOutput:
        """Retransmit what is due by ``now`` and give up on calls out of time."""
        datagrams: list[bytes] = []
        outcomes: list[Outcome] = []
        for conn, p in list(self._pending.items()):
            if p.due() > now:
                continue
            if now >= p.give_up_at:
                del self._pending[conn]
                self._counts["gave_up"] += 1
                outcomes.append(GaveUp(conn, p.ts, p.acked))
                continue
            prefix = self._heads[conn]
            if p.acked:
                datagrams.append(frame(bytes((TRUNCATED_TYPE,)) + prefix[1:], p.ts))
            else:
                datagrams.append(frame(prefix, p.ts, p.payload))
            self._counts["retransmissions"] += 1
            self._counts["truncated"] += p.acked
            while p.next_send <= now:
                p.interval = self.policy.after(p.interval)
                p.next_send += p.interval
        if not datagrams and not outcomes:
            return _NOTHING
        return ClientOutput(tuple(datagrams), tuple(outcomes))
