"""``RpcClient``: the asyncio driver of ``timebound.core.rpc.RpcCaller``.

One UDP socket per client, many outstanding calls on it: each call takes an idle
connection id ``<client id>.<uid>`` (client id: 64 random bits in hex, made once per
client; uid: a counter) and gives it back when the call ends, so a client calling
sequentially reuses one connection, as SunRPC's single-threaded client does in the
paper. The core decides timestamps (never backwards, unique per connection),
retransmissions, truncation after an ACK and REPLY-ACKs; this driver only sends what
it returns and re-arms one timer at ``next_deadline()``.

A call's timeout is also its deadline at the server: the CALL carries a budget a
little shorter (``RpcCaller.budget_ms``: the timeout less a tenth of it, at most
five first retransmission intervals), and the server never starts the call after
it, answering ``expired`` (``CallRejected``, ``ran`` False with a key) in time to
arrive before the timeout; a server with no room to queue the call refuses it
``overloaded`` at once. So a call that could not run in time ends with a refusal
that says it did not run, not with a ``CallTimeout`` whose outcome is unknown.

Per call the driver makes one future and no timer: a call's timeout is a deadline
kept beside the core's, and the one timer (re-armed only when a deadline comes
earlier than the one it is armed for, as aioquic does) fires at the earliest of
them. A wake-up with nothing due is harmless.

Opening and closing are cheap, since a client making one call (the paper's Fig.
3-3) pays them once per call: the socket is a non-blocking socket connected to the
server and read by ``loop.add_reader`` (no transport, protocol or waiter: no loop
iteration spent on set-up; asyncio and uvloop alike); a numeric address needs no
resolver; the client id's random bits come from a per-process pool of
``os.urandom`` bytes (refilled in a forked child); the retransmission policy of
the same options is made once. A datagram the socket cannot take right now waits
for it to be writable, as a transport's buffer would; an ICMP error (the server is
down) is counted in ``socket_errors`` and retransmissions go on.

Compiled with mypyc alongside the core when built, as ``_server`` is (the loop held as
``Any`` for the same reason).
"""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any

from timebound.core.rpc import (
    Answered,
    CallerOutput,
    Policy,
    Rejected,
    RpcCaller,
    Status,
)
from timebound.core.wire import FrameCodec
from timebound.errors import ProtocolUsageError, UsageError
from timebound.net._clock import Clock, seconds
from timebound.net._endpoint import udp_socket
from timebound.net._errors import CallRejected, CallTimeout, RemoteError
from timebound.net._keys import keyring
from timebound.net._loop import running_loop

#: Default retransmission schedule: 20 ms, doubling, at most 1 s apart.
DEFAULT_INTERVAL = 0.02
DEFAULT_MAX_INTERVAL = 1.0
#: A REPLY-ACK waits this long for a next call on its connection that makes it moot.
DEFAULT_REPLY_ACK_DELAY = 0.05
#: Replies shorter than this (result bytes, status included) get no REPLY-ACK: the
#: hint would cost more than the stored bytes it lets the server drop early.
DEFAULT_REPLY_ACK_MIN_BYTES = 64


_EXPIRED = Status.EXPIRED
_OK = Status.OK  # a global: an enum member read through its class costs several times more

#: Most times ``call(..., retry_refused=True)`` issues a refused call again.
MAX_REFUSED_RETRIES = 16

#: Largest datagram read (the UDP limit).
_RECV_BYTES = 65536
#: Client ids drawn per ``os.urandom`` call (8 bytes each).
_IDS_PER_DRAW = 128

# (bytes, offset): random bytes for client ids; redrawn in a forked child.
_pool: list[Any] = [b"", 0]
# (interval, max_interval, backoff) -> Policy (a frozen value: shared).
_policies: dict[tuple[float, float, int], Policy] = {}


def new_client_id() -> str:
    """64 random bits in hex (``secrets.token_hex(8)``'s source, drawn in bulk)."""
    pool = _pool
    at = pool[1]
    if at >= len(pool[0]):
        pool[0], at = os.urandom(8 * _IDS_PER_DRAW), 0
    pool[1] = at + 8
    return str(pool[0][at:at + 8].hex())


def _forget_ids() -> None:
    _pool[0], _pool[1] = b"", 0  # a forked child draws its own


os.register_at_fork(after_in_child=_forget_ids)


def _policy(interval: float, max_interval: float, backoff: int) -> Policy:
    policy = _policies.get((interval, max_interval, backoff))
    if policy is None:
        first = max(1, seconds(interval))
        policy = Policy(interval=first, give_up_after=seconds(3600), backoff=backoff,
                        max_interval=max(seconds(max_interval), first))
        if len(_policies) < 64:
            _policies[(interval, max_interval, backoff)] = policy
    return policy


