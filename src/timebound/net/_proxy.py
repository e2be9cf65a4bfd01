"""``FaultProxy``: a UDP relay that loses, duplicates, delays and reorders datagrams.

Generic (it never parses a frame), so every live protocol can be tested through it.
Each client address gets its own upstream socket, so the server's answers find
their way back; both directions suffer the same faults. Randomness comes from one
seeded ``random.Random``: a run is reproducible up to the OS's timing.
``timebound net proxy`` runs one from the command line.

The proxy has no key and relays whatever reaches it to its upstream (to anyone on
the network, an open relay that hides the sender): like every service without a key
it binds only loopback addresses unless ``insecure=True`` (``--insecure``), and then
prints one warning line (``guard_exposure``; pinned by
``tests/test_net_cli_hostile.py::test_proxy_refuses_a_public_address_without_insecure``).

No amplification: the proxy duplicates on request, and its upstream
answers each copy, so a relayed address could get several times what it sent. It
never sends a client address more than ``AMPLIFICATION`` (3) times the bytes it
received from that address: a datagram that would pass the budget is dropped and
counted ``capped`` (to the client it is one more loss). The proxy cannot tell an
address that proved it receives from a forged one (it never parses a frame), so the
cap also drops a validated client's large answers (an RPC's large reply, a pub-sub
subscriber's stream). ``capped=False`` (``--uncapped``) lifts the cap for loopback
clients only, for tests of such flows on one machine; a client that is not loopback
is always capped. Pinned by ``tests/test_rpc_hostile.py::test_proxy_*``.
"""

from __future__ import annotations

import asyncio
import random
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, cast

from timebound.errors import UsageError
from timebound.net._endpoint import Lifecycle, guard_exposure, is_loopback

#: Most client addresses relayed at once (the oldest is dropped beyond it).
MAX_PEERS = 4096
#: Most bytes sent to a capped client address per byte received from it.
AMPLIFICATION = 3


@dataclass(frozen=True, slots=True)
class Faults:
    """Per-datagram fault probabilities and delays (seconds)."""

    loss: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0
    delay: float = 0.0
    jitter: float = 0.0
    reorder_delay: float = 0.005

    def __post_init__(self) -> None:
        for name in ("loss", "duplicate", "reorder"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise UsageError(f"--{name}", f"must be in [0, 1], got {value}")
        for name in ("delay", "jitter", "reorder_delay"):
            value = getattr(self, name)
            if not 0.0 <= value <= 60.0:
                raise UsageError(f"--{name.replace('_', '-')}", f"must be in [0, 60] s, got {value}")


@dataclass
class ProxyStatistics:
    received: int = 0
    forwarded: int = 0
    lost: int = 0
    duplicated: int = 0
    reordered: int = 0
    capped: int = 0


class _Side(asyncio.DatagramProtocol):
    def __init__(self, proxy: FaultProxy, peer: Any | None) -> None:
        self.proxy = proxy
        self.peer = peer  # None: the listening side
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: Any) -> None:
        if self.peer is None:
            self.proxy._from_client(data, addr)
        else:
            self.proxy._from_server(data, self.peer)

    def error_received(self, exc: Exception) -> None:
        pass


class FaultProxy(Lifecycle):
    """``async with FaultProxy(listen, upstream, Faults(...), seed=0) as proxy``:
    clients talk to ``proxy.address``."""

    def __init__(self, upstream: tuple[str, int], faults: Faults, *,
                 host: str = "127.0.0.1", port: int = 0, seed: int = 0,
                 insecure: bool = False, capped: bool = True) -> None:
        self.upstream = upstream
        self.faults = faults
        self.host = host
        self.port = port
        self.insecure = insecure
        self.capped = capped
        # client address -> [bytes received from it, bytes sent to it] (capped ones)
        self._budgets: OrderedDict[Any, list[int]] = OrderedDict()
        self.random = random.Random(seed)
        self.stats = ProxyStatistics()
        self.address: tuple[str, int] = (host, port)
        self._listen: _Side | None = None
        self._peers: OrderedDict[Any, _Side] = OrderedDict()
        self._pending: dict[Any, list[bytes]] = {}

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        _, side = await loop.create_datagram_endpoint(
            lambda: _Side(self, None), local_addr=(self.host, self.port))
        assert side.transport is not None
        name = side.transport.get_extra_info("sockname")
        try:
            guard_exposure(name[0], keyed=False, insecure=self.insecure,
                           service="net proxy")
        except BaseException:
            side.transport.close()
            raise
        self._listen = side
        self.address = (name[0], name[1])

    def close(self) -> None:
        for side in list(self._peers.values()) + ([self._listen] if self._listen else []):
            if side.transport is not None:
                side.transport.close()
        self._peers.clear()

    def _caps(self, addr: Any) -> bool:
        return self.capped or not is_loopback(str(addr[0]))

    def _from_client(self, data: bytes, addr: Any) -> None:
        if self._caps(addr):
            budget = self._budgets.get(addr)
            if budget is None:
                budget = self._budgets[addr] = [0, 0]
                while len(self._budgets) > MAX_PEERS:
                    self._budgets.popitem(last=False)
            budget[0] += len(data)
        side = self._peers.get(addr)
        if side is None:
            pending = self._pending.get(addr)
            if pending is not None:
                pending.append(data)
                return
            self._pending[addr] = [data]
            asyncio.ensure_future(self._open_upstream(addr))
            return
        self._peers.move_to_end(addr)
        self._relay(data, side.transport, None)

    async def _open_upstream(self, addr: Any) -> None:
        loop = asyncio.get_running_loop()
        _, side = await loop.create_datagram_endpoint(
            lambda: _Side(self, addr), remote_addr=self.upstream)
        self._peers[addr] = side
        while len(self._peers) > MAX_PEERS:
            _, old = self._peers.popitem(last=False)
            if old.transport is not None:
                old.transport.close()
        for data in self._pending.pop(addr, []):
            self._relay(data, side.transport, None)

    def _from_server(self, data: bytes, peer: Any) -> None:
        if self._listen is not None:
            self._relay(data, self._listen.transport, peer)

    def _relay(self, data: bytes, transport: asyncio.DatagramTransport | None,
               addr: Any | None) -> None:
        if transport is None:
            return
        f, rng, stats = self.faults, self.random, self.stats
        stats.received += 1
        if f.loss and rng.random() < f.loss:
            stats.lost += 1
            return
        copies = 1
        if f.duplicate and rng.random() < f.duplicate:
            copies = 2
            stats.duplicated += 1
        loop = asyncio.get_running_loop()
        budget = None if addr is None else self._budgets.get(addr)
        if budget is None and addr is not None and self._caps(addr):
            budget = [0, 0]  # forgotten (beyond MAX_PEERS): nothing more goes to it
        for _ in range(copies):
            if budget is not None:
                if budget[1] + len(data) > AMPLIFICATION * budget[0]:
                    stats.capped += 1
                    continue
                budget[1] += len(data)
            delay = f.delay + (rng.random() * f.jitter if f.jitter else 0.0)
            if f.reorder and rng.random() < f.reorder:
                delay += f.reorder_delay * (0.5 + rng.random())
                stats.reordered += 1
            stats.forwarded += 1
            if delay <= 0.0:
                _sendto(transport, data, addr)
            else:
                loop.call_later(delay, _sendto, transport, data, addr)


def _sendto(transport: asyncio.DatagramTransport, data: bytes, addr: Any | None) -> None:
    if not transport.is_closing():
        transport.sendto(data, addr)
