"""Stable multicast groups over UDP: the asyncio driver of ``timebound.core.group``.

``Group(group, name, members)`` binds this member's address, fans every message out
to the other members by unicast, and yields events (``Delivered``, ``Stable``,
``Joined``, ``Left``) from the core. Reliable FIFO delivery, NACKs, timestamp or
vector acks, heartbeats, null messages, release of stable messages and the section 6
join and leave rules are the core's; this driver sends what it returns and sleeps
until ``next_deadline()``. Back-pressure: ``send`` waits while the send buffer is
full (messages not yet stable); a member whose application stops reading drops
incoming datagrams once ``max_queue`` events wait (the senders' NACK recovers them).

On a real network: without a key the member binds only a loopback
address unless ``insecure=True`` (``guard_exposure``, checked on the bound address);
``service`` (1..64 UTF-8 bytes, the same at every member) goes under the HMAC tag, so
frames of one group do not verify at another sharing the key. The driver tells the
core which member's configured address a datagram came from (``source``; member
hosts are resolved once at ``start``), so a NACK is answered only when it came from
the member it names (``check_sources=False``: from anywhere, for members behind
relays such as ``FaultProxy`` that change the source address), and always to that
member's configured address: the group sends nothing to an address that is not a
member's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any

from timebound.core.group import DEFAULT_MAX_BUFFER, Event, GroupMember, GroupOutput, Stable
from timebound.core.stability import AckMode, ClockMode
from timebound.core.wire import FrameCodec
from timebound.errors import UsageError
from timebound.net._clock import Clock, seconds
from timebound.net._endpoint import (
    Lifecycle,
    QueueIterator,
    Timer,
    guard_exposure,
    open_datagram,
)
from timebound.net._keys import keyring

Address = tuple[str, int]
#: Times a leaving member sends LEAVE (datagrams may be lost).
LEAVE_COPIES = 3


class Group(Lifecycle, QueueIterator[Event]):
    """Member ``name`` of ``group``; ``members`` maps every member (this one too) to
    its UDP address. ``acks`` is ``"timestamp"`` or ``"vector"``, ``clock``
    ``"physical"`` or ``"lamport"``; periods in seconds."""

    def __init__(self, group: str, name: str, members: Mapping[str, Address], *,
                 acks: str = "timestamp", clock: str = "physical",
                 key: bytes | str | None = None, ack_every: float = 0.02,
                 nack_every: float = 0.02, dead_after: float | None = None,
                 max_buffer: int = DEFAULT_MAX_BUFFER, max_queue: int = 100_000,
                 max_skew: float = 10.0, insecure: bool = False, service: str = "",
                 check_sources: bool = True,
                 timer_clock: Clock | None = None,
                 on_event: Callable[[str, Event], None] | None = None) -> None:
        if name not in members:
            raise UsageError("NAME", f"{name!r} is not one of the members "
                                     f"{', '.join(sorted(members))}")
        try:
            ack_mode, clock_mode = AckMode(acks), ClockMode(clock)
        except ValueError as exc:
            raise UsageError("--acks/--clock", str(exc)) from None
        self.clock = timer_clock or Clock()
        self.name = name
        self.addresses = dict(members)
        now = self.clock.now()
        self.insecure = insecure
        self.core = GroupMember(
            group, name, members, FrameCodec(keyring(key), service),
            incarnation=time.time_ns() // 1000, max_skew=max(0, seconds(max_skew)),
            check_sources=check_sources,
            acks=ack_mode, clock=clock_mode, ack_every=max(1, seconds(ack_every)),
            nack_every=max(1, seconds(nack_every)),
            dead_after=None if dead_after is None else max(1, seconds(dead_after)),
            max_buffer=max_buffer, now=now)
        self.max_queue = max_queue
        self.on_event = on_event
        self.socket_errors = 0
        self.overruns = 0
        self.address: Address = self.addresses[name]
        self._transport: asyncio.DatagramTransport | None = None
        self._queue: asyncio.Queue[Event | None] | None = None
        self._timer = Timer(self.clock, self._on_timer)
        self._progress: asyncio.Event | None = None
        self._sources: dict[tuple[str, int], str] = {}
        self._resolved: dict[tuple[str, int], str] = {}
        self._sources_of: dict[str, Address] = {}

    async def start(self) -> None:
        self._queue = asyncio.Queue()
        self._progress = asyncio.Event()
        self.address = await open_datagram(self, local=self.address)
        try:
            guard_exposure(self.address[0], keyed=self.core.codec.keyring is not None,
                           insecure=self.insecure, service="group")
        except BaseException:
            self.close(leave=False)
            raise
        await self.resolve_members()
        self._timer.arm(self.core.next_deadline())

    async def resolve_members(self) -> None:
        """Map every member's configured address (numeric, as datagrams arrive from
        it) to its name. Addresses given as IP literals are mapped again whenever
        ``addresses`` changes; call this again after changing a host name."""
        loop = asyncio.get_running_loop()
        sources: dict[tuple[str, int], str] = {}
        for member, (host, port) in self.addresses.items():
            if member == self.name:
                continue
            try:
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
            except (OSError, UnicodeError):
                continue
            for info in infos:
                sockaddr = info[4]
                sources[(str(sockaddr[0]), int(sockaddr[1]))] = member
        self._resolved = sources
        self._sources_of = {}
        self._source(None)

    def _source(self, addr: Any) -> str | None:
        """The member whose configured address ``addr`` is (None: none)."""
        if self._sources_of != self.addresses:
            sources = dict(self._resolved)
            for member, (host, port) in self.addresses.items():
                try:
                    literal = str(ipaddress.ip_address(host))
                except ValueError:
                    continue
                if member != self.name:
                    sources[(literal, int(port))] = member
            self._sources = sources
            self._sources_of = dict(self.addresses)
        if not isinstance(addr, tuple) or len(addr) < 2:
            return None
        return self._sources.get((str(addr[0]), int(addr[1])))

    def close(self, *, leave: bool = True) -> None:
        """Leave the group (LEAVE to every member) and close the socket."""
        if self._transport is None:
            return
        if leave:
            out = self.core.leave(now=self.clock.now())
            for _ in range(LEAVE_COPIES):
                self._send(out)
        self._timer.cancel()
        self._transport.close()
        self._transport = None
        if self._queue is not None:
            self._queue.put_nowait(None)
        if self._progress is not None:
            self._progress.set()

    async def send(self, data: bytes) -> int:
        """Multicast ``data`` (waits while the send buffer is full); its sequence number."""
        while not self.core.can_send():
            await self._wait_progress()
        if self._transport is None:
            raise UsageError("group", "the member is closed")
        seq = self.core.next_seq
        out = self.core.send(bytes(data), now=self.clock.now())
        self._handle(out)
        return seq

    async def wait_stable(self, timeout: float | None = None) -> None:
        """Until every message this member sent is stable (its send buffer is empty)."""
        async with asyncio.timeout(timeout):
            while self.core.buffered:
                await self._wait_progress()

    async def wait_members(self, count: int, timeout: float | None = None) -> None:
        """Until ``count`` members (this one included) have been heard from."""
        async with asyncio.timeout(timeout):
            while 1 + sum(1 for p in self.core.peers.values() if p.inc is not None) < count:
                await self._wait_progress()

    def statistics(self) -> dict[str, Any]:
        stats = dataclasses.asdict(self.core.statistics())
        stats["socket_errors"] = self.socket_errors
        stats["overruns"] = self.overruns
        return stats

    # -- internals ---------------------------------------------------------------------

    async def _wait_progress(self) -> None:
        assert self._progress is not None, "start() first"
        if self._transport is None:
            raise UsageError("group", "the member is closed")
        self._progress.clear()
        await self._progress.wait()

    def _send(self, out: GroupOutput) -> None:
        transport = self._transport
        if transport is None:
            return
        for dest, frame in out.sends:
            address = self.addresses.get(dest)
            if address is not None:
                transport.sendto(frame, address)

    def _handle(self, out: GroupOutput) -> None:
        self._send(out)
        if out.events:
            queue = self._queue
            for event in out.events:
                if self.on_event is not None:
                    self.on_event(self.name, event)
                if queue is not None:
                    queue.put_nowait(event)
            if self._progress is not None and any(isinstance(e, Stable) for e in out.events):
                self._progress.set()
        self._timer.arm(self.core.next_deadline())

    def _datagram(self, data: bytes, addr: Any) -> None:
        queue = self._queue
        if queue is None or self._transport is None:
            return
        if queue.qsize() >= self.max_queue:
            self.overruns += 1
            return
        self._handle(self.core.receive(data, now=self.clock.now(),
                                       source=self._source(addr)))
        if self._progress is not None:
            self._progress.set()

    def _on_timer(self) -> None:
        if self._transport is None:
            return
        self._handle(self.core.handle_timer(now=self.clock.now()))