def _numeric(address: Any) -> tuple[int, Any] | None:
    """``(family, address)`` of a numeric ``(host, port)``; None for a name."""
    if len(address) != 2 or not isinstance(address[0], str):
        return None
    host = address[0]
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except (OSError, ValueError):
            continue
        return family, (host, address[1])
    return None


async def _connected_socket(loop: Any, address: Any,
                            local_addr: tuple[str, int] | None) -> socket.socket:
    """A non-blocking UDP socket connected to ``address`` (bound to ``local_addr``),
    trying each address a name resolves to, as ``create_datagram_endpoint`` does."""
    numeric = _numeric(address)
    if numeric is not None:
        candidates = [numeric]
    else:
        infos = await loop.getaddrinfo(*address[:2], type=socket.SOCK_DGRAM)
        if not infos:
            raise OSError(f"getaddrinfo({address[0]!r}) returned nothing")
        candidates = [(family, address if len(address) == 4 and family == socket.AF_INET6
                       else sockaddr) for family, _t, _p, _c, sockaddr in infos]
    error: OSError | None = None
    for family, sockaddr in candidates:
        try:
            local = None if local_addr is None else _numeric(local_addr)
            if local_addr is not None and local is None:
                infos = await loop.getaddrinfo(*local_addr[:2], family=family,
                                               type=socket.SOCK_DGRAM)
                if not infos:
                    raise OSError(f"getaddrinfo({local_addr[0]!r}) returned nothing")
                local = (family, infos[0][4])
            return udp_socket(family, bind=None if local is None else local[1],
                              connect=sockaddr)
        except OSError as exc:
            error = exc
    assert error is not None
    raise error


