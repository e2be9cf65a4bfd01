"""The records of the RPC server and the live service: what a datagram makes them do
(``StartCall``, ``Outgoing``, ``ServerOutput``; ``Invocation``, ``ServiceOutput``).
A peer is any hashable address the driver gives (``Server`` and ``RpcService`` are
generic in its type; these records hold it as ``Any``).

Their meaning is documented where they are made: ``_server`` (Fig. 3-1) and
``_live`` (the live service), which re-export them under their old names.

They are immutable values built on ``timebound.core.wire.Record`` (equality, hash,
repr and pickling written out by hand, read-only fields, not ``Generic``: see there);
this module is compiled with the rest of the RPC core (``timebound._compiled``)
because a null call makes three of these records. ``Outgoing`` (a datagram to send)
is the wire's, shared with the channel core, and re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Final

from timebound.core._frozen import by_constructor
from timebound.core.wire import Outgoing as Outgoing
from timebound.core.wire import Record


class StartCall(Record):
    """The driver must run ``payload`` and then call ``Server.complete(this, ...)``."""

    __slots__ = ("conn", "ts", "payload", "peer", "epoch")
    __match_args__: ClassVar[tuple[str, ...]] = ("conn", "ts", "payload", "peer", "epoch")

    def __init__(self, conn: str, ts: int, payload: bytes, peer: Any, epoch: int) -> None:
        self.conn: Final = conn
        self.ts: Final = ts
        self.payload: Final = payload
        self.peer: Final = peer
        self.epoch: Final = epoch

    def _values(self) -> tuple[Any, ...]:
        return (self.conn, self.ts, self.payload, self.peer, self.epoch)


class ServerOutput(Record):
    """What one input made the server do: datagrams to send, calls to start."""

    __slots__ = ("sends", "starts")
    __match_args__: ClassVar[tuple[str, ...]] = ("sends", "starts")

    def __init__(self, sends: tuple[Outgoing, ...] = (),
                 starts: tuple[StartCall, ...] = ()) -> None:
        self.sends: Final = sends
        self.starts: Final = starts

    def _values(self) -> tuple[Any, ...]:
        return (self.sends, self.starts)


class Invocation(Record):
    """A call to run: ``proc(args)``; then ``RpcService.complete(this, ...)``."""

    __slots__ = ("proc", "args", "start")
    __match_args__: ClassVar[tuple[str, ...]] = ("proc", "args", "start")

    def __init__(self, proc: str, args: bytes, start: StartCall) -> None:
        self.proc: Final = proc
        self.args: Final = args
        self.start: Final = start

    def _values(self) -> tuple[Any, ...]:
        return (self.proc, self.args, self.start)


class ServiceOutput(Record):
    """Frames to send (already sealed) and procedures to run."""

    __slots__ = ("sends", "runs")
    __match_args__: ClassVar[tuple[str, ...]] = ("sends", "runs")

    def __init__(self, sends: tuple[Outgoing, ...] = (),
                 runs: tuple[Invocation, ...] = ()) -> None:
        self.sends: Final = sends
        self.runs: Final = runs

    def _values(self) -> tuple[Any, ...]:
        return (self.sends, self.runs)


@dataclass(frozen=True, slots=True)
class ServiceStatistics:
    """The counters an operator reads (``timebound rpc stats``, Prometheus)."""

    calls: int
    executions: int
    duplicates: int
    stale: int
    early: int
    down: int
    overloaded: int
    acks: int
    replies: int
    replies_retransmitted: int
    reply_acks: int
    table_size: int
    computing: int
    estimate: int
    upper: int
    latest: int | None
    malformed: int
    unauthenticated: int
    late_completions: int
    expired: int = 0
    challenges: int = 0
    validations: int = 0
    bad_tokens: int = 0
    readonly: int = 0
    #: CALLs marked with this incarnation (decided by the marked rule).
    marked: int = 0
    #: This incarnation's id (0: none, marks off).
    incarnation: int = 0
    #: Copies of replied calls that got no reply (``core.rpc.MAX_RESENDS``).
    withheld: int = 0

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return by_constructor(self)
