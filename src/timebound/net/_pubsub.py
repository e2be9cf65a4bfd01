"""Causal pub-sub over UDP: the asyncio drivers of ``timebound.core.pubsub``.

``Publisher`` multicasts stamped messages to replicated mergers, ``MergerServer``
merges (``upstream``: lower-level mergers it subscribes to, for a two-level
hierarchy) and forwards to subscribers, ``SubscriberClient`` yields deliveries with a
running digest. Times are milliseconds (``MsClock``: the system clock in ms with an
injectable offset, never backwards). Every rule is the core's; these only move
datagrams and sleep until ``next_deadline()``.

On a real network: a ``MergerServer`` without a key binds only loopback
addresses unless ``insecure=True`` (``guard_exposure`` on the bound address); it
draws a random 32-byte secret for the core's address-validation tokens (a SUB takes
a lease only with a token the merger sent to that address; ``SubscriberClient`` and
an upper merger echo it by themselves); ``service`` (servers and clients alike) goes
under the HMAC tag. Peers are keyed by ``(host, port)``; ``upstream`` hosts are
resolved once at ``start`` so a lower merger's CHAL is recognized.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import secrets
import socket
import time
from collections.abc import Callable, Sequence
from typing import Any

from timebound.core.causal import Timestamp
from timebound.core.pubsub import (
    MAX_SUBSCRIBERS,
    MergerNode,
    Published,
    Subscriber,
    SubscriberDelivery,
    SubscriberOutput,
)
from timebound.core.pubsub import Publisher as PublisherCore
from timebound.core.wire import FrameCodec
from timebound.net._endpoint import (
    Lifecycle,
    QueueIterator,
    Timer,
    guard_exposure,
    open_datagram,
)
from timebound.net._keys import keyring

Address = tuple[str, int]
#: An upper merger renews its subscription to lower ones this often, seconds.
RENEW_SECONDS = 1.0


class MsClock:
    """The system clock in milliseconds (+ ``offset`` ms), never going backwards."""

    def __init__(self, offset: int = 0, source: Callable[[], int] = time.time_ns) -> None:
        self.offset = offset
        self._source = source
        self._last = 0

    def now(self) -> int:
        t = self._source() // 1_000_000 + self.offset
        if t < self._last:
            return self._last
        self._last = t
        return t


class _Endpoint(Lifecycle):
    def __init__(self, clock: MsClock | None) -> None:
        self.clock = clock or MsClock()
        self.socket_errors = 0
        self._transport: asyncio.DatagramTransport | None = None
        self._timer = Timer(self.clock, self._on_timer, ticks_per_second=1000.0)

    async def _open(self, local: Address | None = None, remote: Address | None = None
                    ) -> Address:
        return await open_datagram(self, local=local, remote=remote)

    def _sendto(self, frame: bytes, address: Any) -> None:
        if self._transport is not None:
            self._transport.sendto(frame, address)

    def _datagram(self, data: bytes, addr: Any) -> None:  # pragma: no cover - overridden
        pass

    def _on_timer(self) -> None:  # pragma: no cover - overridden
        pass

    def close(self) -> None:
        self._timer.cancel()
        if self._transport is not None:
            self._transport.close()
            self._transport = None


def _local_host(peers: Sequence[Address]) -> str:
    """The address a sending socket binds: loopback when every peer is on loopback (a
    local publisher is then unreachable from the network), else every interface of the
    peers' family."""
    v6 = ":" in peers[0][0]
    try:
        local = all(ipaddress.ip_address(host).is_loopback for host, *_ in peers)
    except ValueError:  # a host name
        local = False
    if local:
        return "::1" if v6 else "127.0.0.1"
    return "::" if v6 else "0.0.0.0"


class Publisher(_Endpoint):
    """``async with Publisher(name, [merger addresses], epsilon=, delta=) as p:
    await p.publish(b"...")``; ε, δ in ms."""

    def __init__(self, name: str, mergers: Sequence[Address], *, epsilon: int, delta: int,
                 n: int = 64, key: bytes | str | None = None, clock: MsClock | None = None,
                 service: str = "") -> None:
        super().__init__(clock)
        self.core = PublisherCore(name, epsilon, delta, n, FrameCodec(keyring(key), service))
        self.mergers = list(mergers)

    async def start(self) -> None:
        await self._open(local=(_local_host(self.mergers), 0))

    async def publish(self, data: bytes) -> tuple[int, Timestamp]:
        """Stamp and send ``data`` to every merger (at most one per ms: waits)."""
        core = self.core
        while self.clock.now() < core.ready_at():
            await asyncio.sleep(0.0005)
        msg, stamp, frame = core.publish(bytes(data), now=self.clock.now())
        for address in self.mergers:
            self._sendto(frame, address)
        return msg, stamp

    def observe(self, stamp: Timestamp) -> None:
        """This publisher read a message stamped ``stamp`` (what it publishes next
        causally follows it)."""
        self.core.observe(stamp, now=self.clock.now())


