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

from typing import Any, ClassVar, Final

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
