"""Slotted-FIFO channels over UDP: the asyncio drivers of ``timebound.core.channel``.

``Channel`` is the sending end (``await channel.send(data, "FR")``), ``ChannelListener``
the receiving end (``async for delivery in listener``). As in ``RpcServer``, one
``DatagramProtocol`` per endpoint hands every datagram and the clock's ``now`` (µs)
to the core, sends what it returns and re-arms one timer at ``next_deadline()``; the
opening through SCMP, sequence numbers, acknowledgments, retransmission, duplicate
suppression and slotted delivery are all the core's.

Back-pressure, both ways: ``send`` waits while the core's send window is full, and a
listener whose application stops reading (``max_queue`` deliveries waiting) drops
incoming datagrams unacknowledged (``overruns``), so the sender's window fills and
its ``send`` waits in turn. Memory stays bounded on both sides.

A listener with ``storage`` keeps SCMP's ``latest`` in that file, written off the
loop as ``RpcServer`` does: the SCMP receiver defers its refreshes
(``StableLatest(deferred=True)``) and ``_latest.LatestWriter`` writes each one in a
worker thread, reporting it back on the loop; until then openings above the last
durable ``latest`` are refused (``early``), so no accepted opening is ever above what
the file holds. A failed write is counted (``storage_errors``) and retried at the next
refresh. ``async with`` ends with ``aclose()``, which awaits the last write; the
synchronous ``close()`` waits for it in place (one write at most, on the loop's
thread). Either way a clean stop leaves the newest ``latest`` in the file.

On a hostile network (``docs/net.md``, threat model): a listener without a
key binds only loopback addresses unless ``insecure=True`` (``guard_exposure``, right
after binding, on the bound address; the socket is closed if it refuses), and
``service`` (both ends) names the listener under the HMAC tag, so a frame sealed for
one listener does not verify at another sharing the key. The listener answers only
the address a datagram came from, with at most 3x its bytes, and the cores
range-check every field on receipt (``timebound.core.channel``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
import socket
from typing import Any

from timebound.core.atmostonce import Receiver, ReceiverConfig, StableStorage
from timebound.core.channel import (
    DEFAULT_IDLE,
    DEFAULT_MAX_HELD_BYTES,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_WINDOW,
    ChannelReceiver,
    ChannelSender,
    Delivery,
)
from timebound.core.rpc import build_receiver
from timebound.core.slotted import Kind
from timebound.core.wire import FrameCodec, Outgoing
from timebound.errors import TimeboundError, UsageError
from timebound.net._clock import Clock, seconds
from timebound.net._endpoint import (
    Lifecycle,
    QueueIterator,
    Timer,
    guard_exposure,
    on_signals,
    open_datagram,
)
from timebound.net._keys import keyring
from timebound.net._latest import LatestWriter
from timebound.net._server import DEFAULT_BETA, DEFAULT_LATEST_EVERY, default_receiver
from timebound.net._stores import missing_class_files, open_store, remove_created

Address = Any
#: Most deliveries a listener queues for its application before it drops datagrams.
DEFAULT_MAX_QUEUE = 10_000


class ChannelFailed(TimeboundError):
    """The channel ended: ``reason`` is ``stale``, ``early``, ``down`` or ``overloaded``
    (the receiver refused the opening: nothing sent arrived), ``lost`` (the receiver
    answered that it no longer holds the channel: it restarted, or forgot it idle),
    ``timeout`` (no acknowledgment for ``give_up`` seconds) or ``closed``.

    ``unacknowledged``: the ids (``send``'s return values) of the reliable messages
    not acknowledged, in order: after ``lost`` or ``timeout`` each may or may not
    have arrived; every other reliable message did. ``heard_ago``: seconds since the
    receiver last answered this channel (None: it never did)."""

    def __init__(self, reason: str, unacknowledged: tuple[int, ...] = (),
                 heard_ago: float | None = None) -> None:
        self.reason = reason
        self.unacknowledged = unacknowledged
        self.heard_ago = heard_ago
        super().__init__(f"channel failed: {reason}")


def as_kind(kind: Kind | str) -> Kind:
    if isinstance(kind, Kind):
        return kind
    try:
        return Kind(kind.upper())
    except ValueError:
        raise UsageError("kind", f"must be FR, R, F or N, got {kind!r}") from None


class Channel:
    """The sending end of one slotted-FIFO channel to ``address``.

    ``async with Channel(("127.0.0.1", port)) as ch: await ch.send(b"x", "FR")``;
    leaving the block waits (``drain``) until every reliable message is acknowledged.
    ``window`` bounds the messages in flight; ``give_up`` (seconds) ends the channel
    when nothing is acknowledged for that long. ``service`` is the listener's service
    id (the same string it was given; mixed under the tag with ``key``).
    """

    def __init__(self, address: tuple[str, int], *, key: bytes | str | None = None,
                 clock: Clock | None = None, window: int = DEFAULT_WINDOW,
                 min_rto: float = 0.02, max_rto: float = 1.0, give_up: float = 10.0,
                 conn: str | None = None, drain_timeout: float = 30.0,
                 service: str = "") -> None:
        self.address = address
        self.clock = clock or Clock()
        self.conn = conn or secrets.token_hex(8)
        self.core = ChannelSender(self.conn, max(1, self.clock.now()),
                                  FrameCodec(keyring(key), service=service), window=window,
                                  min_rto=max(1, seconds(min_rto)),
                                  max_rto=max(1, seconds(max_rto)), give_up=seconds(give_up))
        self.drain_timeout = drain_timeout
        self.socket_errors = 0
        self._transport: asyncio.DatagramTransport | None = None
        self._timer = Timer(self.clock, self._on_timer)
        self._progress: asyncio.Event | None = None

    async def __aenter__(self) -> Channel:
        await self.open()
        return self

    async def __aexit__(self, exc_type: object, *exc: object) -> None:
        try:
            if exc_type is None:
                await self.drain(timeout=self.drain_timeout)
        finally:
            self.close()

    async def open(self) -> None:
        await open_datagram(self, remote=self.address)
        self._progress = asyncio.Event()

    def close(self) -> None:
        self._timer.cancel()
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        if self._progress is not None:
            self._progress.set()

    async def send(self, data: bytes, kind: Kind | str = Kind.R) -> int:
        """Send ``data`` as ``kind`` (FR, R, F, N); waits while the window is full.
        Returns the message's id (its sequence number). ``ChannelFailed`` if the
        channel ended."""
        k = as_kind(kind)
        core = self.core
        while not core.can_send():
            self._check()
            await self._wait_progress()
        self._check()
        seq, frame = core.send(bytes(data), k, now=self.clock.now())
        self._sendto(frame)
        self._timer.arm(core.next_deadline())
        return seq

    async def drain(self, timeout: float | None = None) -> None:
        """Wait until every reliable message sent is acknowledged."""
        async with asyncio.timeout(timeout):
            while self.core.unacked:
                self._check()
                await self._wait_progress()
        self._check()

    def statistics(self) -> dict[str, Any]:
        stats = dataclasses.asdict(self.core.statistics())
        stats["socket_errors"] = self.socket_errors
        return stats

    # -- internals -------------------------------------------------------------------

    def _check(self) -> None:
        core = self.core
        if core.failed is None and self._transport is not None:
            return
        heard = None if core.heard is None else max(0, self.clock.now() - core.heard) / 1e6
        raise ChannelFailed(core.failed or "closed", core.unacked_ids(), heard)

    async def _wait_progress(self) -> None:
        assert self._progress is not None, "open() first"
        self._progress.clear()
        await self._progress.wait()

    def _sendto(self, frame: bytes) -> None:
        if self._transport is not None:
            self._transport.sendto(frame)

    def _datagram(self, data: bytes, addr: Address) -> None:
        core = self.core
        before = (core.unacked, core.failed)
        core.receive(data, now=self.clock.now())
        if (core.unacked, core.failed) != before and self._progress is not None:
            self._progress.set()
        self._timer.arm(core.next_deadline())

    def _on_timer(self) -> None:
        core = self.core
        for frame in core.handle_timer(now=self.clock.now()):
            self._sendto(frame)
        if core.failed is not None and self._progress is not None:
            self._progress.set()
        self._timer.arm(core.next_deadline())


class ChannelListener(Lifecycle, QueueIterator[Delivery[Address]]):
    """The receiving end of every channel opened towards ``host:port``.

    ``async for d in listener`` yields ``Delivery`` records (``kind``, ``slot``, ``id``,
    ``data``, ``conn``, ``peer``) in slotted-FIFO order per channel. ``storage`` keeps
    SCMP's ``latest`` in a file so a restarted listener refuses replayed openings; it
    is written in a worker thread, never in a datagram's or timer's callback (module
    docstring; failed writes: ``storage_errors`` in ``statistics()``). Without
    ``storage`` it lives in memory. ``receiver`` is the SCMP receiver's
    ``ReceiverConfig`` (µs; default: fixed rho 300 s, resilient).

    Without ``key`` the listener refuses to bind a non-loopback address
    (``UsageError`` naming ``--host``) unless ``insecure``, which prints one warning
    line on stderr instead; ``service`` is its service id (channels must be given the
    same one). Memory is bounded by ``max_sessions``, ``max_queue`` deliveries and
    ``max_held_bytes`` of data held for resequencing (``timebound.core.channel``).

    ``async with listener:`` closes with ``aclose()``, which awaits the last write of
    ``latest``; ``close()`` does the same synchronously, blocking for that write.
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0,
                 key: bytes | str | None = None, previous_key: bytes | str | None = None,
                 previous_key_grace: float = 3600.0, storage: str | None = None,
                 receiver: ReceiverConfig | None = None, idle: float | None = None,
                 max_sessions: int = DEFAULT_MAX_SESSIONS, f_hold: float | None = None,
                 max_queue: int = DEFAULT_MAX_QUEUE, clock: Clock | None = None,
                 insecure: bool = False, service: str = "",
                 max_held_bytes: int = DEFAULT_MAX_HELD_BYTES) -> None:
        if max_queue < 1:
            raise UsageError("max_queue", f"must be >= 1, got {max_queue}")
        self.host = host
        self.port = port
        self.insecure = insecure
        self.clock = clock or Clock()
        now = self.clock.now()
        config = receiver or default_receiver()
        if not config.resilient:
            config = dataclasses.replace(config, resilient=True, beta=DEFAULT_BETA,
                                         latest_every=DEFAULT_LATEST_EVERY)
        assert config.beta is not None and config.latest_every is not None
        # Removed again if ``start`` cannot bind: a port in use leaves no file.
        self._created = missing_class_files(storage)
        store: StableStorage = open_store(storage, config, now=now,
                                          refused="channel openings")
        scmp = build_receiver(config, [store], start=now, deferred=storage is not None)
        assert isinstance(scmp, Receiver)  # one storage: one class
        # ``latest`` is fsynced in a worker thread, never in a datagram's callback.
        self._latest: LatestWriter | None = (
            LatestWriter([scmp], [store]) if storage is not None else None)
        ring = keyring(key, previous_key, now + seconds(previous_key_grace))
        self.core: ChannelReceiver[Address] = ChannelReceiver(
            FrameCodec(ring, service=service), scmp,
            idle=DEFAULT_IDLE if idle is None else seconds(idle),
            max_sessions=max_sessions, f_hold=None if f_hold is None else seconds(f_hold),
            start=now, max_held_bytes=max_held_bytes)
        self.max_queue = max_queue
        self.socket_errors = 0
        self.overruns = 0
        self.address: tuple[str, int] = (host, port)
        self._transport: asyncio.DatagramTransport | None = None
        self._queue: asyncio.Queue[Delivery[Address] | None] | None = None
        self._timer = Timer(self.clock, self._on_timer)
        self._closed: asyncio.Event | None = None

    async def start(self, sock: socket.socket | None = None) -> None:
        """Bind ``host:port`` and listen; or listen on ``sock``, a UDP socket already
        bound there (``channel recv`` binds before ``storage`` is opened, so a port in
        use creates no file; closed if the start fails)."""
        self._queue = asyncio.Queue()
        self._closed = asyncio.Event()
        try:
            self.address = await open_datagram(self, local=(self.host, self.port),
                                               sock=sock)
            guard_exposure(self.address[0], keyed=self.core.codec.keyring is not None,
                           insecure=self.insecure, service="channel recv")
        except BaseException:
            if self._transport is not None:
                self._transport.close()
                self._transport = None
            remove_created(self._created)
            raise
        self._created = ()
        self._timer.arm(self.core.next_deadline())

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def close(self) -> None:
        """Stop: fire due timers, close the socket, end ``async for``; with
        ``storage``, wait here (blocking the loop for one write at most) until the
        newest ``latest`` is in the file. Inside a coroutine ``await aclose()``
        waits without blocking."""
        self._stop()
        if self._latest is not None:
            self._latest.drain_now()
        if self._closed is not None:
            self._closed.set()

    async def aclose(self) -> None:
        """``close()`` that awaits the last write of ``latest`` instead of blocking."""
        self._stop()
        if self._latest is not None:
            await self._latest.drain()
        if self._closed is not None:
            self._closed.set()

    async def wait_closed(self, *, signals: bool = False) -> None:
        """Until ``close()`` (or SIGTERM/SIGINT with ``signals``)."""
        assert self._closed is not None, "start() first"
        with on_signals(self.close, signals):
            await self._closed.wait()

    def statistics(self) -> dict[str, Any]:
        stats = dataclasses.asdict(self.core.statistics())
        stats["socket_errors"] = self.socket_errors
        stats["overruns"] = self.overruns
        stats["storage_errors"] = 0 if self._latest is None else self._latest.storage_errors
        return stats

    # -- internals -------------------------------------------------------------------

    def _stop(self) -> None:
        if self._transport is None:
            return
        self.core.handle_timer(now=self.clock.now())
        self._timer.cancel()
        self._transport.close()
        self._transport = None
        if self._queue is not None:
            self._queue.put_nowait(None)

    def _datagram(self, data: bytes, addr: Address) -> None:
        queue = self._queue
        if queue is None or self._transport is None:
            return
        if queue.qsize() >= self.max_queue:
            self.overruns += 1  # unacknowledged: the sender retransmits, its window fills
            return
        out = self.core.receive(data, addr, now=self.clock.now())
        self._send(out.sends)
        for d in out.deliveries:
            queue.put_nowait(d)
        self._timer.arm(self.core.next_deadline())

    def _send(self, sends: tuple[Outgoing, ...]) -> None:
        transport = self._transport
        if transport is not None:
            for o in sends:
                transport.sendto(o.datagram, o.peer)

    def _on_timer(self) -> None:
        if self._transport is None or self._queue is None:
            return
        out = self.core.handle_timer(now=self.clock.now())
        for d in out.deliveries:
            self._queue.put_nowait(d)
        self._timer.arm(self.core.next_deadline())
