"""``RpcServer``: the asyncio driver of ``timebound.core.rpc.RpcService``.

After aioquic's ``asyncio/server.py``: one UDP socket hands every datagram and the
clock's ``now`` to the sans-IO service, sends the frames it returns, runs the
procedures it starts, and re-arms one timer at ``next_deadline()``. No protocol
rule lives here: duplicates, refusals, ACKs, reply retransmission, garbage
collection, ``latest`` on stable storage and authentication are all the core's;
``latest`` is written in a worker thread (``_latest.LatestWriter``), off the loop.

The socket is a non-blocking socket read by ``loop.add_reader``, one datagram per
wake-up into a 64 KiB ``recvfrom`` (the UDP limit), not an asyncio datagram
transport: the transport reads every datagram with ``recvfrom(256 KiB)``, which on
glibc maps, faults in and unmaps fresh memory each time (about 15 µs per datagram
here, a fifth of a null call's server CPU). A reply the socket cannot take right
now waits for it to be writable, as a transport's buffer would; a socket error is
counted in ``socket_errors``.

Handlers are ``def f(payload: bytes) -> bytes`` or ``async def``; where they run (a
bounded pool of worker threads, ``workers``, or inline on the loop, ``workers=0``;
async handlers on the loop, one task per call) and how calls are timed
(``procedure_latency``, ``call_latency``) is ``_handlers``'s; every reply is made on
the loop through ``service.complete_reply``.

Deadlines and the queue: a sync call that finds every worker busy waits in a
bounded queue on the loop (``queue``, default ``DEFAULT_QUEUE_PER_WORKER`` x
``workers``), beyond which it is refused ``overloaded`` at once; a waiting call is
never started after its caller's deadline (``_workers.WorkerPool``; the rule is
the core's). Inline
and async handlers start when their CALL is accepted, so the service's check on
arrival is their check at start. An exception, a result that is not
bytes (``None`` included) or one that cannot fit one REPLY datagram becomes a REPLY
with an error status (``RemoteError``), once, in both builds; the server keeps
serving. ``timebound.stats`` is a read-only built-in of the service
(``core.rpc._live``): answered without an at-most-once entry. The defaults
(receiver, table bound, classes) are ``_defaults``'s; both modules' names are
still importable from here (the command line and the channel listener read them).

This module is compiled with mypyc alongside the core when built (``timebound._compiled``;
the same source runs pure otherwise): the loop, its handles and tasks are held as
``Any`` (``_loop.running_loop``), since compiled code checks values against their
annotations and uvloop's differ from asyncio's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import secrets
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from time import perf_counter
from typing import Any

from timebound.core.atmostonce import (
    ClassifiedReceiver,
    ReceiverConfig,
    StableStorage,
)
from timebound.core.rpc import (
    INCARNATION_BYTES,
    MAX_CONN_BYTES,
    Invocation,
    Outgoing,
    RpcService,
    ServiceOutput,
    Status,
    build_receiver,
)
from timebound.core.rpc import STATS_PROCEDURE as STATS_PROCEDURE  # the servers' built-in
from timebound.core.wire import HEADER_BYTES, MAX_DATAGRAM, TAG_BYTES, FrameCodec
from timebound.errors import ProtocolUsageError, UsageError
from timebound.net._clock import Clock, seconds
from timebound.net._defaults import DEFAULT_BETA as DEFAULT_BETA
from timebound.net._defaults import DEFAULT_CAPACITY as DEFAULT_CAPACITY
from timebound.net._defaults import DEFAULT_GC_EVERY as DEFAULT_GC_EVERY
from timebound.net._defaults import DEFAULT_LATEST_EVERY as DEFAULT_LATEST_EVERY
from timebound.net._defaults import DEFAULT_MAX_BYTES as DEFAULT_MAX_BYTES
from timebound.net._defaults import DEFAULT_RHO as DEFAULT_RHO
from timebound.net._defaults import MAX_CLASSES as MAX_CLASSES
from timebound.net._defaults import default_receiver as default_receiver
from timebound.net._endpoint import (
    bind_udp,
    guard_exposure,
    is_ip_literal,
    on_signals,
)
from timebound.net._handlers import DEFAULT_QUEUE_PER_WORKER as DEFAULT_QUEUE_PER_WORKER
from timebound.net._handlers import DEFAULT_WORKERS as DEFAULT_WORKERS
from timebound.net._handlers import LATENCY_BUCKETS as LATENCY_BUCKETS
from timebound.net._handlers import MAX_QUEUE as MAX_QUEUE
from timebound.net._handlers import MAX_WORKERS as MAX_WORKERS
from timebound.net._handlers import Handler as Handler
from timebound.net._handlers import LatencyHistogram as LatencyHistogram
from timebound.net._handlers import handlers_of as handlers_of
from timebound.net._handlers import on_loop
from timebound.net._keys import keyring
from timebound.net._latest import LatestWriter
from timebound.net._loop import running_loop
from timebound.net._stores import class_storages as class_storages  # re-export
from timebound.net._stores import missing_class_files, open_storages, remove_created
from timebound.net._workers import WorkerPool
from timebound.storage import FileStorage

Address = Any  # (host, port) or (host, port, flowinfo, scope_id)

_OK = Status.OK

#: Bytes of a REPLY frame around its data, besides the connection id and the tag:
#: frame header, type, conn_len, ts:u64, body_len:u32, status, the incarnation
#: (``docs/wire.md``).
_REPLY_OVERHEAD = HEADER_BYTES + 1 + 1 + 8 + 4 + 1 + INCARNATION_BYTES


#: Largest datagram read (the UDP limit).
_RECV_BYTES = 65536


class RpcServer:
    """An at-most-once RPC server on one UDP socket. ``async with server:`` serves.

    ``receiver`` (a core ``ReceiverConfig``, ticks in µs: estimator, rho, GC,
    beta, ``recovery_grace``, ``reorder_window``) names the SCMP receiver of each of
    ``classes`` hash classes (SCMP 2.4; ``capacity`` bounds each class's table);
    ``storage`` is the file holding ``latest`` (None: memory holding the start's
    record, so a restart without a file also refuses every call stamped before it;
    a missing file is created with latest = the start and said on stderr, see
    ``_stores``; class k >= 1 keeps its own in ``storage.k``). ``key`` and
    ``previous_key`` (accepted ``previous_key_grace`` seconds) turn on HMAC frames;
    ``service`` is the service id under their tags (a frame sealed for another
    service does not verify). Without a key the server binds only loopback
    addresses unless ``insecure`` (one warning line on stderr). ``capacity``
    (None: ``DEFAULT_CAPACITY`` split over the classes; 0: unbounded) bounds each
    class's table in entries, ``max_bytes`` (None: the ``receiver`` config's own
    ``max_bytes`` if it has one, else ``DEFAULT_MAX_BYTES``; 0: unbounded; split over
    the classes) all tables in bytes, stored replies included;
    a full table forgets its oldest finished calls early (``core.atmostonce._table``,
    "Bounds"), so a flood cannot lock new callers out. ``workers``: threads running
    sync handlers (0: inline on the loop). ``queue``: most sync calls waiting for a busy worker (None:
    ``DEFAULT_QUEUE_PER_WORKER`` x ``workers``; 0: none wait), beyond which a call
    is refused ``overloaded`` at once; a waiting call is never started after its
    caller's deadline (it is answered ``expired`` at it). Every answer to an
    address that has not validated itself is at most 3x the datagram it answers
    (``core.rpc._live``).

    ``marks`` (default on): this server is a new *incarnation*, with a random
    64-bit id in every message it sends; a call its caller made after hearing from
    it carries that id and is accepted even when stamped below the bound the server
    recovered from storage (so a restart costs callers one round trip, not about
    beta). Off: the paper's rule alone (every such call is refused ``down``).
    """

    def __init__(
        self,
        handlers: Mapping[str, Handler] | object,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        storage: str | None = None,
        key: bytes | str | None = None,
        previous_key: bytes | str | None = None,
        previous_key_grace: float = 3600.0,
        receiver: ReceiverConfig | None = None,
        classes: int = 1,
        kappa: int = 0,
        capacity: int | None = None,
        high_water: int | None = None,
        clock: Clock | None = None,
        service: str = "",
        insecure: bool = False,
        workers: int = DEFAULT_WORKERS,
        marks: bool = True,
        queue: int | None = None,
        max_bytes: int | None = None,
    ) -> None:
        self.handlers = handlers_of(handlers)
        self.insecure = insecure
        if key is None and not insecure and is_ip_literal(host):
            # Refused before any storage file is created (``start`` checks the bound
            # address again, names included).
            guard_exposure(host, keyed=False, insecure=False, service="the RPC server")
        self.host = host
        self.port = port
        self.clock = clock or Clock()
        if not 1 <= classes <= MAX_CLASSES:
            raise UsageError("classes", f"must be in [1, {MAX_CLASSES}], got {classes}")
        if max_bytes is not None and max_bytes < 0:
            raise UsageError("max_bytes", f"must be >= 0 (0: unbounded), got {max_bytes}")
        # The byte bound, each class's share (the config is each class's): the
        # keyword's total if given (0: unbounded), else the config's own, else the
        # default's.
        config = receiver or default_receiver(classes)
        if max_bytes is not None or config.max_bytes is None:
            total = DEFAULT_MAX_BYTES if max_bytes is None else max_bytes
            config = dataclasses.replace(
                config, max_bytes=max(1, total // classes) if total else None)
        if not config.resilient:
            config = dataclasses.replace(config, resilient=True, beta=DEFAULT_BETA,
                                         latest_every=DEFAULT_LATEST_EVERY)
        assert config.beta is not None and config.latest_every is not None
        now = self.clock.now()
        ring = keyring(key, previous_key, now + seconds(previous_key_grace))
        self.classes = classes
        stores: list[StableStorage]
        self.storage: FileStorage | None
        self.storages: list[FileStorage]
        # A missing file is created with latest = now (announced on stderr), memory
        # holds the same record: no call stamped before this start runs (_stores).
        # The class files this start creates: removed again if ``start`` cannot bind
        # (nothing was served from them), so a port in use leaves no file behind.
        self._created = missing_class_files(storage, classes)
        self.storages, stores = open_storages(storage, classes, config, now=now)
        self.storage = self.storages[0] if self.storages else None
        if capacity is None:
            capacity = max(1, DEFAULT_CAPACITY // classes)
        if capacity < 0:
            raise UsageError("capacity", f"must be >= 0 (0: unbounded), got {capacity}")
        self.capacity = capacity or None
        node = build_receiver(config, stores, start=now, capacity=self.capacity,
                              high_water=high_water, deferred=storage is not None)
        self.service: RpcService[Address] = RpcService(
            FrameCodec(ring, service), kappa=kappa, receiver=node,
            secret=secrets.token_bytes(32), readonly={STATS_PROCEDURE: self._stats_json},
            incarnation=(secrets.randbits(64) or 1) if marks else 0)
        # ``latest`` is fsynced in a worker thread, never in a datagram's callback.
        self._latest: LatestWriter | None = None
        if storage is not None:
            self._latest = LatestWriter(
                node.receivers if isinstance(node, ClassifiedReceiver) else [node],
                self.storages)
        self.config = config
        self.socket_errors = 0
        self.handler_errors = 0
        # A socket, or anything with its methods (a test wraps it to fill its buffer).
        self._sock: Any = None
        self._backlog: deque[tuple[bytes, Address]] = deque()  # waiting for writable
        self._timer: Any = None  # the loop's handle (asyncio's or uvloop's), or None
        self._armed: int | None = None
        self._tasks: set[Any] = set()  # the async handlers' tasks
        self._closed: asyncio.Event | None = None
        self.address: tuple[str, int] = (host, port)
        # Sync handlers' worker threads (``_workers``): started on demand, at most
        # ``workers``; 0 runs sync handlers inline on the loop.
        if not 0 <= workers <= MAX_WORKERS:
            raise UsageError("workers", f"must be in [0, {MAX_WORKERS}], got {workers}")
        self.workers = workers
        if queue is None:
            queue = min(MAX_QUEUE, DEFAULT_QUEUE_PER_WORKER * workers)
        if not 0 <= queue <= MAX_QUEUE:
            raise UsageError("queue", f"must be in [0, {MAX_QUEUE}], got {queue}")
        #: Most sync calls waiting for a busy worker (module doc: "Deadlines and the queue").
        self.queue = queue
        # Latency (module docstring): per procedure, handler time; the service's,
        # from a call's start to its reply handed to the socket.
        self.procedure_latency = {name: LatencyHistogram() for name in self.handlers}
        self.call_latency = LatencyHistogram()
        self._async_procs = frozenset(
            name for name, fn in self.handlers.items() if on_loop(fn))
        # Sync handlers' workers and the calls waiting for one (``_workers``).
        self._pool = WorkerPool(self.service, workers=workers, queue=queue,
                                clock=self.clock, send=self._send_and_rearm,
                                done=self._done, serving=self._serving)
        # Largest result of a REPLY, but for the connection id's bytes (``_limit``).
        self._room = MAX_DATAGRAM - _REPLY_OVERHEAD - (
            0 if self.service.codec.keyring is None else TAG_BYTES)

    # -- lifetime ------------------------------------------------------------

    async def __aenter__(self) -> RpcServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self, sock: Any = None) -> None:
        """Bind ``host:port`` (``bind_udp``) and serve on it; or serve on ``sock``,
        a UDP socket already bound there (``rpc serve`` binds before the storage file
        is opened, so a port in use creates no file). Either socket is closed if the
        start fails."""
        if self._sock is not None:
            if sock is not None:
                sock.close()
            raise ProtocolUsageError("the server is already started")
        if sock is None:
            try:
                sock = await bind_udp(self.host, self.port)
            except BaseException:
                remove_created(self._created)
                raise
        try:
            sock.setblocking(False)
            running_loop().add_reader(sock.fileno(), self._readable)
        except BaseException:
            sock.close()
            remove_created(self._created)
            raise
        sockname = sock.getsockname()
        try:
            guard_exposure(sockname[0], keyed=self.service.codec.keyring is not None,
                           insecure=self.insecure, service="the RPC server")
        except BaseException:
            running_loop().remove_reader(sock.fileno())
            sock.close()
            remove_created(self._created)
            raise
        self._created = ()
        self._sock = sock
        self.address = (sockname[0], sockname[1])
        self._closed = asyncio.Event()
        self._rearm()

    async def close(self) -> None:
        """Stop serving: fire due timers (``latest`` stays on storage), close."""
        sock = self._sock
        if sock is None:
            return
        self.service.handle_timer(now=self.clock.now())
        if self._timer is not None:
            self._timer.cancel()
        for task in list(self._tasks):
            task.cancel()
        self._pool.stop()
        self._sock = None
        loop = running_loop()
        loop.remove_reader(sock.fileno())
        if self._backlog:
            loop.remove_writer(sock.fileno())
            self._backlog.clear()
        sock.close()
        if self._latest is not None:
            await self._latest.drain()
        if self._closed is not None:
            self._closed.set()

    async def serve_forever(self, *, signals: bool = True) -> None:
        """Serve until SIGTERM/SIGINT (with ``signals``) or ``close()``."""
        assert self._closed is not None, "start() first"
        with on_signals(lambda: asyncio.ensure_future(self.close()), signals):
            await self._closed.wait()

    def _stats_json(self) -> bytes:
        """``timebound.stats``: the counters as JSON (a read-only built-in, answered
        without an at-most-once entry: see ``core.rpc._live``)."""
        return json.dumps(self.statistics()).encode("utf-8")

    def statistics(self) -> dict[str, int | None]:
        stats = dataclasses.asdict(self.service.statistics())
        stats["socket_errors"] = self.socket_errors
        stats["handler_errors"] = self.handler_errors
        stats["storage_errors"] = 0 if self._latest is None else self._latest.storage_errors
        return stats

    def latency(self) -> tuple[tuple[tuple[float, ...], list[int], float],
                               dict[str, tuple[tuple[float, ...], list[int], float]]]:
        """Snapshots (``LatencyHistogram.snapshot``) of ``call_latency`` and of each
        procedure's histogram (``procedure_latency``), for the metrics endpoint."""
        return self.call_latency.snapshot(), {
            name: histogram.snapshot() for name, histogram in self.procedure_latency.items()}

    # -- driving the core ----------------------------------------------------

    def _readable(self) -> None:
        """One datagram per wake-up (the loop calls again while more are queued)."""
        sock = self._sock
        if sock is None:
            return
        try:
            data, addr = sock.recvfrom(_RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.socket_errors += 1
            return
        self._datagram(data, addr)

    def _datagram(self, data: bytes, addr: Address) -> None:
        out = self.service.receive_run(data, addr, now=self.clock.now())
        if type(out) is Invocation:
            self._run(out)
        else:
            assert isinstance(out, ServiceOutput)
            if out.sends:
                self._send(out.sends)
            for run in out.runs:
                self._run(run)
        if self._armed is None:
            self._rearm()  # else the armed timer fires early at worst: harmless

    def _send(self, sends: tuple[Outgoing, ...]) -> None:
        for o in sends:
            self._sendto(o.datagram, o.peer)

    def _sendto(self, datagram: bytes, peer: Address) -> None:
        sock = self._sock
        if sock is None:
            return
        if not self._backlog:
            try:
                sock.sendto(datagram, peer)
                return
            except (BlockingIOError, InterruptedError):
                running_loop().add_writer(sock.fileno(), self._writable)
            except OSError:
                self.socket_errors += 1
                return
        self._backlog.append((datagram, peer))

    def _writable(self) -> None:
        sock = self._sock
        backlog = self._backlog
        while sock is not None and backlog:
            datagram, peer = backlog[0]
            try:
                sock.sendto(datagram, peer)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self.socket_errors += 1
            backlog.popleft()
        if sock is not None:
            running_loop().remove_writer(sock.fileno())

    def _run(self, run: Invocation) -> None:
        started = perf_counter()
        fn = self.handlers.get(run.proc)
        if fn is None:
            self._finish(run, Status.NO_PROCEDURE, f"no procedure {run.proc!r}".encode(),
                         started)
            return
        if self.workers and run.proc not in self._async_procs:
            self._pool.submit(run, fn, started)
            return
        # Held as returning ``object``: compiled code would check the union of
        # ``Handler`` and raise on a handler returning ``str``.
        call: Callable[[bytes], object] = fn
        try:
            result: object = call(run.args)
        except Exception as exc:  # noqa: BLE001 - a handler's failure is the caller's
            self._handled(run, perf_counter() - started)
            self._failed(run, exc, started)
            return
        if type(result) is bytes and len(result) <= self._room - MAX_CONN_BYTES:
            # The common case first: an inline handler's reply, small enough for any
            # connection id (``_finish`` checks the others).
            self._handled(run, perf_counter() - started)
            if self._sock is not None:
                reply = self.service.complete_reply(run, _OK, result, now=self.clock.now())
                if reply is not None:
                    self._sendto(reply.datagram, reply.peer)
                    self.call_latency.observe(perf_counter() - started)
            return
        self._returned(run, result, started, perf_counter() - started)

    def _handled(self, run: Invocation, elapsed: float) -> None:
        """A handler of ``run`` ran for ``elapsed`` seconds (its procedure's histogram)."""
        histogram = self.procedure_latency.get(run.proc)
        if histogram is not None:
            histogram.observe(elapsed)

    def _returned(self, run: Invocation, result: object, started: float,
                  elapsed: float) -> None:
        """What a handler's call returned after ``elapsed`` seconds: an awaitable (an
        ``async`` handler) is awaited in a task on the loop (its time counted when it
        completes); anything else is the result (``_result``)."""
        if inspect.isawaitable(result):
            task: Any = asyncio.ensure_future(self._await(run, result, started))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        self._handled(run, elapsed)
        self._result(run, result, started)

    async def _await(self, run: Invocation, pending: Awaitable[object],
                     started: float) -> None:
        try:
            result: object = await pending
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001
            self._handled(run, perf_counter() - started)
            self._failed(run, exc, started)
            return
        self._handled(run, perf_counter() - started)
        self._result(run, result, started)

    def _result(self, run: Invocation, result: object, started: float) -> None:
        """A handler's result. Bytes are the reply (a ``bytearray`` or ``memoryview``
        is taken as its bytes, copied); anything else, ``None`` included, is an
        error to the caller (``RemoteError``: "handler returned str, not bytes"),
        counted in ``handler_errors``, in both builds and on every path (inline,
        worker, async). Pinned by ``tests/test_net_handlers.py::test_non_bytes_*``."""
        if isinstance(result, bytes | bytearray | memoryview):
            try:
                data = bytes(result)
            except Exception as exc:  # noqa: BLE001 - e.g. a released memoryview
                self._failed(run, exc, started)
                return
            self._finish(run, Status.OK, data, started)
        else:
            self.handler_errors += 1
            shown = "None" if result is None else type(result).__name__
            self._finish(run, Status.ERROR, f"handler returned {shown}, not bytes".encode(),
                         started)

    def _failed(self, run: Invocation, exc: BaseException, started: float) -> None:
        self.handler_errors += 1
        try:
            text = f"{type(exc).__name__}: {exc}"
        except Exception:  # noqa: BLE001 - an exception whose __str__ raises
            text = type(exc).__name__
        self._finish(run, Status.ERROR, text.encode("utf-8", "replace"), started)

    def _finish(self, run: Invocation, status: Status, data: bytes, started: float) -> None:
        """Every completion but the inline hot path's comes here, then goes to
        ``service.complete_reply``. Data that cannot fit one REPLY datagram (``_limit``)
        becomes an error to the caller, "result of N bytes exceeds the datagram limit
        M", counted in ``handler_errors`` (an error's own message is cut to M bytes),
        so the stored reply can always be sent. Pinned by
        ``tests/test_net_handlers.py::test_oversized_*``. ``started``: the
        ``perf_counter`` of the call's start (``call_latency``)."""
        if self._sock is None:
            return
        limit = self._limit(run)
        if len(data) > limit:
            if status is _OK:
                self.handler_errors += 1
                status = Status.ERROR
                data = f"result of {len(data)} bytes exceeds the datagram limit {limit}".encode()
            else:
                data = data[:limit]
        reply = self.service.complete_reply(run, status, data, now=self.clock.now())
        if reply is not None:
            self._sendto(reply.datagram, reply.peer)
            self.call_latency.observe(perf_counter() - started)

    def _limit(self, run: Invocation) -> int:
        """Most data bytes a REPLY to ``run`` carries: the frame is then exactly
        ``MAX_DATAGRAM`` (header, type, conn_len, the connection id, ts, body_len,
        status, data and the tag when keyed: ``docs/wire.md``)."""
        return self._room - len(run.start.conn.encode("utf-8"))

    # -- sync handlers in worker threads (``_workers``) --------------------------

    def _serving(self) -> bool:
        return self._sock is not None

    def _send_and_rearm(self, sends: tuple[Outgoing, ...]) -> None:
        """Send what the service answered a queued call (``expired``,
        ``overloaded``); its timer may now have a deadline to wait for."""
        self._send(sends)
        if self._armed is None:
            self._rearm()

    def _done(self, run: Invocation, result: object, failed: bool, started: float,
              elapsed: float) -> None:
        """On the loop: a worker's call of ``run`` ended (raised, with ``failed``)
        after ``elapsed`` seconds in the handler, ``started`` (``perf_counter``) when
        the server accepted it (the pool already gave the free worker the next
        waiting call that may still start)."""
        if failed:
            assert isinstance(result, BaseException)
            self._handled(run, elapsed)
            self._failed(run, result, started)
        else:
            self._returned(run, result, started, elapsed)
        if self._armed is None:
            self._rearm()

    def _rearm(self) -> None:
        deadline = self.service.next_deadline()
        if deadline == self._armed:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._armed = deadline
        if deadline is None or self._sock is None:
            return
        loop = running_loop()
        delay = max(0.0, (deadline - self.clock.now()) / 1e6)
        self._timer = loop.call_at(loop.time() + delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._armed = None
        out = self.service.handle_timer(now=self.clock.now())
        for o in out.sends:  # none today; sent, like every core output, if ever
            self._sendto(o.datagram, o.peer)
        self._rearm()
