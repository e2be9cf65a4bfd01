"""The RPC of section 3.1 on a real network, server side: the live service
(``RpcService``) around Fig. 3-1's ``Server``: procedures, refusals, deadlines, keys.

Theory of operation
-------------------
``Server`` (Fig. 3-1) decides everything about a call; this module adds what a live
service needs around it, still sans-IO, so that the asyncio driver
(``timebound.net``) holds no protocol rule. The messages and payload formats are
``_live_messages``'s (frames of kind ``KIND_RPC``; CALL payloads ``proc_len proc
budget_ms:u32 mark:u64 args``; REPLY results ``status:u8 data``; REFUSE, CHALLENGE,
VALIDATE); the client side is ``_caller``'s ``RpcCaller``.

- *Procedures.* A CALL names a procedure; the driver runs it (``Invocation``) and
  completes it with a ``Status`` and data. A CALL whose payload does not parse is
  malformed and dropped *before* SCMP sees it, so it never takes an at-most-once slot.
- *Refusals* (the paper's server stays silent; a live client is better told why).
  A CALL the SCMP receiver refuses is answered with REFUSE: STALE -> stale, EARLY ->
  early, DOWN and RECOVERING -> down, FULL -> overloaded. A STALE refusal while the
  server's clock has not yet passed the ``upper`` it recovered from stable storage
  is reported as *down*: the server restarted and cannot tell whether that call ran
  before the crash (calls stamped after the recovered bound, i.e. about restart +
  beta, are accepted). A truncated CALL (a probe) for a call the server no longer
  holds is refused the same way. Choice: duplicates of IDLE entries and late copies
  of older calls stay unanswered, as in Fig. 3-1. The core ``Server`` decides what
  is refused and calls its public ``on_refused`` hook; ``RpcService._refuse`` only
  names the reason and writes the REFUSE. Frames are sealed through the server's
  ``wrap`` hook.
- *Receivers.* ``build_receiver`` (``core.atmostonce``) makes the server's receiver from a
  ``ReceiverConfig`` (recovery grace, reorder window) with K hash classes, one
  storage per class, and a table capacity per class.
- *Keys.* ``RpcService`` answers each request with the key that authenticated it
  (remembered per peer only while it is the previous key of a rotation), so clients
  still on the previous key read their replies during the grace period.
- *Deadlines, checked at start.* A CALL's payload carries its caller's time budget
  (``budget_ms``; 0: none): the deadline is ``ts + budget_ms`` on the caller's clock
  (``start_deadline``: the last tick at which the call may start). A call is *never
  started* after its deadline by the server's clock: one the SCMP receiver accepts
  after it is completed at once with status 3 (``expired``); one the driver could
  not start at once (every worker busy) is checked again when a worker is free to
  run it, and the driver answers it at its deadline while it still waits
  (``expire_if_late``: None, the call may start now; else it was completed
  ``expired`` and must never run). Either way it holds its at-most-once slot like
  any accepted call (a later copy is a duplicate and gets the same answer, or is
  refused by ``upper``). A call the server no longer holds (superseded by a newer
  call on its connection, lost in a crash) is not started either: nobody waits
  for it and its completion would be ignored. Clock skew bounds the error: with
  clocks within epsilon of each other a call can start at most epsilon after its
  caller's deadline (or be refused at most epsilon early); the caller's deadline
  is a little before its own timeout (``_caller``), so the ``expired`` answer
  reaches it in time. The driver holds the clock, so "start" is when it asks:
  the hand-off to a worker thread that follows takes microseconds. Tests:
  ``tests/test_rpc_hostile.py``, ``tests/test_rpc_deadline_start.py``.
- *Overload.* A driver with no room to queue an accepted call (its bounded queue
  for busy workers is full) refuses it with ``overloaded``: a REFUSE with reason 4
  (``overloaded``), the reason a full table gives, since it says the same to the
  caller (not run, try later); not a new REPLY status, which a REPLY carries as a
  call's result and which clients that do not know it would read as a malformed
  result. The call is completed without running (status 3,
  ``expired``, stored: a later copy is a duplicate answered "did not run", never
  run), so it keeps at-most-once and frees its slot as any completed call does.
  A REFUSE is shorter than the CALL it answers, so it obeys the amplification
  rule below.
- *No amplification* (RFC 9000 section 8's rule). To an address that has not
  proved it receives our datagrams, the service never sends more than
  ``AMPLIFICATION`` (3) times the bytes of the datagram it answers: every answer is
  checked against the size of the frame that caused it (the CALL for a
  completion's REPLY). An answer over the budget is replaced by a CHALLENGE (type
  7) carrying a token, ``issued:u64 mac:16`` with ``mac = HMAC-SHA256(secret,
  issued || repr(address))[:16]`` (``secret``: the driver's random bytes; this core
  has no randomness). The client echoes it in a VALIDATE (type 8) from the same
  address and retransmits its call; a VALIDATE whose token is this server's, for
  that very address, issued at most ``token_lifetime`` ago, marks the address
  validated for ``validated_for`` (at most ``max_validated`` addresses, the oldest
  forgotten first). A CHALLENGE (incarnation included) is at most 3x the probe it
  answers for connection ids of 2 bytes or more; one that would exceed its budget
  is not sent (``_challenge``), so the rule holds for it too. Proof
  sketch: every datagram sent to an unvalidated address answers exactly one
  datagram received from it and is at most 3x that datagram, so the sums obey the
  same bound. Test: ``tests/test_rpc_hostile.py::test_amplification_*``.
- *Incarnations* (beyond the paper: a restart without an outage). A service has an
  incarnation id (``incarnation``: the driver draws 64 random bits at each start;
  0: none, marks off), and every message it sends ends with it (``incarnation:u64``
  after the message, inside the frame: ACK, REPLY, REFUSE, CHALLENGE alike). A
  caller remembers the last id it heard (``RpcCaller.incarnation``) and *marks* each
  new call with it: the CALL payload is ``proc_len proc budget_ms:u32 mark:u64
  args`` (0: unmarked). A retransmission is the stored CALL, so it keeps the mark it
  was made with. A CALL whose mark is this incarnation's id is decided with the
  receiver's marked rule (``Receiver.receive(..., marked=True)``: an unknown
  connection against ``upper_marked``, not the ``upper`` recovered from storage,
  invariant (M) in ``core/atmostonce/_receiver.py``). Why no call runs twice: a
  caller knows the id only from a message this incarnation sent, so a call marked
  with it was made after this incarnation began, after every earlier incarnation
  had died, and none of them saw it; inside this incarnation, (M) refuses every
  copy after the first, exactly as ``upper`` does for unmarked calls. Two things
  keep "this incarnation's id" true: a new id at every restart (``restart`` refuses
  the old one; random 64-bit ids, so a restart without storage cannot reuse one),
  and marks count only in the server epoch the id was given for (after ``crash``
  and until ``restart``, every CALL is unmarked). A mark of another incarnation, a
  forged one, or a frame of an older incarnation re-sent by an attacker is simply
  not this incarnation's mark: the paper's rule decides it. Without a key anyone can
  forge a CALL, marked or not, so marks give an attacker nothing new; with a key the
  mark is under the tag. Effect: after a restart the calls refused are those in
  flight at the crash and those made before the caller heard from the new
  incarnation (its first answer, often a ``down`` refusal, carries the id); the next
  call runs. A refused marked call is reported ``stale``, not ``down`` (this
  incarnation saw an earlier copy of it). Tests: ``tests/test_rpc_incarnation.py``
  (properties; each rule broken in turn makes a call run twice),
  ``tests/test_net_faults.py::test_sigkill_crash_and_restart_from_storage``.
- *Read-only built-ins* (``readonly``: ``timebound.stats``) are answered from the
  CALL alone, without an at-most-once entry: they are idempotent, so a server whose
  table is full or whose disk fails still answers them, and a flood of them takes
  no table space. Having no entry, such a CALL can be replayed or forged any number
  of times, so validation never lifts the 3x rule for it: its answer is at most
  ``AMPLIFICATION`` times the CALL, *validated or not* (a validated address proves
  it receives, not that the datagrams from it are its own). Callers pad the CALL's
  arguments to ``READONLY_ARGS_BYTES`` (``RpcCaller.call``; the counters' JSON is at
  most 3x that, with every counter at its largest: pinned by a test); a CALL too
  short for its answer gets a short ``Status.ERROR`` REPLY saying so, or nothing if
  even that exceeds 3x (counted ``withheld``). Test:
  ``tests/test_rpc_resend_cap.py``.

What a refusal means to the caller: see ``_caller``.

Hot path: ``RpcService.receive_run``/``complete_reply`` are ``receive``/``complete``
returning the one ``Invocation`` or REPLY alone when that is all a datagram brings,
so a null call builds no output record around it (``receive`` and ``complete`` wrap
them, one code path).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Hashable, Mapping
from typing import Final, Generic, TypeVar

from timebound.core.atmostonce import (
    ClassifiedReceiver,
    Estimator,
    ReceiverStatistics,
    Resilience,
    Verdict,
)
from timebound.core.rpc._live_messages import (
    _AFTER_NAME,
    _STATUS_BYTES,
    _TS,
    _U32,
    CHALLENGE_TYPE,
    MAX_INCARNATION,
    READONLY_ARGS_BYTES,
    TOKEN_BYTES,
    VALIDATE_TYPE,
    Reason,
    Status,
    _call_procedure,
    decode_challenge,
    encode_refusal,
    token_message,
)
from timebound.core.rpc._messages import CALL_TYPE, REPLY_TYPE, TRUNCATED_TYPE

# The records live in _records (written out by hand, not generic: see there);
# imported as themselves, they are still importable from here.
from timebound.core.rpc._records import Invocation as Invocation
from timebound.core.rpc._records import Outgoing, StartCall
from timebound.core.rpc._records import ServiceOutput as ServiceOutput
from timebound.core.rpc._records import ServiceStatistics as ServiceStatistics
from timebound.core.rpc._server import AnyReceiver, Server
from timebound.core.wire import HEADER_BYTES, KIND_RPC, TAG_BYTES, FrameCodec, Key
from timebound.errors import MalformedDatagram, ProtocolUsageError

P = TypeVar("P", bound=Hashable)

#: Most bytes sent to an unvalidated address per byte received from it.
AMPLIFICATION: Final = 3
#: Defaults (ticks: microseconds, as the live RPC's timestamps).
TOKEN_LIFETIME: Final = 30_000_000
VALIDATED_FOR: Final = 600_000_000
MAX_VALIDATED: Final = 65_536
#: Least time between two sends of a stored reply to copies of its call (ms).
RESEND_PACE_MS: Final = 10

_REASONS: Final[dict[Verdict, Reason]] = {
    Verdict.STALE: Reason.STALE,
    Verdict.EARLY: Reason.EARLY,
    Verdict.DOWN: Reason.DOWN,
    Verdict.RECOVERING: Reason.DOWN,
    Verdict.FULL: Reason.OVERLOADED,
}


def _padding_needed(proc: str) -> bytes:
    """The error a read-only built-in's CALL too short for its answer gets."""
    return f"{proc}: pad the CALL's arguments to {READONLY_ARGS_BYTES} bytes".encode()


