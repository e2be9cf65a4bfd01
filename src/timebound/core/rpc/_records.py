"""The records of the RPC server and the live service: what a datagram makes them do
(``StartCall``, ``Outgoing``, ``ServerOutput``; ``Invocation``, ``ServiceOutput``).
A peer is any hashable address the driver gives (``Server`` and ``RpcService`` are
generic in its type; these records hold it as ``Any``).

Their meaning is documented where they are made: ``_server`` (Fig. 3-1) and
``_live`` (the live service), which re-export them under their old names.

They are immutable values with a dataclass's equality, hash and repr, written out by
hand rather than with ``@dataclass`` (whose generated ``__init__`` stays interpreted
under mypyc): this module is compiled with the rest of the RPC core
(``timebound._compiled``) because a null call makes three of these records. Compiled,
one costs about 60 ns to make instead of 0.3-0.6 µs for the interpreted frozen
dataclass it replaces, and its fields are read-only (``AttributeError``); they
unpickle through their constructor. They are not ``Generic`` in the peer type: mypyc
(2.4) compiles a generic class with a ``__weakref__`` slot it does not clear when an
instance dies, so a weak reference to one (Hypothesis keeps some) later crashes the
garbage collector (``tests/test_rpc_records.py``).
"""

from __future__ import annotations

from typing import Any, ClassVar, Final


class _Record:
    """Equality, hash, repr and pickling from the fields ``_values()`` returns, in
    the order of ``__match_args__`` (as a frozen dataclass has them)."""

    __slots__ = ()

    def _values(self) -> tuple[Any, ...]:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, _Record)
        return self._values() == other._values()

    def __ne__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, _Record)
        return self._values() != other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        names: tuple[str, ...] = getattr(type(self), "__match_args__")  # noqa: B009 (each subclass's)
        shown = ", ".join(f"{n}={v!r}" for n, v in zip(names, self._values(), strict=True))
        return f"{type(self).__name__}({shown})"

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (type(self), self._values())


class StartCall(_Record):
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


class Outgoing(_Record):
    """A datagram to send to ``peer``."""

    __slots__ = ("peer", "datagram")
    __match_args__: ClassVar[tuple[str, ...]] = ("peer", "datagram")

    def __init__(self, peer: Any, datagram: bytes) -> None:
        self.peer: Final = peer
        self.datagram: Final = datagram

    def _values(self) -> tuple[Any, ...]:
        return (self.peer, self.datagram)


class ServerOutput(_Record):
    """What one input made the server do: datagrams to send, calls to start."""

    __slots__ = ("sends", "starts")
    __match_args__: ClassVar[tuple[str, ...]] = ("sends", "starts")

    def __init__(self, sends: tuple[Outgoing, ...] = (),
                 starts: tuple[StartCall, ...] = ()) -> None:
        self.sends: Final = sends
        self.starts: Final = starts

    def _values(self) -> tuple[Any, ...]:
        return (self.sends, self.starts)


class Invocation(_Record):
    """A call to run: ``proc(args)``; then ``RpcService.complete(this, ...)``."""

    __slots__ = ("proc", "args", "start")
    __match_args__: ClassVar[tuple[str, ...]] = ("proc", "args", "start")

    def __init__(self, proc: str, args: bytes, start: StartCall) -> None:
        self.proc: Final = proc
        self.args: Final = args
        self.start: Final = start

    def _values(self) -> tuple[Any, ...]:
        return (self.proc, self.args, self.start)


class ServiceOutput(_Record):
    """Frames to send (already sealed) and procedures to run."""

    __slots__ = ("sends", "runs")
    __match_args__: ClassVar[tuple[str, ...]] = ("sends", "runs")

    def __init__(self, sends: tuple[Outgoing, ...] = (),
                 runs: tuple[Invocation, ...] = ()) -> None:
        self.sends: Final = sends
        self.runs: Final = runs

    def _values(self) -> tuple[Any, ...]:
        return (self.sends, self.runs)
