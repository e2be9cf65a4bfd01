"""The live RPC's client side: ``RpcCaller`` around Fig. 3-1's ``Client`` (SCMP paper,
section 3.1), still sans-IO, so that the asyncio client (``timebound.net``) holds no
protocol rule.

``Client`` decides everything about a call (its timestamp, the retransmission
schedule, truncated retransmissions once ACKed, giving up); the caller adds what a
live client needs around it, on the formats of ``_live_messages``:

- *Frames and procedures.* A call is ``proc(args)``: its CALL payload names the
  procedure and carries the call's time budget and incarnation mark, and every
  datagram is sealed in a ``KIND_RPC`` frame (``FrameCodec``). A REPLY's result
  comes back as ``Answered`` (``Status`` and data); a result without a valid status
  byte as ``Status.ERROR``.
- *Refusals.* A REFUSE for an outstanding call ends it as ``Rejected`` (the reason,
  the refusing server's incarnation and the call's mark). What a refusal means:
  *early* and *overloaded* calls were not run (an accepted timestamp is always at or
  below ``latest``, and a FULL table admits only connections above ``upper``);
  *stale* and *down* refuse this copy only: an earlier copy may have run before a
  crash or an eviction, so the outcome is unknown, exactly as for a timeout. Never
  run twice either way. Tests: ``tests/test_net_service.py``.
- *Address validation.* A CHALLENGE for an outstanding call is answered with a
  VALIDATE echoing its token and the call sent again at once (the service's "No
  amplification" rule, ``_live``).
- *Incarnation marks.* The caller remembers the incarnation id ending the last
  message it heard from its server (``RpcCaller.incarnation``) and marks each new
  call with it; a retransmission is the stored CALL, so it keeps the mark it was
  made with. Why this keeps at-most-once: "Incarnations" in ``_live``.
- *Budgets.* A caller that waits ``timeout`` for its answer sends a budget a
  little shorter (``budget_for_timeout``): ``timeout - margin`` with ``margin =
  min(timeout / DEADLINE_MARGIN_DIVISOR, DEADLINE_MARGIN_INTERVALS x interval)``
  (a tenth of the timeout, at most five first retransmission intervals: 50 ms of
  a 0.5 s timeout, 100 ms of a 2 s one with the default 20 ms interval), and at
  least 1 ms. The server never starts a call after that deadline and answers
  ``expired`` at it ("Deadlines" in ``_live``), so the margin is the time that
  answer has to reach the caller (one way across the network, and the server's
  timer firing late) before the caller's own timeout: it hears ``expired``, which
  proves the call did not run, instead of a timeout, whose outcome is unknown.
- *Read-only built-ins* (``READONLY_PADDED``: ``timebound.stats``) have their
  arguments padded to ``READONLY_ARGS_BYTES`` with zero bytes: a server answers
  such a CALL with at most 3x its bytes, validated or not ("Read-only built-ins" in
  ``_live``).
- *REPLY-ACK hints* may be deferred (``reply_ack_delay``) or left out for short
  results (``reply_ack_min_bytes``): see ``RpcCaller``.

Hot path: ``RpcCaller.receive_outcome`` is ``receive`` returning the one
``Answered`` alone when that is all a datagram brings, so a null call builds no
output record around it (``receive`` wraps it, one code path).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from timebound.core._frozen import by_constructor
from timebound.core.rpc._client import Client, ClientOutput, Completed, GaveUp, Policy
from timebound.core.rpc._live_messages import (
    _AFTER_NAME,
    _LAST_STATUS,
    _NO_BUDGET,
    _NO_MARK,
    _STATUSES,
    _TS,
    _U32,
    CHALLENGE_TYPE,
    INCARNATION_BYTES,
    MAX_BUDGET_MS,
    READONLY_ARGS_BYTES,
    READONLY_PADDED,
    REFUSE_TYPE,
    VALIDATE_TYPE,
    Reason,
    Status,
    call_mark,
    decode_challenge,
    decode_refusal,
    encode_call_payload,
)
from timebound.core.wire import KIND_RPC, FrameCodec
from timebound.errors import MalformedDatagram, ProtocolUsageError


@dataclass(frozen=True, slots=True)
class Rejected:
    """The server refused call ``(conn, ts)`` for ``reason``; ``incarnation``: the
    refusing server's, ``mark``: the call's (equal and nonzero: the call was made
    after that incarnation began)."""

    conn: str
    ts: int
    reason: Reason
    incarnation: int = 0
    mark: int = 0

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return by_constructor(self)


@dataclass(frozen=True, slots=True, init=False)
class Answered:
    """Call ``(conn, ts)`` came back with ``status`` and ``data``."""

    conn: str
    ts: int
    status: Status
    data: bytes

    def __init__(self, conn: str, ts: int, status: Status, data: bytes) -> None:
        # Written out, as ``Completed``'s: one is made per answered call.
        object.__setattr__(self, "conn", conn)
        object.__setattr__(self, "ts", ts)
        object.__setattr__(self, "status", status)
        object.__setattr__(self, "data", data)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return by_constructor(self)


LiveOutcome = Answered | Rejected | GaveUp


@dataclass(frozen=True, slots=True)
class CallerOutput:
    datagrams: tuple[bytes, ...] = ()
    outcomes: tuple[LiveOutcome, ...] = ()

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return by_constructor(self)


_NO_OUTPUT: Final = CallerOutput()

#: A call's budget is its timeout less a margin: at most a tenth of the timeout...
DEADLINE_MARGIN_DIVISOR: Final = 10
#: ... and at most this many first retransmission intervals (see "Budgets").
DEADLINE_MARGIN_INTERVALS: Final = 5


def budget_for_timeout(timeout: int, interval: int, *, ticks_per_ms: int = 1000) -> int:
    """The budget (ms, 1..``MAX_BUDGET_MS``) of a call whose caller waits ``timeout``
    ticks for it, with ``interval`` ticks its first retransmission interval: the
    timeout less ``min(timeout / 10, 5 x interval)`` (module doc, "Budgets"), so
    that the server's ``expired`` reaches the caller before its timeout."""
    if timeout < 1 or interval < 1 or ticks_per_ms < 1:
        raise ProtocolUsageError("timeout, interval and ticks_per_ms must be >= 1")
    margin = min(timeout // DEADLINE_MARGIN_DIVISOR, DEADLINE_MARGIN_INTERVALS * interval)
    return max(1, min(MAX_BUDGET_MS, (timeout - margin) // ticks_per_ms))


#: Procedure name -> its CALL payload prefix, shared by every caller (a pure
#: function's memo: a fresh caller making one call does not encode the name again).
_PROC_PREFIXES: Final[dict[str, bytes]] = {}
_MAX_PROC_PREFIXES: Final = 1024


class RpcCaller:
    """A live at-most-once RPC client over ``Client``: frames, procedures, refusals.

    One caller talks to one server over any number of connections (``conn`` ids of
    at most ``MAX_CONN_BYTES`` UTF-8 bytes), each with at most one outstanding call.

    ``reply_ack_delay`` (ticks; 0: at once): the REPLY-ACK hint of a completed call is
    sent only if no new call on its connection comes within the delay; a new call
    makes it unnecessary (Fig. 3-1: a NEW call discards the stored reply), so a
    client calling in sequence sends two datagrams per call, as plain UDP does.
    Deferred hints fall due in the order their replies came (a hint sent a little
    early or late is harmless), so the next one due is always the oldest: O(1).

    ``reply_ack_min_bytes`` (0: every reply): no REPLY-ACK at all for a reply whose
    result (status byte included) is shorter (``Client``'s option: the hint only
    lets the server drop the stored reply before GC drops it with the entry). The
    server then keeps the entry REPLYING until GC; at-most-once is unchanged.
    """

    def __init__(self, name: str, policy: Policy, codec: FrameCodec, *,
                 reply_ack_delay: int = 0, reply_ack_min_bytes: int = 0) -> None:
        if reply_ack_delay < 0:
            raise ProtocolUsageError(f"reply_ack_delay must be >= 0, got {reply_ack_delay}")
        if reply_ack_min_bytes < 0:
            raise ProtocolUsageError(
                f"reply_ack_min_bytes must be >= 0, got {reply_ack_min_bytes}")

        self.client = Client(name, policy, reply_ack_min_bytes=reply_ack_min_bytes)
        self.codec = codec
        # The incarnation of the server this caller last heard from (0: none yet),
        # packed: every new call is marked with it (``incarnation``).
        self._mark = _NO_MARK
        self.reply_ack_delay = reply_ack_delay
        self.rejected = 0
        self.challenges = 0
        self.reply_acks_saved = 0
        self._malformed = 0
        # conn -> (due, REPLY-ACK message, sealed when sent); insertion order = due order.
        self._acks: dict[str, tuple[int, bytes]] = {}
        self._procs = _PROC_PREFIXES  # proc -> its payload prefix (bounded, shared)

    @property
    def incarnation(self) -> int:
        """The incarnation of the server this caller last heard from (0: none yet);
        every new call is marked with it."""
        return int(_TS.unpack(self._mark)[0])

    def next_deadline(self) -> int | None:
        deadline = self.client.next_deadline()
        if self._acks:
            for due, _ in self._acks.values():  # the oldest is the first due
                if deadline is None or due < deadline:
                    deadline = due
                break
        return deadline

    def budget_ms(self, timeout: int) -> int:
        """The budget of a call whose caller waits ``timeout`` ticks (microseconds,
        the live RPC's ticks) for it: ``budget_for_timeout`` with this caller's first
        retransmission interval."""
        return budget_for_timeout(timeout, self.client.policy.interval)

    def flush_reply_acks(self) -> tuple[bytes, ...]:
        """Every deferred REPLY-ACK, now (the client is closing)."""
        if not self._acks:
            return ()
        seal = self.codec.seal
        frames = tuple(seal(KIND_RPC, message) for _, message in self._acks.values())
        self._acks.clear()
        return frames

    def call(self, proc: str, args: bytes, *, now: int, conn: str,
             budget_ms: int = 0) -> tuple[int, tuple[bytes, ...]]:
        """Start ``proc(args)`` on ``conn``: its timestamp and the frames to send.
        ``budget_ms`` (0: none): the server does not start the call once ``ts +
        budget_ms`` has passed by its clock (it answers ``expired``); ``budget_ms``
        gives it for a caller's timeout ("Budgets" in the module doc)."""
        acks = self._acks
        if acks and acks.pop(conn, None) is not None:
            self.reply_acks_saved += 1  # the new call tells the server (Fig. 3-1)
        prefix = self._procs.get(proc)
        if prefix is None:
            prefix = encode_call_payload(proc, b"")[:-_AFTER_NAME]  # name only: budget, mark follow
            if len(self._procs) < _MAX_PROC_PREFIXES:
                self._procs[proc] = prefix
        mark = self._mark
        if proc in READONLY_PADDED and len(args) < READONLY_ARGS_BYTES:
            args += bytes(READONLY_ARGS_BYTES - len(args))  # its answer fits 3x the CALL
        if budget_ms:
            if not 0 < budget_ms <= MAX_BUDGET_MS:
                raise ProtocolUsageError(
                    f"budget_ms must be in [0, {MAX_BUDGET_MS}], got {budget_ms}")
            payload = prefix + _U32.pack(budget_ms) + mark + args
        else:
            payload = prefix + _NO_BUDGET + mark + args
        ts, datagram = self.client.start(payload, now=now, conn=conn)  # checks conn
        return ts, (self.codec.seal(KIND_RPC, datagram),)

    def abandon(self, conn: str) -> None:
        """Forget the outstanding call on ``conn`` (its caller stopped waiting)."""
        self.client.abandon(conn)

    def receive(self, datagram: bytes, *, now: int) -> CallerOutput:
        out = self.receive_outcome(datagram, now=now)
        if type(out) is Answered:
            return CallerOutput((), (out,))
        return out  # type: ignore[return-value]

    def receive_outcome(self, datagram: bytes, *, now: int) -> CallerOutput | Answered:
        """``receive``, except that an answer that is all there is comes alone, not
        in a ``CallerOutput`` (the driver's hot path). A lone answer sends nothing and
        sets no new deadline (it defers no REPLY-ACK): ``next_deadline()`` can only
        have moved later."""
        opened = self.codec.open(datagram, now=now)
        if opened is None:
            return _NO_OUTPUT
        kind, message, _key = opened
        size = len(message)
        if kind != KIND_RPC or size <= INCARNATION_BYTES:
            self._malformed += 1
            return _NO_OUTPUT
        mark = message[size - INCARNATION_BYTES:]
        if mark != self._mark:
            self._mark = mark  # new calls are marked with it
        message = message[:size - INCARNATION_BYTES]
        first = message[0]
        if first == REFUSE_TYPE:
            return self._refusal(message, int(_TS.unpack(mark)[0]))
        if first == CHALLENGE_TYPE:
            return self._challenged(message)
        out = self.client.receive_outcome(message, now=now)
        if type(out) is Completed:  # a reply that needs no REPLY-ACK: the common case
            r = out.result
            if r and r[0] <= _LAST_STATUS:
                return Answered(out.conn, out.ts, _STATUSES[r[0]], r[1:])
            return CallerOutput((), self._outcomes((out,)))
        assert isinstance(out, ClientOutput)
        outcomes = out.outcomes
        datagrams = out.datagrams
        if not outcomes and not datagrams:
            return _NO_OUTPUT
        if not datagrams:
            return CallerOutput((), self._outcomes(outcomes))
        if self.reply_ack_delay and len(outcomes) == 1 and len(datagrams) == 1:
            # The REPLY-ACK of a completed call waits: a next call on the connection
            # makes it unnecessary (a new CALL discards the stored reply).
            conn = outcomes[0].conn
            self._acks.pop(conn, None)  # keep insertion order = due order
            self._acks[conn] = (now + self.reply_ack_delay, datagrams[0])
            return CallerOutput((), self._outcomes(outcomes))
        return CallerOutput(self._seal(datagrams), self._outcomes(outcomes))

    def handle_timer(self, *, now: int) -> CallerOutput:
        out = self.client.handle_timer(now=now)
        frames = self._seal(out.datagrams) if out.datagrams else ()
        acks = self._acks
        if acks:
            due = []
            for conn, (at, _) in acks.items():
                if at > now:
                    break
                due.append(conn)
            if due:
                seal = self.codec.seal
                frames += tuple(seal(KIND_RPC, acks.pop(conn)[1]) for conn in due)
        if not frames and not out.outcomes:
            return _NO_OUTPUT
        return CallerOutput(frames, self._outcomes(out.outcomes) if out.outcomes else ())

    @property
    def malformed(self) -> int:
        return self.codec.malformed + self._malformed + self.client.statistics().malformed

    def _refusal(self, message: bytes, incarnation: int) -> CallerOutput:
        try:
            conn, ts, reason = decode_refusal(message)
        except MalformedDatagram:
            self._malformed += 1
            return _NO_OUTPUT
        payload = self.client.payload_of(conn, ts)
        if payload is None:
            return _NO_OUTPUT
        self.client.abandon(conn, ts)
        self.rejected += 1
        return CallerOutput(outcomes=(Rejected(conn, ts, reason, incarnation,
                                               call_mark(payload)),))

    def _challenged(self, message: bytes) -> CallerOutput:
        """A CHALLENGE for an outstanding call: echo its token (VALIDATE) and send
        the call again at once (the server answers it once the address is valid)."""
        try:
            conn, ts, _token = decode_challenge(message)
        except MalformedDatagram:
            self._malformed += 1
            return _NO_OUTPUT
        again = self.client.resend(conn, ts)
        if again is None:
            return _NO_OUTPUT
        self.challenges += 1
        seal = self.codec.seal
        return CallerOutput((seal(KIND_RPC, bytes((VALIDATE_TYPE,)) + message[1:]),
                             seal(KIND_RPC, again)))

    def _seal(self, datagrams: tuple[bytes, ...]) -> tuple[bytes, ...]:
        seal = self.codec.seal
        return tuple(seal(KIND_RPC, d) for d in datagrams)

    def _outcomes(self, outcomes: tuple[Completed | GaveUp, ...]) -> tuple[LiveOutcome, ...]:
        if len(outcomes) == 1:
            o = outcomes[0]
            if type(o) is Completed:
                r = o.result
                if r and r[0] <= _LAST_STATUS:
                    return (Answered(o.conn, o.ts, _STATUSES[r[0]], r[1:]),)
        result: list[LiveOutcome] = []
        for o in outcomes:
            if isinstance(o, Completed):
                r = o.result
                if r and r[0] <= _LAST_STATUS:
                    result.append(Answered(o.conn, o.ts, _STATUSES[r[0]], r[1:]))
                else:
                    result.append(Answered(o.conn, o.ts, Status.ERROR,
                                           b"malformed reply result"))
            else:
                result.append(o)
        return tuple(result)
