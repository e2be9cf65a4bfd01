"""What a live server runs: the handler table, the worker threads running sync
handlers, and the timing of calls (``RpcServer``'s helpers; no protocol rule: the
service, ``timebound.core.rpc.RpcService``, decides what runs).

Handlers are ``def f(payload: bytes) -> bytes`` or ``async def``, served from a dict
or from the public methods of an object of the user's own class (``handlers_of``).
Sync handlers run in a bounded pool of daemon worker threads (``workers``,
``DEFAULT_WORKERS``; ``workers=0`` runs them inline on the loop: the fastest null
call, for handlers that never block); a worker (``work``) only calls the handler it
is given and hands the outcome back with ``loop.call_soon_threadsafe``, so every
reply is made on the loop through ``service.complete_reply``. Which call a worker
runs next is decided on the loop, never in the thread: a call waits in the
server's bounded queue (``queue``, ``DEFAULT_QUEUE_PER_WORKER`` per worker) and is
handed to a worker only when one is free and the service says it may still start
(``RpcService.expire_if_late``: its deadline has not passed), so a call is never
started after its deadline, however long it waited. Async handlers (``on_loop``)
run on the loop, one task per call, started when their CALL is accepted (the
service's check on arrival is their check at start; likewise inline handlers).

Latency (``--metrics-port``, ``timebound.net._metrics``): the driver times calls,
never the core (which reads no clock). ``RpcServer.procedure_latency`` holds one
``LatencyHistogram`` per served procedure: the handler's execution time (a sync
handler's call, in its worker thread or inline; an async handler's until its
awaitable completes). ``RpcServer.call_latency`` holds the service's: from the moment
the server starts a call (hands it to its handler or to the worker pool, right after
the core accepted its CALL) to its reply handed to the socket, so the wait for a
worker and the reply's framing are in it; a retransmitted reply and a duplicate's
answer are not. The cost on the hot path is ``time.perf_counter`` at the start, at
the handler's end and at the reply, and two bucket increments.

Compiled with mypyc alongside ``_server`` when built (``timebound._compiled``): the
loop and the worker's queue and semaphore are held as ``Any``, as there.
"""

from __future__ import annotations

import bisect
import inspect
import sys
from collections.abc import Awaitable, Callable, Mapping
from time import perf_counter
from typing import Any

from timebound.core.rpc import Invocation
from timebound.errors import UsageError

Handler = Callable[[bytes], bytes] | Callable[[bytes], Awaitable[bytes]]

#: Threads running sync handlers by default (``RpcServer(workers=)``, ``--workers``).
DEFAULT_WORKERS = 8
#: Most worker threads a server takes.
MAX_WORKERS = 1024
#: Sync calls that may wait for a busy worker, per worker, by default
#: (``RpcServer(queue=)``, ``--queue``): a call beyond the queue is refused
#: ``overloaded`` at once. 256 with the default 8 workers: a burst of a few hundred
#: quick calls (one client with many outstanding) waits its turn, while a server
#: whose handlers are slow says ``overloaded`` at once instead of holding calls
#: until their deadlines (a waiting call never starts after its deadline anyway).
DEFAULT_QUEUE_PER_WORKER = 32
#: Most calls a server's queue takes.
MAX_QUEUE = 65536

#: Upper bounds of the latency histograms' buckets, seconds (Prometheus ``le``; a last
#: bucket, +Inf, takes the rest): 25 µs (a null call on loopback) to 10 s.
LATENCY_BUCKETS = (0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                   0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class LatencyHistogram:
    """Durations in seconds counted into ``bounds`` (upper bounds, ascending) and one
    last bucket for the rest (+Inf), with their sum. Observed on the server's loop
    only; ``snapshot`` may be read from another thread (the metrics endpoint): it copies
    the counts, and its total is theirs, so the +Inf bucket always equals the count."""

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, elapsed: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, elapsed)] += 1
        self.total += elapsed

    def snapshot(self) -> tuple[tuple[float, ...], list[int], float]:
        """``(bounds, per-bucket counts (not cumulative), sum of seconds)``."""
        return self.bounds, list(self.counts), self.total


def handlers_of(target: object) -> dict[str, Handler]:
    """A dict of handlers, or the public methods of an object of the user's own
    class (``uvicorn module:app``); anything else is a ``UsageError`` naming
    ``MODULE:ATTR``.

    Choices: the class of an object must not come from the standard library
    (``builtins`` included), so an ``int`` or a ``str`` never serves ``bit_length``
    or ``upper``; a module is refused too (its public names include everything it
    imports: ``from subprocess import run`` would become a procedure), and so is a
    class or a function. A mapping's keys must be procedure names (1..255 UTF-8
    bytes) and its values callables. Pinned by
    ``tests/test_net_handlers.py::test_handlers_of_*``."""
    if isinstance(target, Mapping):
        table = dict(target)
    else:
        kind = type(target)
        if (isinstance(target, type)
                or kind.__module__.partition(".")[0] in sys.stdlib_module_names):
            raise UsageError("MODULE:ATTR", f"{kind.__name__} {_shown(target)} is not "
                             "served: it must be a dict of handlers or an object of "
                             "your own class")
        table = {name: getattr(target, name) for name in dir(target)
                 if not name.startswith("_") and callable(getattr(target, name))}
    for name, fn in table.items():
        try:
            size = len(name.encode("utf-8")) if isinstance(name, str) else 0
        except UnicodeEncodeError:
            size = 0
        if not 1 <= size <= 255:
            raise UsageError("MODULE:ATTR",
                             f"procedure name {_shown(name)} must be 1..255 UTF-8 bytes")
        if not callable(fn):
            raise UsageError("MODULE:ATTR", f"handler {name!r} is not callable")
    return table


def _shown(value: object) -> str:
    """``repr(value)``, shortened to one short line of an error message."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a user's __repr__ may raise
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


def on_loop(fn: object) -> bool:
    """Whether handler ``fn`` is ``async`` (run on the loop, never in a worker):
    a coroutine function, a method or partial of one, or an object whose
    ``__call__`` is one."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None))  # noqa: B004 - the method, not callable()


def work(jobs: Any, loop: Any, done: Callable[..., object]) -> None:
    """A worker thread: runs the sync handlers the loop hands it (``jobs``, a queue
    that holds a job only while a worker is free to take it: the loop has already
    decided that the call may start) and hands each outcome to the loop (``done``, by
    ``call_soon_threadsafe``); it touches no server state."""
    while True:
        job = jobs.get()
        if job is None:
            return
        run: Invocation = job[0]
        call: Callable[[bytes], object] = job[1]
        started: float = job[2]
        failed = False
        began = perf_counter()
        try:
            result: object = call(run.args)
        except BaseException as exc:  # noqa: BLE001 - the caller's, as inline
            result, failed = exc, True
        elapsed = perf_counter() - began
        try:
            loop.call_soon_threadsafe(done, run, result, failed, started, elapsed)
        except RuntimeError:  # the loop is closed: the server is gone
            return
        job = result = None  # hold nothing while idle
