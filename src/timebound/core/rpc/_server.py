"""The at-most-once RPC server: SCMP paper, section 3.1 and Fig. 3-1.

Theory of operation
-------------------
The server is the SCMP receiver of Figs. 2-1/2-2 (``timebound.core.atmostonce.
Receiver``, the one copy of that algorithm) used as a duplicate filter for CALL
messages, plus the RPC state of each connection kept beside the receiver's table:
``state`` (IDLE, COMPUTING, REPLYING), ``ts`` (the call timestamp the receiver holds
for the connection), the stored ``reply`` and ``reply_time`` (server time at which the
reply was first transmitted). The receiver's table and this map have the same keys:
an entry is created when the receiver accepts a CALL on a new connection and removed
when the receiver evicts it or loses its table in a crash.

A full CALL goes through ``Receiver.receive``; then the verdict and, for a
duplicate, the transition table ``_ON_DUPLICATE`` (the entry's state) decide:

- ACCEPTED (the paper's NEW): discard any stored reply, set COMPUTING and hand the
  driver a ``StartCall``; the driver computes and calls ``complete(call, result, now=)``,
  which sends REPLY, sets REPLYING and stores ``result`` and ``now``.
- DUPLICATE of the entry's own call: COMPUTING -> send ACK; REPLYING -> retransmit the
  stored reply, at most ``MAX_RESENDS`` (3) times after its first send, each resend
  after the first at least ``resend_pace`` ticks after the one before (the first may
  follow at once: the first send may have been a CHALLENGE to an address not yet
  validated), over every duplicate and probe of the call together,
  whoever sends them (beyond the figure: anyone can replay a CALL or forge a probe
  from a client's address, so without the bound each copy would draw the whole
  reply; a real client that lost its reply gets it on a later retransmission);
  IDLE -> nothing. Test: ``tests/test_rpc_resend_cap.py``.
- everything else (STALE: "no connection table entry, ignore message"; EARLY, DOWN,
  RECOVERING, FULL; a duplicate of an *older* call on the connection) -> nothing; the
  client retransmits or gives up.

REPLY-ACK for the entry's call in REPLYING drops the reply and sets IDLE.

Garbage collection is the receiver's own (``gc_every``, ``capacity``/``high_water``
for the paper's "we do not remove connection table entries unless the table is almost
full"), with the RPC rule put in through the receiver's ``retain`` hook: COMPUTING
entries are always retained; IDLE and REPLYING entries only while
``reply_time >= now - rho'``, ``rho' = max(estimate, kappa)``. The receiver itself
only offers entries whose *call* timestamp is ``<= now - estimate`` and raises
``upper`` to that timestamp, so "``G.upper`` is set using the client's call time, not
the reply time" holds by construction. With ``rho=`` the estimator is
``Fixed(max(rho, kappa))``.

Crashes (resilient server only, Fig. 3-1 "(Re)Initialize SCMP algorithm as in Figure
2-2. The connection table CT is empty."): the RPC state is lost with the table and
the server's *epoch* grows, so completions of calls started before the crash are
ignored. No call runs twice: after recovery ``upper = latest`` refuses every call
accepted before the crash.

Choices where the figure leaves room
------------------------------------
- *Eviction needs both clocks old.* An entry is evicted when its call timestamp is
  ``<= now - estimate`` (the receiver's SCMP rule, which keeps ``upper <= now - rho``)
  *and* ``reply_time < now - rho'`` (Fig. 3-1). The figure only states the second; the
  first is what lets ``upper`` be the call time without ever exceeding ``now - rho``.
  Test: ``tests/test_rpc_server.py::test_gc_*``.
- *Duplicates answer only their own call.* A DUPLICATE whose ``ts`` is below the
  entry's (a late copy of an earlier call on the connection) is ignored rather than
  answered with the newer call's ACK or reply: the client has finished with that
  call. Test: ``test_transitions`` (rows ``old duplicate``).
- *Truncated CALLs are probes, not SCMP messages.* They carry no payload, so they
  can never start a call: they are not passed to ``receive`` (which would accept and
  record a timestamp the server could not run) but looked up with
  ``Receiver.lookup``; if the entry holds that very call they get the duplicate
  answer, otherwise nothing. Test: ``test_transitions`` (rows ``probe``).
- *REPLY-ACK applies only to the entry's call in REPLYING*; in COMPUTING it can only
  be a late hint for an older call and is ignored (moving a COMPUTING entry to IDLE
  would let it be evicted while the computation runs).
- *A new call supersedes a COMPUTING one* (the client gave up on it): the entry turns
  to the new call and the old computation's ``complete`` is ignored.
- *Completing a call twice* (same epoch, the entry still holds it) is a local misuse
  and raises ``ProtocolUsageError``.
- IDLE keeps ``reply_time``: "the reply timestamp" is needed by the GC rule of IDLE
  entries, which reach IDLE only from REPLYING.
- *A reply goes where its call came from.* The completion's REPLY goes to the
  address of the CALL that started it; a duplicate or probe is answered to its own
  source but never moves that address (a forged duplicate would otherwise redirect
  a reply to a victim). Test: ``tests/test_rpc_hostile.py::test_duplicate_does_not_move_reply``.
- Malformed datagrams and messages that only a client receives (ACK, REPLY) are
  counted and dropped.
- *A full table forgets the oldest finished calls, never a running one.* The table
  is bounded by entries (``capacity``) and by bytes (``max_bytes``, on the receiver),
  stored replies included: each entry counts ``ENTRY_BYTES`` (an estimate of the
  receiver's slot and heap item, the ``_Entry`` with its REPLY header and the peer
  address: about 500 bytes measured on 64-bit CPython 3.11) plus its id's length,
  plus ``len(reply)`` while a reply is stored (``store_bytes`` when it is stored and
  when it is dropped). When a new connection or a reply does not fit, the receiver
  forgets the oldest entries early (``_table``, "Bounds"; ``upper`` rises over them,
  so a late copy of a forgotten call is refused ``STALE`` and never runs again):
  the server's ``evictable`` hook lets IDLE and REPLYING entries go (their caller
  has the reply, or will be told ``stale`` by the live service when it asks again)
  and keeps COMPUTING ones, because the reply of a running call would be lost and
  its caller could never learn the outcome. A table full of running calls refuses
  new connections (``FULL``, the live service's ``overloaded``): the server is busy.
  A reply that does not fit even after that is sent once and not stored (its entry
  is forgotten with it: a retransmitted CALL is ``STALE``). A flood of new
  connections that finish therefore costs honest callers the stored replies of
  their oldest finished calls, not their admission (a flood stamped ahead of the
  clock raises ``upper`` with it: the receiver's "Capacity" note).
  Tests: ``tests/test_rpc_server.py::test_capacity_*``, ``tests/test_rpc_flood.py``.

The receiver
-------------
By default the server builds one ``Receiver`` from its keyword options. A driver may
instead hand it a ready receiver (``receiver=``): a ``Receiver`` or a
``ClassifiedReceiver`` (section 2.4's classes, each with its own estimate, ``upper``
and ``latest``), e.g. built by a ``ReceiverConfig`` with ``recovery_grace`` and
``reorder_window``. The server installs its ``retain`` hook on every class; the
GC rule above uses the estimate of the connection's own class.

Extension points: refusals, framing
-----------------------------------
Fig. 3-1 stays silent on a CALL it refuses. A server built with ``on_refused=f``
calls ``f(conn, ts, verdict, now, peer)`` for every full CALL the receiver refuses
(STALE, EARLY, DOWN, RECOVERING, FULL) and for every probe of a call it does not hold
(verdict STALE: no entry, or the entry holds an older call; DOWN while down), and
sends the message ``f`` returns, if any, to ``peer``. The state machine is the same
either way; the live service (``_live``) answers with a REFUSE message. A server
built with ``wrap=g`` sends ``g(message, peer)`` instead of each message (the live
service's versioned, authenticated frame), so no layer re-packs its outputs.

Hot path: datagrams are read with ``_messages.parse`` (``decode``'s checks, no message
objects) and REPLY/ACK messages are built from a per-entry header; outputs with
nothing in them are one shared empty ``ServerOutput``. ``receive_start`` and
``complete_reply`` are ``receive`` and ``complete`` for a driver that handles one
call at a time (the live service): the ``StartCall`` or the REPLY's ``Outgoing``
comes alone, without a ``ServerOutput`` around it.

Verbs (aioquic's): ``receive(datagram, peer, *, now)``, ``complete(call, result, *,
now)``, ``handle_timer(*, now)``, ``crash(*, now, down=None)``, ``restart(*, now)``,
``next_deadline()``, ``statistics()``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from timebound.core._frozen import by_constructor
from timebound.core.atmostonce import (
    ClassifiedReceiver,
    ClassifiedStatistics,
    Estimator,
    Fixed,
    Receiver,
    ReceiverStatistics,
    Resilience,
    Verdict,
)
from timebound.core.rpc._messages import (
    ACK_TYPE,
    CALL_TYPE,
    MAX_BODY_BYTES,
    REPLY_ACK_TYPE,
    REPLY_TYPE,
    TRUNCATED_TYPE,
    frame,
    parse,
    parsed_head,
)

# The records live in _records (written out by hand, not generic: see there);
# imported as themselves, they are still importable from here.
from timebound.core.rpc._records import Outgoing as Outgoing
from timebound.core.rpc._records import ServerOutput as ServerOutput
from timebound.core.rpc._records import StartCall as StartCall
from timebound.errors import MalformedDatagram, ProtocolUsageError

P = TypeVar("P", bound=Hashable)

#: What a server hands refusals to (see "Extension point: refusals"):
#: ``(conn, ts, verdict, now, peer) -> message to send to peer, or None``.
RefusalHook = Callable[[str, int, Verdict, int, P], bytes | None]
#: What a server passes every datagram it sends through (see "Extension points"):
#: ``(message, peer) -> datagram``.
Wrapper = Callable[[bytes, P], bytes]
AnyReceiver = Receiver | ClassifiedReceiver


class ConnState(enum.Enum):
    IDLE = "idle"
    COMPUTING = "computing"
    REPLYING = "replying"


class DupAction(enum.Enum):
    """What a duplicate of the entry's own call triggers (Fig. 3-1 step 3)."""

    IGNORE = "ignore"
    ACK = "ack"
    RETRANSMIT = "retransmit"