class MergerServer(_Endpoint):
    """A causal deterministic merger of ``ds(epsilon, delta)`` on ``host:port``.
    ``upstream``: lower-level mergers to subscribe to (then ``delta`` is theirs + 3ε)."""

    def __init__(self, name: str, *, epsilon: int, delta: int, n: int = 64,
                 host: str = "127.0.0.1", port: int = 0, key: bytes | str | None = None,
                 upstream: Sequence[Address] = (), clock: MsClock | None = None,
                 on_deliver: Callable[[Published], None] | None = None,
                 insecure: bool = False, service: str = "",
                 max_subscribers: int = MAX_SUBSCRIBERS) -> None:
        super().__init__(clock)
        codec = FrameCodec(keyring(key), service)
        self.insecure = insecure
        self.core: MergerNode[Any] = MergerNode(
            name, epsilon, delta, n, codec, max_subscribers=max_subscribers,
            secret=secrets.token_bytes(32))
        self.host, self.port = host, port
        self.address: Address = (host, port)
        self.upstream = list(upstream)
        self.on_deliver = on_deliver
        self._renew: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.address = await self._open(local=(self.host, self.port))
        try:
            guard_exposure(self.address[0], keyed=self.core.codec.keyring is not None,
                           insecure=self.insecure, service="pubsub merge")
        except BaseException:
            self.close()
            raise
        if self.upstream:
            loop = asyncio.get_running_loop()
            resolved: list[Address] = []
            for host, port in self.upstream:
                for info in await loop.getaddrinfo(host, port, type=socket.SOCK_DGRAM):
                    address = (str(info[4][0]), int(info[4][1]))
                    if address not in resolved:
                        resolved.append(address)
            self.upstream = resolved
            self.core.upstream = set(resolved)
            self._renew = asyncio.ensure_future(self._subscribe_upstream())

    def close(self) -> None:
        if self._renew is not None:
            self._renew.cancel()
        super().close()

    def statistics(self) -> dict[str, Any]:
        stats = dataclasses.asdict(self.core.statistics())
        stats["socket_errors"] = self.socket_errors
        return stats

    async def _subscribe_upstream(self) -> None:
        while self._transport is not None:
            for address in self.upstream:
                self._sendto(self.core.upstream_subscription(address), address)
            await asyncio.sleep(RENEW_SECONDS)

    def _handle(self, sends: tuple[tuple[Any, bytes], ...],
                delivered: tuple[Published, ...]) -> None:
        for peer, frame in sends:
            self._sendto(frame, peer)
        if self.on_deliver is not None:
            for message in delivered:
                self.on_deliver(message)
        self._timer.arm(self.core.next_deadline())

    def _datagram(self, data: bytes, addr: Any) -> None:
        peer = (str(addr[0]), int(addr[1]))  # one key per source, v4 or v6
        out = self.core.receive(data, peer, now=self.clock.now())
        self._handle(out.sends, out.delivered)

    def _on_timer(self) -> None:
        if self._transport is None:
            return
        out = self.core.handle_timer(now=self.clock.now())
        self._handle(out.sends, out.delivered)


class SubscriberClient(_Endpoint, QueueIterator[SubscriberDelivery]):
    """Subscribes to the merger at ``merger``; ``async for d in sub`` yields
    ``SubscriberDelivery`` (proc, msg, stamp, data, digest) in the merger's order."""

    def __init__(self, merger: Address, *, name: str | None = None,
                 key: bytes | str | None = None, gap_wait: int = 50,
                 clock: MsClock | None = None, service: str = "") -> None:
        super().__init__(clock)
        self.merger = merger
        self.core = Subscriber(name or "sub-" + secrets.token_hex(4),
                               FrameCodec(keyring(key), service), gap_wait=gap_wait,
                               now=self.clock.now())
        self._queue: asyncio.Queue[SubscriberDelivery | None] | None = None

    async def start(self) -> None:
        self._queue = asyncio.Queue()
        await self._open(remote=self.merger)
        self._on_timer()  # subscribes at once

    def close(self) -> None:
        self.core.leave()  # no renewal after this (the merger's lease lapses)
        super().close()
        if self._queue is not None:
            self._queue.put_nowait(None)

    def statistics(self) -> dict[str, Any]:
        stats = dataclasses.asdict(self.core.statistics())
        stats["digest"] = self.core.digest
        return stats

    def _act(self, out: SubscriberOutput) -> None:
        if self._transport is not None:
            for frame in out.sends:
                self._transport.sendto(frame)
        if self._queue is not None:
            for d in out.delivered:
                self._queue.put_nowait(d)
        self._timer.arm(self.core.next_deadline())

    def _datagram(self, data: bytes, addr: Any) -> None:
        self._act(self.core.receive(data, now=self.clock.now()))

    def _on_timer(self) -> None:
        if self._transport is None:
            return
        self._act(self.core.handle_timer(now=self.clock.now()))
