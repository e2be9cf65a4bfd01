"""The asyncio plumbing every UDP driver of the net package shares.

A driver (``Channel``, ``ChannelListener``, ``Group``, the pub-sub endpoints) owns one
datagram socket: ``DatagramProtocol`` hands the driver its transport
(``owner._transport``), every datagram (``owner._datagram(data, addr)``) and counts
socket errors (``owner.socket_errors``); ``open_datagram`` creates that socket bound
(``local``) or connected (``remote``), or wraps one already bound (``sock``), and
returns its local address. ``udp_socket`` is the non-blocking socket of the drivers
that read theirs with ``loop.add_reader`` (``RpcServer``, ``RpcClient``).

Binding a listener: ``bind_udp(host, port)`` binds a socket the way
``create_datagram_endpoint(local_addr=...)`` does (each address ``host`` resolves to,
in turn) but keeps the system's error (uvloop replaces it by "could not bind to
local_addr", the errno only on its cause; ``bind_errno`` finds it on either). A
listener with stable storage is bound *before* its storage is opened: the command
line binds with ``bind_udp`` and hands the socket to ``start(sock=...)``
(``RpcServer``, ``ChannelListener``), so a port in use or an address that is not this
machine's is one line and creates no storage file
(``tests/test_net_keys_ports.py``). ``Timer`` is the one loop timer a driver re-arms at
its core's ``next_deadline()``; ``on_signals`` calls back on SIGTERM and SIGINT while a
block runs (a server or a command stops cleanly).

``guard_exposure`` is the secure default every service applies once bound (Redis's
protected mode): without a key a service listens only on loopback addresses; any
other address needs ``insecure=True`` (``--insecure``) and then prints one warning
line on stderr.

``Lifecycle`` gives ``async with driver:`` (``start()`` on entry, ``close()`` on exit)
and ``QueueIterator`` the ``async for item in driver`` of a driver that queues what its
core delivers (``None`` in the queue means closed; it stays there for every later
reader).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Generic, Self, TypeVar, cast

from timebound.errors import UsageError

T = TypeVar("T")


def is_loopback(host: str) -> bool:
    """Whether the bound address ``host`` (an IP literal, as ``getsockname`` gives
    it) is a loopback address: 127.0.0.0/8, ::1 or an IPv4-mapped loopback."""
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


def is_ip_literal(host: str) -> bool:
    """Whether ``host`` is an IP address rather than a name."""
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def guard_exposure(host: str, *, keyed: bool, insecure: bool, service: str) -> None:
    """Refuse to serve ``service`` without a key on a non-loopback address unless
    ``insecure``; then say so once on stderr. ``host`` is the bound address (what
    ``getsockname`` gives), so a name that resolves to a public address is caught.
    Raises ``UsageError`` naming ``--host``: the caller closes its socket."""
    if keyed or is_loopback(host):
        return
    if not insecure:
        raise UsageError(
            "--host", f"{service} would listen on {host} without a key: anyone who can "
            "reach it can forge and replay its frames. Give --key-file (see 'timebound "
            "key new'), bind 127.0.0.1, or pass --insecure to accept the risk")
    print(f"timebound: warning: {service} listens on {host} without a key (--insecure): "
          "frames are not authenticated; anyone who can reach it can forge them "
          "(docs/net.md, threat model)", file=sys.stderr, flush=True)


class Timer:
    """One loop timer armed at an absolute core deadline (ticks of ``clock``, by
    default µs)."""

    def __init__(self, clock: Any, fire: Any, ticks_per_second: float = 1e6) -> None:
        self.clock = clock
        self.fire = fire
        self.rate = ticks_per_second
        self.handle: asyncio.TimerHandle | None = None
        self.armed: int | None = None

    def arm(self, deadline: int | None) -> None:
        if deadline == self.armed and (deadline is None or self.handle is not None):
            return
        self.cancel()
        self.armed = deadline
        if deadline is None:
            return
        loop = asyncio.get_running_loop()
        delay = max(0.0, (deadline - self.clock.now()) / self.rate)
        self.handle = loop.call_at(loop.time() + delay, self._fire)

    def _fire(self) -> None:
        self.handle = None
        self.armed = None
        self.fire()

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
        self.handle = None
        self.armed = None


def udp_socket(family: int, bind: Any = None, connect: Any = None) -> socket.socket:
    """A non-blocking UDP socket of ``family``, bound to ``bind`` and/or connected to
    ``connect`` (closed again if either fails)."""
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        sock.setblocking(False)
        if bind is not None:
            sock.bind(bind)
        if connect is not None:
            sock.connect(connect)
    except BaseException:
        sock.close()
        raise
    return sock


async def bind_udp(host: str, port: int) -> socket.socket:
    """A non-blocking UDP socket bound to ``(host, port)``, trying each address the
    host resolves to in turn (as ``create_datagram_endpoint(local_addr=...)`` does);
    the last ``OSError`` when none binds, with its errno (``bind_errno``)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
    error: OSError = OSError(errno.EADDRNOTAVAIL, f"getaddrinfo({host!r}) returned nothing")
    for family, _kind, _proto, _name, sockaddr in infos:
        try:
            return udp_socket(family, bind=sockaddr)
        except OSError as exc:
            error = exc
    raise error