#: Fig. 3-1 step 3, as data.
_ON_DUPLICATE: Final[dict[ConnState, DupAction]] = {
    ConnState.COMPUTING: DupAction.ACK,
    ConnState.REPLYING: DupAction.RETRANSMIT,
    ConnState.IDLE: DupAction.IGNORE,
}

# Enum members as module globals: ``ConnState.IDLE`` is a class-attribute lookup
# through the enum machinery, several times the cost of a global, on the hot path.
_IDLE: Final = ConnState.IDLE
_COMPUTING: Final = ConnState.COMPUTING
_REPLYING: Final = ConnState.REPLYING
_SEND_ACK: Final = DupAction.ACK
_RETRANSMIT: Final = DupAction.RETRANSMIT
_ACCEPTED: Final = Verdict.ACCEPTED
_DUPLICATE: Final = Verdict.DUPLICATE


#: The output of every input that does nothing (shared: outputs are immutable).
_NOTHING: Final[ServerOutput] = ServerOutput()


@dataclass(frozen=True, slots=True)
class ServerStatistics:
    """A snapshot of the RPC layer, with the receiver's own statistics."""

    entries: int
    computing: int
    started: int
    acks: int
    replies: int
    retransmitted: int
    reply_acks: int
    ignored: int
    late_completions: int
    malformed: int
    receiver: ReceiverStatistics | ClassifiedStatistics
    #: duplicates and probes of a replied call that got no reply (``MAX_RESENDS``)
    withheld: int = 0

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return by_constructor(self)


