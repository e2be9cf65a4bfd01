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

A full CALL goes through ``Receiver.receive``; then the transition table
(``_ON_NEW`` / ``_ON_DUPLICATE``) decides, from the verdict and the entry's state:

- ACCEPTED (the paper's NEW): discard any stored reply, set COMPUTING and hand the
  driver a ``StartCall``; the driver computes and calls ``complete(call, result, now=)``,
  which sends REPLY, sets REPLYING and stores ``result`` and ``now``.
- DUPLICATE of the entry's own call: COMPUTING -> send ACK; REPLYING -> retransmit the
  stored reply; IDLE -> nothing.
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
- Malformed datagrams and messages that only a client receives (ACK, REPLY) are
  counted and dropped.

Verbs (aioquic's): ``receive(datagram, peer, *, now)``, ``complete(call, result, *,
now)``, ``handle_timer(*, now)``, ``crash(*, now, down=None)``, ``restart(*, now)``,
``next_deadline()``, ``statistics()``. ``handle(datagram, now, peer)`` is the old
name of ``receive``, kept as an alias.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from timebound.core.atmostonce import (
    Estimator,
    Fixed,
    Receiver,
    ReceiverStatistics,
    Resilience,
    Verdict,
)
from timebound.core.rpc._messages import Ack, Call, Reply, ReplyAck, decode
from timebound.errors import MalformedDatagram, ProtocolUsageError

P = TypeVar("P", bound=Hashable)


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
_ON_DUPLICATE: dict[ConnState, DupAction] = {
    ConnState.COMPUTING: DupAction.ACK,
    ConnState.REPLYING: DupAction.RETRANSMIT,
    ConnState.IDLE: DupAction.IGNORE,
}


@dataclass(frozen=True, slots=True)
class StartCall(Generic[P]):
    """The driver must run ``payload`` and then call ``Server.complete(this, ...)``."""

    conn: str
    ts: int
    payload: bytes
    peer: P
    epoch: int


@dataclass(frozen=True, slots=True)
class Outgoing(Generic[P]):
    """A datagram to send to ``peer``."""

    peer: P
    datagram: bytes


@dataclass(frozen=True, slots=True)
class ServerOutput(Generic[P]):
    """What one input made the server do: datagrams to send, calls to start."""

    sends: tuple[Outgoing[P], ...] = ()
    starts: tuple[StartCall[P], ...] = ()


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
    receiver: ReceiverStatistics


class _Entry(Generic[P]):
    __slots__ = ("ts", "state", "reply", "reply_time", "peer")

    def __init__(self, ts: int, peer: P) -> None:
        self.ts = ts
        self.state = ConnState.COMPUTING
        self.reply: bytes | None = None
        self.reply_time: int | None = None
        self.peer = peer


class Server(Generic[P]):
    """One at-most-once RPC server (Fig. 3-1) over one SCMP receiver."""

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
        start: int = 0,
    ) -> None:
        if (rho is None) == (estimator is None):
            raise ProtocolUsageError("give exactly one of rho and estimator")
        if kappa < 0:
            raise ProtocolUsageError(f"kappa must be >= 0, got {kappa}")
        if estimator is None:
            assert rho is not None
            estimator = Fixed(max(rho, kappa))
        self.kappa = kappa
        self._entries: dict[str, _Entry[P]] = {}
        self.epoch = 0
        self._counts = dict.fromkeys(
            ("started", "acks", "replies", "retransmitted", "reply_acks", "ignored",
             "late_completions", "malformed"), 0)
        self.receiver = Receiver(
            estimator, gc_every=gc_every, resilience=resilience, capacity=capacity,
            high_water=high_water, start=start, retain=self._retain,
        )

    # -- queries -------------------------------------------------------------

    @property
    def rho_prime(self) -> int:
        """``rho' = max(rho, kappa)``, with the receiver's current estimate as rho."""
        return max(self.receiver.estimate, self.kappa)

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
            computing=sum(e.state is ConnState.COMPUTING for e in self._entries.values()),
            started=c["started"], acks=c["acks"], replies=c["replies"],
            retransmitted=c["retransmitted"], reply_acks=c["reply_acks"],
            ignored=c["ignored"], late_completions=c["late_completions"],
            malformed=c["malformed"], receiver=self.receiver.statistics(),
        )

    # -- inputs --------------------------------------------------------------

    def handle(self, datagram: bytes, now: int, peer: P) -> ServerOutput[P]:
        """Alias of ``receive(datagram, peer, now=now)`` (the old name)."""
        return self.receive(datagram, peer, now=now)

    def receive(self, datagram: bytes, peer: P, *, now: int) -> ServerOutput[P]:
        """A datagram from ``peer`` arrived at server time ``now``."""
        try:
            message = decode(datagram)
        except MalformedDatagram:
            self._counts["malformed"] += 1
            return ServerOutput()
        if isinstance(message, Call):
            if message.payload is None:
                return self._probe(message, now, peer)
            return self._call(message, message.payload, now, peer)
        if isinstance(message, ReplyAck):
            return self._reply_ack(message, now)
        self._counts["ignored"] += 1  # ACK and REPLY go to clients
        return ServerOutput()

    def complete(self, call: StartCall[P], result: bytes, *, now: int) -> ServerOutput[P]:
        """The computation of ``call`` finished with ``result`` at server time ``now``."""
        self.receiver.handle_timer(now=now)
        entry = self._entry(call.conn) if call.epoch == self.epoch else None
        if entry is None or entry.ts != call.ts or self.receiver.down:
            # Lost in a crash, or superseded by a newer call on the connection.
            self._counts["late_completions"] += 1
            return ServerOutput()
        if entry.state is not ConnState.COMPUTING:
            raise ProtocolUsageError(f"call ({call.conn}, {call.ts}) completed twice")
        entry.state = ConnState.REPLYING
        entry.reply = result
        entry.reply_time = now
        self._counts["replies"] += 1
        return ServerOutput(sends=(Outgoing(entry.peer, Reply(call.conn, call.ts, result).encode()),))

    def handle_timer(self, *, now: int) -> ServerOutput[P]:
        """Fire the receiver's timers (GC, ``latest`` refresh, recovery) due by ``now``."""
        self.receiver.handle_timer(now=now)
        return ServerOutput()

    def crash(self, *, now: int, down: int | None = None) -> None:
        """Lose every volatile state (table, RPC entries, running calls) at ``now``."""
        self.receiver.crash(now=now, down=down)
        self._entries = {}
        self.epoch += 1

    def restart(self, *, now: int) -> None:
        self.receiver.restart(now=now)

    # -- internals -----------------------------------------------------------

    def _entry(self, conn: str) -> _Entry[P] | None:
        entry = self._entries.get(conn)
        if entry is not None and self.receiver.lookup(conn) != entry.ts:
            # Defensive: the receiver dropped or replaced the entry without asking
            # ``retain`` (a crash is handled in ``crash``); follow the receiver.
            del self._entries[conn]
            return None
        return entry

    def _retain(self, conn: str, now: int) -> bool:
        entry = self._entries.get(conn)
        if entry is None:
            return False
        if entry.state is ConnState.COMPUTING:
            return True
        assert entry.reply_time is not None
        if entry.reply_time >= now - self.rho_prime:
            return True
        # The receiver evicts every expired entry it is not asked to retain.
        del self._entries[conn]
        return False

    def _call(self, msg: Call, payload: bytes, now: int, peer: P) -> ServerOutput[P]:
        verdict = self.receiver.receive(msg.conn, msg.ts, now=now)
        if verdict is Verdict.ACCEPTED:
            entry: _Entry[P] = _Entry(msg.ts, peer)
            self._entries[msg.conn] = entry  # discards any stored reply
            self._counts["started"] += 1
            return ServerOutput(starts=(StartCall(msg.conn, msg.ts, payload, peer, self.epoch),))
        if verdict is Verdict.DUPLICATE:
            return self._duplicate(msg, peer)
        self._counts["ignored"] += 1
        return ServerOutput()

    def _probe(self, msg: Call, now: int, peer: P) -> ServerOutput[P]:
        self.receiver.handle_timer(now=now)
        if self.receiver.down:
            self._counts["ignored"] += 1
            return ServerOutput()
        return self._duplicate(msg, peer)

    def _duplicate(self, msg: Call, peer: P) -> ServerOutput[P]:
        entry = self._entry(msg.conn)
        if entry is None or entry.ts != msg.ts:
            self._counts["ignored"] += 1
            return ServerOutput()
        entry.peer = peer  # the client may have moved; answer where it is now
        action = _ON_DUPLICATE[entry.state]
        if action is DupAction.ACK:
            self._counts["acks"] += 1
            return ServerOutput(sends=(Outgoing(peer, Ack(msg.conn, msg.ts).encode()),))
        if action is DupAction.RETRANSMIT:
            assert entry.reply is not None
            self._counts["retransmitted"] += 1
            reply = Reply(msg.conn, msg.ts, entry.reply).encode()
            return ServerOutput(sends=(Outgoing(peer, reply),))
        self._counts["ignored"] += 1
        return ServerOutput()

    def _reply_ack(self, msg: ReplyAck, now: int) -> ServerOutput[P]:
        self.receiver.handle_timer(now=now)
        entry = None if self.receiver.down else self._entry(msg.conn)
        if entry is None or entry.ts != msg.ts or entry.state is not ConnState.REPLYING:
            self._counts["ignored"] += 1
            return ServerOutput()
        entry.state = ConnState.IDLE
        entry.reply = None
        self._counts["reply_acks"] += 1
        return ServerOutput()