class RpcService(Generic[P]):
    """A live at-most-once RPC server: frames in, frames and procedures out.

    The keyword options are ``Server``'s (``rho`` or ``estimator``, ``kappa``,
    ``gc_every``, ``resilience``, ``capacity``, ``high_water``, ``start``, or a ready
    ``receiver``: a ``Receiver`` or a ``ClassifiedReceiver``). Refusals go through
    the server's ``on_refused`` extension point.

    ``secret``: the key of address-validation tokens (the driver's random bytes);
    ``readonly``: procedures answered from the CALL alone, by calling the function
    (no at-most-once entry); ``token_lifetime``, ``validated_for`` (ticks) and
    ``max_validated``: see "No amplification" in the module doc; ``ticks_per_ms``
    converts a CALL's budget.
    """

    def __init__(
        self,
        codec: FrameCodec,
        *,
        rho: int | None = None,
        kappa: int = 0,
        estimator: Estimator | None = None,
        gc_every: int | None = None,
        resilience: Resilience | None = None,
        capacity: int | None = None,
        high_water: int | None = None,
        start: int = 0,
        receiver: AnyReceiver | None = None,
        secret: bytes = b"",
        readonly: Mapping[str, Callable[[], bytes]] | None = None,
        token_lifetime: int = TOKEN_LIFETIME,
        validated_for: int = VALIDATED_FOR,
        max_validated: int = MAX_VALIDATED,
        ticks_per_ms: int = 1000,
        incarnation: int = 0,
        resend_pace_ms: int = RESEND_PACE_MS,
    ) -> None:
        if max_validated < 1 or token_lifetime < 1 or validated_for < 1 or ticks_per_ms < 1:
            raise ProtocolUsageError(
                "token_lifetime, validated_for, max_validated and ticks_per_ms must be >= 1")
        _check_incarnation(incarnation)
        self.codec = codec
        self.secret = secret
        self.readonly: dict[str, Callable[[], bytes]] = dict(readonly or {})
        self.token_lifetime = token_lifetime
        self.validated_for = validated_for
        self.max_validated = max_validated
        self.ticks_per_ms = ticks_per_ms
        # address -> tick until which it counts as validated (insertion order: oldest first)
        self._validated: dict[P, int] = {}
        self._tag_bytes = 0 if codec.keyring is None else TAG_BYTES
        self._counts = dict.fromkeys(
            ("expired", "challenges", "validations", "bad_tokens", "readonly", "marked"), 0)
        self._readonly_withheld = 0  # read-only CALLs too short for any answer
        self.server: Server[P] = Server(
            rho=rho, kappa=kappa, estimator=estimator, gc_every=gc_every,
            resilience=resilience, capacity=capacity, high_water=high_water, start=start,
            receiver=receiver, on_refused=self._refuse, wrap=self._wrap,
            resend_pace=resend_pace_ms * ticks_per_ms,
        )
        self.refused: dict[Reason, int] = dict.fromkeys(Reason, 0)
        #: The ``upper`` recovered from stable storage (see the module doc).
        self.down_until = self._upper()
        self.calls = 0
        self._malformed = 0
        self._peer_keys: dict[P, Key] = {}
        self.incarnation = incarnation
        self._trailer = _TS.pack(incarnation)
        # The server epoch this incarnation serves: after a crash, marks count again
        # only once ``restart`` names a new incarnation (see the module doc).
        self._epoch = self.server.epoch
        self._marked = False  # the CALL being decided carries this incarnation's mark

    # -- queries -------------------------------------------------------------

    def next_deadline(self) -> int | None:
        return self.server.next_deadline()

    def statistics(self) -> ServiceStatistics:
        s = self.server.statistics()
        r = s.receiver
        if isinstance(r, ReceiverStatistics):
            estimate, upper, latest = r.estimate, r.upper, r.latest
        else:  # classes: the largest of each
            estimate = max(c.estimate for c in r.classes)
            upper = max(c.upper for c in r.classes)
            latests = [c.latest for c in r.classes if c.latest is not None]
            latest = max(latests) if latests else None
        refused = self.refused
        return ServiceStatistics(
            calls=self.calls, executions=s.started, duplicates=r.duplicate,
            stale=refused[Reason.STALE], early=refused[Reason.EARLY],
            down=refused[Reason.DOWN], overloaded=refused[Reason.OVERLOADED],
            acks=s.acks, replies=s.replies, replies_retransmitted=s.retransmitted,
            reply_acks=s.reply_acks, table_size=r.entries, computing=s.computing,
            estimate=estimate, upper=upper, latest=latest,
            malformed=self.codec.malformed + self._malformed + s.malformed,
            unauthenticated=self.codec.unauthenticated,
            late_completions=s.late_completions, incarnation=self.incarnation,
            withheld=s.withheld + self._readonly_withheld, **self._counts,
        )

    def validated(self, peer: P, now: int) -> bool:
        """Whether ``peer`` has proved it receives this server's datagrams."""
        until = self._validated.get(peer)
        return until is not None and until >= now

    # -- inputs --------------------------------------------------------------

    def receive(self, datagram: bytes, peer: P, *, now: int) -> ServiceOutput:
        """A datagram from ``peer`` at server time ``now``."""
        out = self.receive_run(datagram, peer, now=now)
        if isinstance(out, Invocation):
            return ServiceOutput((), (out,))
        return out

    def receive_run(self, datagram: bytes, peer: P, *,
                    now: int) -> Invocation | ServiceOutput:
        """``receive``, except that a procedure to run comes alone (it is then all
        there is: nothing to send), not in a ``ServiceOutput`` (the driver's hot path)."""
        opened = self.codec.open(datagram, now=now)
        if opened is None:
            return _NOTHING
        kind, message, key = opened
        if kind != KIND_RPC or not message:
            self._malformed += 1
            return _NOTHING
        first = message[0]
        proc = None
        marked = False
        if first == CALL_TYPE:
            proc = _call_procedure(message)
            if proc is None:
                self._malformed += 1
                return _NOTHING
            self.calls += 1
            if key is not None:
                self._note_key(peer, key)
            if proc in self.readonly:
                return self._answer_readonly(message, proc, peer, len(datagram), now)
            incarnation = self.incarnation
            if incarnation:
                at = 2 + message[1] + 12  # the payload: proc_len proc budget mark
                if (_TS.unpack_from(message, at + 5 + message[at])[0] == incarnation
                        and self.server.epoch == self._epoch):
                    marked = True
                    self._counts["marked"] += 1
        elif first == TRUNCATED_TYPE:
            self.calls += 1
        elif first == VALIDATE_TYPE:
            self._validate(message, peer, now)
            return _NOTHING
        if key is not None and first != CALL_TYPE:
            self._note_key(peer, key)
        self._marked = marked
        out = self.server.receive_start(message, peer, now=now, marked=marked)
        if isinstance(out, StartCall):
            # Only the CALL just checked starts a call: its name is ``proc``.
            assert proc is not None
            payload = out.payload
            if self._late(out, now):
                return self._expired(out, now)
            return Invocation(proc, payload[1 + payload[0] + _AFTER_NAME:], out)
        if out.sends:  # a ServerOutput of receive_start starts nothing
            return ServiceOutput(self._bounded(out.sends, message, len(datagram), now))
        return _NOTHING

    def start_deadline(self, run: Invocation) -> int | None:
        """The last tick (server time) at which ``run`` may start: its caller's
        deadline, ``ts + budget_ms`` (None: the call has no budget)."""
        return self._deadline(run.start)

    def expire_if_late(self, run: Invocation, *, now: int) -> ServiceOutput | None:
        """Whether ``run`` (accepted, not started yet) may start at ``now``: None if
        it may; otherwise it must never run, and what to send: past its deadline it
        is completed ``expired`` (the REPLY; see "Deadlines" in the module doc); a
        call the server no longer holds (superseded, lost in a crash) sends nothing.
        The driver asks this before it starts a call that waited for a worker, and
        when the deadline of a waiting call comes."""
        start = run.start
        if self._late(start, now):
            return self._expired(start, now)
        held = self.server.state(start.conn) if start.epoch == self.server.epoch else None
        if held is None or held[1] != start.ts:
            return _NOTHING
        return None

    def overloaded(self, run: Invocation, *, now: int) -> ServiceOutput:
        """Refuse ``run`` (accepted, not started) because the driver has no room for
        it: it never runs, its entry is completed (a later copy is answered
        ``expired``, "did not run"), and the caller gets a REFUSE ``overloaded``
        (see "Overload" in the module doc)."""
        start = run.start
        reply = self.server.complete_reply(start, _STATUS_BYTES[Status.EXPIRED], now=now)
        if reply is None:  # lost in a crash or superseded: nobody waits for it
            return _NOTHING
        self.refused[Reason.OVERLOADED] += 1
        refusal = encode_refusal(start.conn, start.ts, Reason.OVERLOADED)
        return ServiceOutput((Outgoing(reply.peer, self._wrap(refusal, reply.peer)),))

    def complete(self, run: Invocation, status: Status, data: bytes, *,
                 now: int) -> ServiceOutput:
        """``run`` finished at ``now`` with ``status`` and ``data``."""
        reply = self.complete_reply(run, status, data, now=now)
        if reply is None:
            return _NOTHING
        return ServiceOutput((reply,))

    def complete_reply(self, run: Invocation, status: Status, data: bytes, *,
                       now: int) -> Outgoing | None:
        """``complete``, with the REPLY frame to send (None: the call was lost in a
        crash or superseded) not wrapped in a ``ServiceOutput`` (the driver's hot path)."""
        reply = self.server.complete_reply(run.start, _STATUS_BYTES[status] + data, now=now)
        if reply is None:
            return None
        start = run.start
        payload = start.payload
        # The CALL frame's size, from a lower bound first (no encoding on the hot path).
        size = HEADER_BYTES + 14 + len(payload) + self._tag_bytes
        if len(reply.datagram) <= AMPLIFICATION * size:
            return reply
        raw = start.conn.encode("utf-8")
        size += len(raw)
        if (len(reply.datagram) <= AMPLIFICATION * size
                or self.validated(reply.peer, now)):
            return reply
        header = bytes((CALL_TYPE, len(raw))) + raw + _TS.pack(start.ts)
        return self._challenge(header, reply.peer, size, now)

    def crash(self, *, now: int, down: int | None = None) -> None:
        """Lose every volatile state at ``now`` (``Server.crash``); marks count
        again only after ``restart`` names a new incarnation."""
        self.server.crash(now=now, down=down)

    def restart(self, *, now: int, incarnation: int) -> None:
        """Recover after ``crash`` as a new incarnation (a new id, never used by this
        service before: the driver draws it at random; 0 turns marks off)."""
        _check_incarnation(incarnation)
        if incarnation and incarnation == self.incarnation:
            raise ProtocolUsageError("a restarted service needs a new incarnation id")
        self.server.restart(now=now)
        self.incarnation = incarnation
        self._trailer = _TS.pack(incarnation)
        self._epoch = self.server.epoch
        self.down_until = self._upper()

    def handle_timer(self, *, now: int) -> ServiceOutput:
        self.server.handle_timer(now=now)
        keyring = self.codec.keyring
        if (self._peer_keys and keyring is not None and keyring.previous_until is not None
                and now >= keyring.previous_until):
            self._peer_keys.clear()
        return _NOTHING

    # -- internals -----------------------------------------------------------

    def _deadline(self, start: StartCall) -> int | None:
        payload = start.payload
        budget = int(_U32.unpack_from(payload, 1 + payload[0])[0])
        return start.ts + budget * self.ticks_per_ms if budget else None

    def _late(self, start: StartCall, now: int) -> bool:
        """Whether the call ``start`` is past its deadline at ``now`` (the one
        deadline rule: on arrival and at start alike)."""
        deadline = self._deadline(start)
        return deadline is not None and now > deadline

    def _expired(self, start: StartCall, now: int) -> ServiceOutput:
        """Complete an accepted call whose deadline passed without running it."""
        self._counts["expired"] += 1
        reply = self.server.complete_reply(start, _STATUS_BYTES[Status.EXPIRED], now=now)
        return _NOTHING if reply is None else ServiceOutput((reply,))

    def _answer_readonly(self, message: bytes, proc: str, peer: P, size: int,
                         now: int) -> ServiceOutput:
        """A read-only built-in's REPLY, from the CALL alone (no at-most-once entry),
        at most 3x the CALL whether ``peer`` is validated or not (module doc)."""
        at = 2 + message[1]
        (ts,) = _TS.unpack_from(message, at)
        if ts == 0:
            self._malformed += 1
            return _NOTHING
        self._counts["readonly"] += 1
        head = bytes((REPLY_TYPE,)) + message[1:at + 8]
        for result in (_STATUS_BYTES[Status.OK] + self.readonly[proc](),
                       _STATUS_BYTES[Status.ERROR] + _padding_needed(proc)):
            frame = self._wrap(head + _U32.pack(len(result)) + result, peer)
            if len(frame) <= AMPLIFICATION * size:  # validated or not
                return ServiceOutput((Outgoing(peer, frame),))
        self._readonly_withheld += 1
        return _NOTHING

    def _bounded(self, sends: tuple[Outgoing, ...], message: bytes, size: int,
                 now: int) -> tuple[Outgoing, ...]:
        """``sends`` (answers to ``message``, a datagram of ``size`` bytes), each
        within the amplification budget: one over it to an unvalidated address is
        replaced by a CHALLENGE (see the module doc)."""
        budget = AMPLIFICATION * size
        for o in sends:
            if len(o.datagram) > budget and not self.validated(o.peer, now):
                break
        else:
            return sends
        header = message[:2 + message[1] + 8]
        bounded: list[Outgoing] = []
        for o in sends:
            if len(o.datagram) <= budget or self.validated(o.peer, now):
                bounded.append(o)
                continue
            challenge = self._challenge(header, o.peer, size, now)
            if challenge is not None:
                bounded.append(challenge)
        return tuple(bounded)

    def _token(self, issued: int, peer: P) -> bytes:
        stamp = _TS.pack(issued)
        mac = hmac.digest(self.secret, stamp + repr(peer).encode("utf-8"), "sha256")
        return stamp + mac[:TOKEN_BYTES - _TS.size]

    def _challenge(self, header: bytes, peer: P, size: int, now: int) -> Outgoing | None:
        """A CHALLENGE to ``peer`` for the call ``header`` names, if it fits the
        budget of the ``size``-byte datagram it answers (else nothing)."""
        frame = self._wrap(token_message(CHALLENGE_TYPE, header,
                                         self._token(max(now, 0), peer)), peer)
        if len(frame) > AMPLIFICATION * size:
            return None
        self._counts["challenges"] += 1
        return Outgoing(peer, frame)

    def _validate(self, message: bytes, peer: P, now: int) -> None:
        """A VALIDATE: the address ``peer`` echoes a token; it is validated if the
        token is this server's, for this address, and recent."""
        try:
            _conn, _ts, token = decode_challenge(message)
        except MalformedDatagram:
            self._malformed += 1
            return
        if message[0] != VALIDATE_TYPE:
            self._malformed += 1
            return
        (issued,) = _TS.unpack_from(token, 0)
        if (not 0 <= now - issued <= self.token_lifetime
                or not hmac.compare_digest(self._token(issued, peer), token)):
            self._counts["bad_tokens"] += 1
            return
        self._counts["validations"] += 1
        validated = self._validated
        validated.pop(peer, None)
        validated[peer] = now + self.validated_for
        if len(validated) > self.max_validated:
            del validated[next(iter(validated))]

    def _upper(self) -> int:
        receiver = self.server.receiver
        if isinstance(receiver, ClassifiedReceiver):
            return max(r.upper for r in receiver.receivers)
        return receiver.upper

    def _refuse(self, conn: str, ts: int, verdict: Verdict, now: int, peer: P) -> bytes:
        """The server's ``on_refused`` hook: a REFUSE naming the reason."""
        reason = _REASONS[verdict]
        if reason is Reason.STALE and now <= self.down_until and not self._marked:
            reason = Reason.DOWN
        self.refused[reason] += 1
        return encode_refusal(conn, ts, reason)

    def _note_key(self, peer: P, key: Key) -> None:
        keyring = self.codec.keyring
        if keyring is None:
            return
        if key is keyring.current:
            if self._peer_keys:
                self._peer_keys.pop(peer, None)
        else:
            self._peer_keys[peer] = key

    def _wrap(self, message: bytes, peer: P) -> bytes:
        """The server's ``wrap`` hook: the frame of ``message`` for ``peer``, under
        the key ``peer`` last authenticated with while it is a previous key."""
        keys = self._peer_keys
        if keys:
            return self.codec.seal(KIND_RPC, message + self._trailer, keys.get(peer))
        return self.codec.seal(KIND_RPC, message + self._trailer)


def _check_incarnation(incarnation: int) -> None:
    if not 0 <= incarnation <= MAX_INCARNATION:
        raise ProtocolUsageError(
            f"incarnation must be in [0, {MAX_INCARNATION}], got {incarnation}")


_NOTHING: Final[ServiceOutput] = ServiceOutput()