class _Entry:
    # Not Generic in the peer (``Any``): compiled, a generic class gets a weak-reference
    # slot that mypyc 2.4 mishandles (``core/rpc/_records.py``).
    __slots__ = ("ts", "state", "reply", "reply_time", "peer", "head", "resends", "sent_at")

    def __init__(self, ts: int, peer: Any, head: bytes) -> None:
        self.ts = ts
        self.state = _COMPUTING
        self.reply: bytes | None = None
        self.reply_time: int | None = None
        self.peer = peer
        self.head = head  # the REPLY header of the connection (type, length, id)
        self.resends = 0  # the stored reply's sends after the first (``MAX_RESENDS``)
        self.sent_at = 0  # when it was last re-sent


#: Most times a stored reply is sent again after its first send, to duplicates and
#: probes of its call together, at least ``resend_pace`` apart (module docstring).
MAX_RESENDS: Final = 3

#: What one connection's entry costs beside its id and its stored reply (bytes; see
#: "A full table forgets ..." in the module docstring): installed as the receiver's
#: ``entry_bytes``.
ENTRY_BYTES: Final = 512


class Server(Generic[P]):
    """One at-most-once RPC server (Fig. 3-1) over one SCMP receiver (or classes)."""

    def __init__(
        self,
        *,
        rho: int | None = None,
        kappa: int = 0,
        estimator: Estimator | None = None,
        gc_every: int | None = None,
        resilience: Resilience | None = None,
        capacity: int | None = None,
        high_water: int | None = None,
        max_bytes: int | None = None,
        start: int = 0,
        receiver: AnyReceiver | None = None,
        on_refused: RefusalHook[P] | None = None,
        wrap: Wrapper[P] | None = None,
        resend_pace: int = 0,
    ) -> None:
        if kappa < 0:
            raise ProtocolUsageError(f"kappa must be >= 0, got {kappa}")
        if resend_pace < 0:
            raise ProtocolUsageError(f"resend_pace must be >= 0, got {resend_pace}")
        self.kappa = kappa
        self.resend_pace = resend_pace
        self.on_refused = on_refused
        self.wrap = wrap
        self._entries: dict[str, _Entry] = {}
        self.epoch = 0
        self._counts = dict.fromkeys(
            ("acks", "retransmitted", "reply_acks", "ignored", "late_completions",
             "malformed", "withheld"), 0)
        self._started = 0
        self._replies = 0
        if receiver is None:
            if (rho is None) == (estimator is None):
                raise ProtocolUsageError("give exactly one of rho and estimator")
            if estimator is None:
                assert rho is not None
                estimator = Fixed(max(rho, kappa))
            receiver = Receiver(
                estimator, gc_every=gc_every, resilience=resilience, capacity=capacity,
                high_water=high_water, start=start, max_bytes=max_bytes,
            )
        elif (rho, estimator, gc_every, resilience, capacity, high_water,
              max_bytes) != (None,) * 7:
            raise ProtocolUsageError(
                "a server given a receiver takes no rho, estimator, gc_every, resilience, "
                "capacity, high_water or max_bytes (they are the receiver's)")
        self.receiver: AnyReceiver = receiver
        classes = receiver.receivers if isinstance(receiver, ClassifiedReceiver) else [receiver]
        for one in classes:
            if one.retain is not None or one.evictable is not None:
                raise ProtocolUsageError("the receiver already has a retain hook")
            one.retain = self._retain
            one.evictable = self._evictable
            one.set_entry_bytes(ENTRY_BYTES)
        self._classified = isinstance(receiver, ClassifiedReceiver)

    # -- queries -------------------------------------------------------------

    @property
    def rho_prime(self) -> int:
        """``rho' = max(rho, kappa)``, with the receiver's current estimate as rho
        (with classes: the largest class estimate)."""
        receiver = self.receiver
        if isinstance(receiver, ClassifiedReceiver):
            return max(max(r.estimate for r in receiver.receivers), self.kappa)
        return max(receiver.estimate, self.kappa)

    def state(self, conn: str) -> tuple[ConnState, int] | None:
        """``(state, call ts)`` of a connection, or None if it has no entry."""
        entry = self._entry(conn)
        return None if entry is None else (entry.state, entry.ts)

    def next_deadline(self) -> int | None:
        return self.receiver.next_deadline()

    def statistics(self) -> ServerStatistics:
        c = self._counts
        return ServerStatistics(
            entries=len(self._entries),
            computing=sum(e.state is _COMPUTING for e in self._entries.values()),
            started=self._started, acks=c["acks"], replies=self._replies,
            retransmitted=c["retransmitted"], reply_acks=c["reply_acks"],
            ignored=c["ignored"], late_completions=c["late_completions"],
            malformed=c["malformed"], receiver=self.receiver.statistics(),
            withheld=c["withheld"],
        )

    # -- inputs --------------------------------------------------------------

    def receive(self, datagram: bytes, peer: P, *, now: int,
                marked: bool = False) -> ServerOutput:
        """A datagram from ``peer`` arrived at server time ``now``; ``marked``: a
        CALL made after this incarnation began (``Receiver.receive``'s ``marked``:
        the caller vouches for it, e.g. the live service from the CALL's mark)."""
        out = self.receive_start(datagram, peer, now=now, marked=marked)
        if isinstance(out, StartCall):
            return ServerOutput((), (out,))
        return out

    def receive_start(self, datagram: bytes, peer: P, *, now: int,
                      marked: bool = False) -> StartCall | ServerOutput:
        """``receive``, except that a call to start comes alone, not in a
        ``ServerOutput`` (the live service's hot path: one object less per call)."""
        try:
            kind, conn, ts, body = parse(datagram)
        except MalformedDatagram:
            self._counts["malformed"] += 1
            return _NOTHING
        if kind == CALL_TYPE:
            assert body is not None
            return self._call(conn, ts, body, now, peer, marked)
        if kind == TRUNCATED_TYPE:
            return self._probe(conn, ts, now, peer)
        if kind == REPLY_ACK_TYPE:
            return self._reply_ack(conn, ts, now)
        self._counts["ignored"] += 1  # ACK and REPLY go to clients
        return _NOTHING

    def complete(self, call: StartCall, result: bytes, *, now: int) -> ServerOutput:
        """The computation of ``call`` finished with ``result`` at server time ``now``."""
        reply = self.complete_reply(call, result, now=now)
        return _NOTHING if reply is None else ServerOutput((reply,))

    def complete_reply(self, call: StartCall, result: bytes, *,
                       now: int) -> Outgoing | None:
        """``complete``, with the REPLY to send (or None) not wrapped in a
        ``ServerOutput`` (the live service's hot path)."""
        receiver = self.receiver
        receiver.handle_timer(now=now)
        entry = self._entry(call.conn) if call.epoch == self.epoch else None
        if entry is None or entry.ts != call.ts or receiver.down:
            # Lost in a crash, or superseded by a newer call on the connection.
            self._counts["late_completions"] += 1
            return None
        if entry.state is not _COMPUTING:
            raise ProtocolUsageError(f"call ({call.conn}, {call.ts}) completed twice")
        if len(result) > MAX_BODY_BYTES:
            raise ProtocolUsageError(f"body longer than {MAX_BODY_BYTES} bytes")
        entry.state = _REPLYING
        entry.reply = result
        entry.reply_time = now
        entry.resends = 0
        self._replies += 1
        peer = entry.peer
        message = frame(entry.head, call.ts, result)
        if not self._class_of(call.conn).store_bytes(call.conn, len(result), now=now):
            # Over the byte bound even after forgetting the oldest finished calls:
            # the reply is sent once and not kept (its entry is gone).
            self._entries.pop(call.conn, None)
        wrap = self.wrap
        return Outgoing(peer, message if wrap is None else wrap(message, peer))

    def handle_timer(self, *, now: int) -> ServerOutput:
        """Fire the receiver's timers (GC, ``latest`` refresh, recovery) due by ``now``."""
        self.receiver.handle_timer(now=now)
        return _NOTHING

    def crash(self, *, now: int, down: int | None = None) -> None:
        """Lose every volatile state (table, RPC entries, running calls) at ``now``."""
        self.receiver.crash(now=now, down=down)
        self._entries = {}
        self.epoch += 1

    def restart(self, *, now: int) -> None:
        self.receiver.restart(now=now)

    # -- internals -----------------------------------------------------------

    def _send(self, peer: P, message: bytes) -> ServerOutput:
        wrap = self.wrap
        return ServerOutput((Outgoing(peer, message if wrap is None else wrap(message, peer)),))

    def _class_of(self, conn: str) -> Receiver:
        receiver = self.receiver
        if isinstance(receiver, ClassifiedReceiver):
            return receiver.receiver_for(conn)
        return receiver

    def _entry(self, conn: str) -> _Entry | None:
        entry = self._entries.get(conn)
        if entry is None:
            return None
        receiver = self.receiver
        if (receiver.receiver_for(conn) if isinstance(receiver, ClassifiedReceiver)
                else receiver).lookup(conn) != entry.ts:
            # Defensive: the receiver dropped or replaced the entry without asking
            # ``retain`` (a crash is handled in ``crash``); follow the receiver.
            del self._entries[conn]
            return None
        return entry

    def _retain(self, conn: str, now: int) -> bool:
        entry = self._entries.get(conn)
        if entry is None:
            return False
        if entry.state is _COMPUTING:
            return True
        assert entry.reply_time is not None
        if entry.reply_time >= now - max(self._class_of(conn).estimate, self.kappa):
            return True
        # The receiver evicts every expired entry it is not asked to retain.
        del self._entries[conn]
        return False

    def _evictable(self, conn: str, now: int) -> bool:
        """The receiver's ``evictable`` hook (a full table): a finished call's
        entry may go (its state goes with it), a running one stays."""
        entry = self._entries.get(conn)
        if entry is None:
            return True
        if entry.state is _COMPUTING:
            return False
        del self._entries[conn]
        return True

    def _call(self, conn: str, ts: int, payload: bytes, now: int, peer: P,
              marked: bool) -> StartCall | ServerOutput:
        verdict = self.receiver.receive(conn, ts, now=now, marked=marked)
        if verdict is _ACCEPTED:
            entry = self._entries.get(conn)
            if entry is None:
                self._entries[conn] = _Entry(ts, peer, parsed_head(REPLY_TYPE, conn))
            else:
                # The connection's entry turns to the new call, as a new entry would:
                # COMPUTING, and any stored reply discarded.
                entry.ts = ts
                entry.state = _COMPUTING
                if entry.reply is not None:
                    entry.reply = None
                    self._class_of(conn).store_bytes(conn, 0, now=now)
                entry.reply_time = None
                entry.peer = peer
            self._started += 1
            return StartCall(conn, ts, payload, peer, self.epoch)
        if verdict is _DUPLICATE:
            return self._duplicate(conn, ts, peer, now)
        return self._refused(conn, ts, verdict, now, peer)

    def _refused(self, conn: str, ts: int, verdict: Verdict, now: int,
                 peer: P) -> ServerOutput:
        self._counts["ignored"] += 1
        hook = self.on_refused
        if hook is not None:
            message = hook(conn, ts, verdict, now, peer)
            if message is not None:
                return self._send(peer, message)
        return _NOTHING

    def _probe(self, conn: str, ts: int, now: int, peer: P) -> ServerOutput:
        self.receiver.handle_timer(now=now)
        if self.receiver.down:
            return self._refused(conn, ts, Verdict.DOWN, now, peer)
        if self.on_refused is not None:
            entry = self._entry(conn)
            if entry is None or entry.ts < ts:
                # The server does not hold this call (a crash or an eviction lost it).
                return self._refused(conn, ts, Verdict.STALE, now, peer)
        return self._duplicate(conn, ts, peer, now)

    def _duplicate(self, conn: str, ts: int, peer: P, now: int) -> ServerOutput:
        entry = self._entry(conn)
        if entry is None or entry.ts != ts:
            self._counts["ignored"] += 1
            return _NOTHING
        # The duplicate is answered where it came from, but ``entry.peer`` (where the
        # completion's REPLY goes) stays the address the call first came from: a
        # forged duplicate must not redirect a reply. The live service
        # bounds what an unvalidated address gets (``_live``, amplification).
        action = _ON_DUPLICATE[entry.state]
        if action is _SEND_ACK:
            self._counts["acks"] += 1
            ack = bytes((ACK_TYPE,)) + entry.head[1:]
            return self._send(peer, frame(ack, ts))
        if action is _RETRANSMIT:
            assert entry.reply is not None
            resends = entry.resends
            if resends >= MAX_RESENDS or (resends and now - entry.sent_at < self.resend_pace):
                # Anyone can replay a CALL (or forge a probe) from a victim's
                # address: the reply goes out a bounded number of times, however
                # many copies come and whoever validated (module docstring).
                self._counts["withheld"] += 1
                return _NOTHING
            entry.resends = resends + 1
            entry.sent_at = now
            self._counts["retransmitted"] += 1
            return self._send(peer, frame(entry.head, ts, entry.reply))
        self._counts["ignored"] += 1
        return _NOTHING

    def _reply_ack(self, conn: str, ts: int, now: int) -> ServerOutput:
        self.receiver.handle_timer(now=now)
        entry = None if self.receiver.down else self._entry(conn)
        if entry is None or entry.ts != ts or entry.state is not _REPLYING:
            self._counts["ignored"] += 1
            return _NOTHING
        entry.state = _IDLE
        entry.reply = None
        self._class_of(conn).store_bytes(conn, 0, now=now)
        self._counts["reply_acks"] += 1
        return _NOTHING
