"""Stable multicast groups over UDP: the asyncio driver of ``timebound.core.group``.

``Group(group, name, members)`` binds this member's address, fans every message out
to the other members by unicast, and yields events (``Delivered``, ``Stable``,
``Joined``, ``Left``) from the core. Reliable FIFO delivery, NACKs, timestamp or
vector acks, heartbeats, null messages, release of stable messages and the section 6
join and leave rules are the core's; this driver sends what it returns and sleeps
until ``next_deadline()``. Back-pressure: ``send`` waits while the send buffer is
full (messages not yet stable); a member whose application stops reading drops
incoming datagrams once ``max_queue`` events wait (the senders' NACK recovers them).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any

from timebound.core.group import DEFAULT_MAX_BUFFER, Event, GroupMember, GroupOutput, Stable
from timebound.core.stability import AckMode, ClockMode
from timebound.core.wire import FrameCodec
from timebound.errors import UsageError
from timebound.net._clock import Clock, seconds
from timebound.net._endpoint import Lifecycle, QueueIterator, Timer, open_datagram
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
        self.core = GroupMember(
            group, name, members, FrameCodec(keyring(key)), incarnation=time.time_ns() // 1000,
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

    async def start(self) -> None:
        self._queue = asyncio.Queue()
        self._progress = asyncio.Event()
        self.address = await open_datagram(self, local=self.address)
        self._timer.arm(self.core.next_deadline())

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
        self._handle(self.core.receive(data, now=self.clock.now()))
        if self._progress is not None:
            self._progress.set()

    def _on_timer(self) -> None:
        if self._transport is None:
            return
        self._handle(self.core.handle_timer(now=self.clock.now()))