class RpcClient:
    """``async with RpcClient((host, port), key=None) as client:
    reply = await client.call("proc", b"payload", timeout=2.0)``.

    ``interval``/``max_interval``/``backoff``: the retransmission schedule (s);
    ``reply_ack_delay`` (s): a REPLY-ACK waits this long for a next call on its
    connection, which makes it moot; ``reply_ack_min_bytes``: shorter replies get
    no REPLY-ACK (``RpcCaller``); 0 sends one for every reply."""

    def __init__(
        self,
        address: tuple[str, int],
        *,
        key: bytes | str | None = None,
        clock: Clock | None = None,
        interval: float = DEFAULT_INTERVAL,
        max_interval: float = DEFAULT_MAX_INTERVAL,
        backoff: int = 2,
        client_id: str | None = None,
        local_addr: tuple[str, int] | None = None,
        reply_ack_delay: float = DEFAULT_REPLY_ACK_DELAY,
        reply_ack_min_bytes: int = DEFAULT_REPLY_ACK_MIN_BYTES,
        service: str = "",
    ) -> None:
        self.address = address
        self.clock = clock or Clock()
        self.client_id = client_id or new_client_id()
        self.caller = RpcCaller(self.client_id, _policy(interval, max_interval, backoff),
                                FrameCodec(None if key is None else keyring(key), service),
                                reply_ack_delay=seconds(reply_ack_delay),
                                reply_ack_min_bytes=reply_ack_min_bytes)
        self.local_addr = local_addr
        self.socket_errors = 0
        self._sock: socket.socket | None = None
        self._backlog: list[bytes] = []  # datagrams waiting for the socket to be writable
        # conn -> (the caller's future, the tick its timeout expires)
        self._waiting: dict[str, tuple[Any, int]] = {}  # each: an asyncio future
        self._idle: list[str] = []
        self._uids = 0
        self._timer: Any = None  # the loop's handle (asyncio's or uvloop's), or None
        self._armed: int | None = None
        self._loop: Any = None  # the running loop once open (``running_loop``)
        self._timeout_ticks = (0.0, 0, 0)  # the last call's timeout (s) in ticks and ms
        self._keyed = key is not None
        self._retry = (interval, max(interval, max_interval))  # retry_refused back-off (s)

    async def __aenter__(self) -> RpcClient:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    async def open(self) -> None:
        if self._sock is not None:
            raise ProtocolUsageError("the client is already open")
        loop = self._loop = running_loop()
        numeric = _numeric(self.address) if self.local_addr is None else None
        if numeric is not None:
            sock = udp_socket(numeric[0], connect=numeric[1])  # no resolver, no coroutine
        else:
            sock = await _connected_socket(loop, self.address, self.local_addr)
        try:
            loop.add_reader(sock.fileno(), self._readable)
        except BaseException:
            sock.close()
            raise
        self._sock = sock

    @property
    def local_address(self) -> Any:
        """The socket's local address (None when not open)."""
        return None if self._sock is None else self._sock.getsockname()

    def close(self) -> None:
        acks = self.caller.flush_reply_acks()
        if acks:
            self._send(acks)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._waiting:
            for fut, _expires in self._waiting.values():
                if not fut.done():
                    fut.cancel()
            self._waiting.clear()
        sock = self._sock
        if sock is not None:
            self._sock = None
            loop = self._loop
            assert loop is not None
            loop.remove_reader(sock.fileno())
            if self._backlog:
                loop.remove_writer(sock.fileno())
                self._backlog.clear()
            sock.close()

    async def call(self, proc: str, payload: bytes = b"", *, timeout: float = 2.0,
                   new_connection: bool = False, retry_refused: bool = False) -> bytes:
        """Run ``proc(payload)`` at most once on the server and return its result.

        ``new_connection``: use a connection id never used before (as a new client
        would; the benchmark's shared-socket mode). Raises ``CallTimeout`` (outcome
        unknown: ran at most once), ``CallRejected`` (``.reason``; ``.ran`` False:
        it did not run, None: unknown) or ``RemoteError`` (the handler raised; it ran
        once). The server is told a deadline a little before ``timeout`` (module
        doc): a call it could not start by then is ``CallRejected`` ``expired``, one
        it had no room to queue ``overloaded``, both before ``timeout``.

        ``retry_refused``: a call refused in a way that proves it did not run
        (``CallRejected.ran is False``: ``early``, ``overloaded``, ``expired``, with
        a key) is issued again as a new call (a new timestamp), after a back-off
        that starts at the client's ``interval`` and doubles up to its
        ``max_interval``, at most ``MAX_REFUSED_RETRIES`` times and only while
        ``timeout`` (for all attempts together) leaves time; then the last refusal
        is raised. A call whose outcome is unknown is never issued again.
        """
        if not retry_refused:
            return await self._call(proc, payload, timeout, new_connection)
        if not timeout > 0:
            raise UsageError("timeout", f"must be > 0 s, got {timeout}")
        loop = running_loop()
        deadline = loop.time() + timeout
        delay, longest = self._retry
        for attempt in range(MAX_REFUSED_RETRIES + 1):
            try:
                return await self._call(proc, payload, max(1e-3, deadline - loop.time()),
                                        new_connection)
            except CallRejected as exc:
                if (exc.ran is not False or attempt == MAX_REFUSED_RETRIES
                        or loop.time() + delay >= deadline):
                    raise
            await asyncio.sleep(delay)
            delay = min(2 * delay, longest)
        raise AssertionError("unreachable")  # the loop returns or raises

    async def _call(self, proc: str, payload: bytes, timeout: float,
                    new_connection: bool) -> bytes:
        """One call (``call`` without retries)."""
        if self._sock is None:
            raise ProtocolUsageError("the client is not open (use async with)")
        if not timeout > 0:
            raise UsageError("timeout", f"must be > 0 s, got {timeout}")
        idle = self._idle
        conn = idle.pop() if idle and not new_connection else self._new_conn()
        now = self.clock.now()
        ticks = self._timeout_ticks
        if ticks[0] != timeout:
            # The budget is a little shorter than the timeout, so that the server's
            # ``expired`` arrives before it (``RpcCaller.budget_ms``).
            wait = max(1, seconds(timeout))
            ticks = self._timeout_ticks = (timeout, wait, self.caller.budget_ms(wait))
        try:
            _ts, frames = self.caller.call(proc, payload, now=now, conn=conn,
                                           budget_ms=ticks[2])
        except BaseException:
            idle.append(conn)
            raise
        # Sent first: the server works while this client does its bookkeeping (no
        # answer can be read before the ``await`` below).
        self._send(frames)
        loop = self._loop
        assert loop is not None
        fut = loop.create_future()
        expires = now + ticks[1]
        self._waiting[conn] = (fut, expires)
        armed = self._armed
        if armed is None or expires < armed:
            self._rearm()
        else:
            deadline = self.caller.next_deadline()
            if deadline is not None and deadline < armed:
                self._rearm()
        try:
            outcome = await fut
        except BaseException:  # cancelled: the call stays at most once, unanswered
            self.caller.abandon(conn)
            raise
        finally:
            self._waiting.pop(conn, None)
            idle.append(conn)
        if type(outcome) is Answered:
            if outcome.status is _OK:
                return outcome.data
            if outcome.status is _EXPIRED:
                raise CallRejected("expired", authenticated=self._keyed)
            message = outcome.data.decode("utf-8", "replace")
            raise RemoteError(message, no_procedure=outcome.status is Status.NO_PROCEDURE)
        if type(outcome) is Rejected:
            raise CallRejected(str(outcome.reason), authenticated=self._keyed,
                               incarnation=outcome.incarnation,
                               marked=outcome.mark != 0 and outcome.mark == outcome.incarnation)
        if outcome is None:
            self.caller.abandon(conn)
            raise CallTimeout(f"no answer to {proc!r} within {timeout} s; "
                              "it ran at most once")
        raise CallTimeout(f"{proc!r} gave up after retransmissions; it ran at most once")

    # -- driving the core ----------------------------------------------------

    def _new_conn(self) -> str:
        self._uids += 1
        return f"{self.client_id}.{self._uids}"

    def _readable(self) -> None:
        """One datagram per wake-up (the loop calls again while more are queued)."""
        sock = self._sock
        if sock is None:
            return
        try:
            data = sock.recv(_RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            # ICMP port unreachable while the server is down: retransmissions go on.
            # uvloop stops watching a socket once a read on it has failed (asyncio's
            # loop does not): watch it again, or no answer of the restarted server
            # would ever be read (the call would end in a timeout).
            self.socket_errors += 1
            loop = self._loop
            if loop is not None:
                loop.remove_reader(sock.fileno())
                loop.add_reader(sock.fileno(), self._readable)
            return
        out = self.caller.receive_outcome(data, now=self.clock.now())
        if type(out) is Answered:
            # Alone: nothing to send and no earlier deadline (``receive_outcome``).
            entry = self._waiting.get(out.conn)
            if entry is not None and not entry[0].done():
                entry[0].set_result(out)
            return
        assert isinstance(out, CallerOutput)
        if out.outcomes or out.datagrams:
            self._act(out)

    def _act(self, out: CallerOutput) -> None:
        waiting = self._waiting
        for outcome in out.outcomes:
            entry = waiting.get(outcome.conn)
            if entry is not None and not entry[0].done():
                entry[0].set_result(outcome)
        if out.datagrams:
            self._send(out.datagrams)
        deadline = self.caller.next_deadline()
        if deadline is not None and (self._armed is None or deadline < self._armed):
            self._rearm()

    def _send(self, datagrams: tuple[bytes, ...]) -> None:
        sock = self._sock
        if sock is None:
            return
        if len(datagrams) == 1 and not self._backlog:
            try:
                sock.send(datagrams[0])
                return
            except (BlockingIOError, InterruptedError):
                pass  # the general path below queues it
            except OSError:
                self.socket_errors += 1
                return
        for i, d in enumerate(datagrams):
            if self._backlog:
                self._backlog.extend(datagrams[i:])
                return
            try:
                sock.send(d)
            except (BlockingIOError, InterruptedError):
                self._backlog.append(d)
                loop = self._loop
                assert loop is not None
                loop.add_writer(sock.fileno(), self._writable)
            except OSError:
                self.socket_errors += 1  # e.g. ICMP refused: retransmissions go on

    def _writable(self) -> None:
        sock = self._sock
        backlog = self._backlog
        while sock is not None and backlog:
            try:
                sock.send(backlog[0])
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self.socket_errors += 1
            del backlog[0]
        if sock is not None:
            loop = self._loop
            assert loop is not None
            loop.remove_writer(sock.fileno())

    def _next_wakeup(self) -> int | None:
        deadline = self.caller.next_deadline()
        for _fut, expires in self._waiting.values():
            if deadline is None or expires < deadline:
                deadline = expires
        return deadline

    def _rearm(self) -> None:
        """One timer at the earliest deadline (an early wake-up does no harm)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deadline = self._armed = self._next_wakeup()
        if deadline is None or self._sock is None:
            return
        loop = self._loop
        assert loop is not None
        delay = max(0.0, (deadline - self.clock.now()) / 1e6)
        self._timer = loop.call_at(loop.time() + delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._armed = None
        now = self.clock.now()
        for fut, expires in list(self._waiting.values()):
            if expires <= now and not fut.done():
                fut.set_result(None)  # timed out: the call ends with CallTimeout
        out = self.caller.handle_timer(now=now)
        for outcome in out.outcomes:
            entry = self._waiting.get(outcome.conn)
            if entry is not None and not entry[0].done():
                entry[0].set_result(outcome)
        if out.datagrams:
            self._send(out.datagrams)
        self._rearm()
