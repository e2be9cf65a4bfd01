"""The RPC server's worker threads and its queue of calls waiting for one.

``RpcServer`` (``_server``) hands every sync call to ``WorkerPool.submit``. A free
worker takes it at once (a new daemon thread while fewer than ``workers`` run); with
every worker busy the call waits in a bounded queue on the loop (``queue`` calls at
most); beyond it the call is refused ``overloaded`` at once (the service's
``overloaded``: it never runs, and a later copy of it neither). A waiting call is
handed to a worker only once one is free and the service says it may still start
(``expire_if_late``); one timer, at the earliest deadline of the waiting calls,
answers each whose deadline passes while it waits (``expired``), so its caller
hears it before its own timeout. The deadline rule is the core's
(``core.rpc._live``, "Deadlines"); this module only asks it when a call is about to
start and when a deadline comes.

Compiled with mypyc alongside ``_server`` when built (``timebound._compiled``): the
loop and its handles are held as ``Any`` for the reason given there.
"""

from __future__ import annotations

import heapq
import queue
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from timebound.core.rpc import Invocation, Outgoing, RpcService
from timebound.net._handlers import work
from timebound.net._loop import running_loop

#: ``done(run, result, failed, started, elapsed)``: on the loop, a worker's call ended.
Done = Callable[[Invocation, object, bool, float, float], None]


class _Waiting:
    """A sync call waiting for a free worker; ``live`` until it leaves the queue
    (started, expired or dropped)."""

    __slots__ = ("run", "fn", "started", "live")

    def __init__(self, run: Invocation, fn: Any, started: float) -> None:
        self.run = run
        self.fn = fn
        self.started = started
        self.live = True


class WorkerPool:
    """At most ``workers`` threads running sync handlers, and at most ``queue``
    calls waiting for one (module doc). ``send`` sends what the service answers
    (``overloaded``, ``expired``); ``done`` is called on the loop when a worker's
    call ends, after the pool started the next waiting call; ``clock`` is the
    server's; ``serving()`` says whether the server still serves."""

    def __init__(self, service: RpcService[Any], *, workers: int, queue: int,
                 clock: Any, send: Callable[[tuple[Outgoing, ...]], None], done: Done,
                 serving: Callable[[], bool]) -> None:
        self.service = service
        self.workers = workers
        self.queue = queue
        self.clock = clock
        self._send = send
        self._done = done
        self._serving = serving
        self._jobs: Any = None  # a queue.SimpleQueue of jobs while workers run
        self._threads = 0
        self.busy = 0  # calls handed to workers and not done yet (<= workers)
        # Waiting calls, oldest first, and a heap of their deadlines; both drop a
        # call lazily once it left (``_Waiting.live``).
        self._waiting: deque[_Waiting] = deque()
        self.queued = 0  # the live calls of ``_waiting`` (at most ``queue``)
        self._deadlines: list[tuple[int, int, _Waiting]] = []
        self._seq = 0  # ties of the heap (deadline, seq, call)
        self._timer: Any = None  # the loop's handle at the earliest deadline
        self._armed: int | None = None

    def submit(self, run: Invocation, fn: Any, started: float) -> None:
        """Start ``run`` in a free worker, else let it wait its turn, else (the
        queue is full) refuse it ``overloaded``: it never runs."""
        if self.busy < self.workers:
            self._hand(run, fn, started)
            return
        if self.queued >= self.queue:
            self._send(self.service.overloaded(run, now=self.clock.now()).sends)
            return
        call = _Waiting(run, fn, started)
        self._waiting.append(call)
        self.queued += 1
        deadline = self.service.start_deadline(run)
        if deadline is None:
            return
        heap = self._deadlines
        if len(heap) > 2 * self.queued + 64:  # mostly calls that left: rebuild
            heap = self._deadlines = [d for d in heap if d[2].live]
            heapq.heapify(heap)
        self._seq += 1
        heapq.heappush(heap, (deadline, self._seq, call))
        if self._armed is None or deadline < self._armed:
            self._arm(deadline)

    def stop(self) -> None:
        """The server closes: calls still waiting never start (nor do they get an
        answer); each worker ends after its current call, whose result is dropped.
        Workers are daemon threads, so a handler that never returns does not keep
        the process alive."""
        self._waiting.clear()
        self._deadlines.clear()
        self.queued = 0
        self._arm(None)
        jobs = self._jobs
        if jobs is None:
            return
        self._jobs = None
        while True:
            try:
                jobs.get_nowait()
            except queue.Empty:
                break
        for _ in range(self._threads):
            jobs.put(None)
        self._threads = 0
        self.busy = 0

    # -- internals -----------------------------------------------------------

    def _hand(self, run: Invocation, fn: Any, started: float) -> None:
        """Give ``run`` to a free worker (it starts now)."""
        jobs = self._jobs
        if jobs is None:
            jobs = self._jobs = queue.SimpleQueue()
            self._threads = 0
        self.busy += 1
        jobs.put((run, fn, started))
        if self._threads < self.busy:  # every thread is busy: one more
            self._threads += 1
            threading.Thread(target=work, args=(jobs, running_loop(), self._finished),
                             name=f"timebound-handler-{self._threads}", daemon=True).start()

    def _finished(self, run: Invocation, result: object, failed: bool, started: float,
                  elapsed: float) -> None:
        """On the loop: a worker is free; the next waiting call that may still
        start goes to it first, then the server hears of the call that ended."""
        if self.busy:
            self.busy -= 1
        self._dispatch()
        self._done(run, result, failed, started, elapsed)

    def _dispatch(self) -> None:
        """Start the oldest waiting calls that may still start (the service
        decides); each past its deadline is answered ``expired`` and never runs."""
        waiting = self._waiting
        while waiting and self.busy < self.workers and self._serving():
            call = waiting.popleft()
            if not call.live:
                continue
            call.live = False
            self.queued -= 1
            out = self.service.expire_if_late(call.run, now=self.clock.now())
            if out is None:
                self._hand(call.run, call.fn, call.started)
            elif out.sends:
                self._send(out.sends)

    def _arm(self, deadline: int | None) -> None:
        """One timer just after ``deadline``, the earliest deadline of a waiting
        call (None: none)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._armed = deadline
        if deadline is None or not self._serving():
            return
        loop = running_loop()
        delay = max(0.0, (deadline + 1 - self.clock.now()) / 1e6)
        self._timer = loop.call_at(loop.time() + delay, self._on_timer)

    def _on_timer(self) -> None:
        """Waiting calls' deadlines came: each past its deadline is answered
        ``expired`` (``start_deadline`` is the last tick at which
        ``expire_if_late`` lets a call start) and leaves the queue."""
        self._timer = None
        self._armed = None
        now = self.clock.now()
        heap = self._deadlines
        while heap and (not heap[0][2].live or heap[0][0] < now):
            call = heapq.heappop(heap)[2]
            if not call.live:
                continue
            out = self.service.expire_if_late(call.run, now=now)
            if out is None:  # not late by the service's clock: look again soon
                self._seq += 1
                heapq.heappush(heap, (now, self._seq, call))
                break
            call.live = False
            self.queued -= 1
            if out.sends:
                self._send(out.sends)
        waiting = self._waiting
        if len(waiting) > 2 * self.queued + 64:  # mostly calls that left: rebuild
            self._waiting = deque(c for c in waiting if c.live)
        self._arm(heap[0][0] if heap else None)
