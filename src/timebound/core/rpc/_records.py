"""The generic records of the RPC server and the live service: what a datagram makes
them do (``StartCall``, ``Outgoing``, ``ServerOutput``; ``Invocation``,
``ServiceOutput``), parameterised by the peer type ``P``.

Kept apart from ``_server`` and ``_live`` (which the mypyc build compiles:
``timebound._compiled``) so that these stay plain Python classes: mypyc cannot build
a dataclass that is also ``Generic`` (mypyc/mypyc#827: the module fails at import).
``_server`` and ``_live`` re-export them under their old names; a driver may subclass
them and they pickle as usual. Their meaning is documented where they are made:
``_server`` (Fig. 3-1) and ``_live`` (the live service).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

P = TypeVar("P", bound=Hashable)


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
class Invocation(Generic[P]):
    """A call to run: ``proc(args)``; then ``RpcService.complete(this, ...)``."""

    proc: str
    args: bytes
    start: StartCall[P]


@dataclass(frozen=True, slots=True)
class ServiceOutput(Generic[P]):
    """Frames to send (already sealed) and procedures to run."""

    sends: tuple[Outgoing[P], ...] = ()
    runs: tuple[Invocation[P], ...] = ()