def bind_errno(exc: BaseException) -> int | None:
    """The errno of a failed bind: ``exc``'s own or, when a loop replaced the
    system's error by its own (uvloop), that of its cause or context."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno is not None:
            return int(current.errno)
        current = current.__cause__ or current.__context__
    return None


class DatagramProtocol(asyncio.DatagramProtocol):
    """Hands ``owner`` its transport, its datagrams and its socket errors."""

    def __init__(self, owner: Any) -> None:
        self.owner = owner

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.owner._transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.owner._datagram(data, addr)

    def error_received(self, exc: Exception) -> None:
        self.owner.socket_errors += 1


async def open_datagram(owner: Any, local: tuple[str, int] | None = None,
                        remote: Any = None, sock: socket.socket | None = None
                        ) -> tuple[str, int]:
    """``owner``'s socket, bound to ``local`` and/or connected to ``remote``, or
    ``sock`` (already bound: ``bind_udp``); its local address (the port the system
    chose for port 0). A socket bound only to ``local`` is bound by ``bind_udp``, so
    a failure keeps the system's errno on any loop. The socket is closed if the
    transport cannot be made."""
    loop = asyncio.get_running_loop()
    if sock is None and local is not None and remote is None:
        sock = await bind_udp(local[0], local[1])
    try:
        if sock is not None:
            transport, _ = await loop.create_datagram_endpoint(
                lambda: DatagramProtocol(owner), sock=sock)
        else:
            transport, _ = await loop.create_datagram_endpoint(
                lambda: DatagramProtocol(owner), local_addr=local, remote_addr=remote)
    except BaseException:
        if sock is not None:
            sock.close()
        raise
    name = transport.get_extra_info("sockname")
    return (name[0], name[1])


@contextlib.contextmanager
def on_signals(callback: Callable[[], object], enabled: bool = True) -> Iterator[None]:
    """``callback()`` on SIGTERM and SIGINT while the block runs (nothing unless
    ``enabled``); on leaving it, the handlers from before it are back (the loop's
    ``remove_signal_handler`` alone would leave SIGTERM's default, which kills the
    process before its cleanup)."""
    loop = asyncio.get_running_loop()
    signals = (signal.SIGTERM, signal.SIGINT) if enabled else ()
    previous = {sig: signal.getsignal(sig) for sig in signals}
    for sig in signals:
        loop.add_signal_handler(sig, callback)
    try:
        yield
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
            if previous[sig] is not None:  # None: set outside Python, left as it is
                signal.signal(sig, previous[sig])


async def until_signal(stop: asyncio.Event | None = None) -> None:
    """Until SIGTERM, SIGINT or ``stop`` is set."""
    stop = stop if stop is not None else asyncio.Event()
    with on_signals(stop.set):
        await stop.wait()


class Lifecycle:
    """``async with x:`` runs ``x.start()`` and, on leaving, ``x.close()``."""

    async def start(self) -> None:  # pragma: no cover - every driver defines it
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover - every driver defines it
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class QueueIterator(Generic[T]):
    """``get()`` and ``async for`` over ``self._queue`` (``start()`` makes it)."""

    _queue: asyncio.Queue[T | None] | None

    async def get(self) -> T:
        """The next item; ``StopAsyncIteration`` once closed."""
        assert self._queue is not None, "start() first"
        item = await self._queue.get()
        if item is None:
            self._queue.put_nowait(None)
            raise StopAsyncIteration
        return item

    def __aiter__(self) -> AsyncIterator[T]:
        return self

    async def __anext__(self) -> T:
        return await self.get()
