"""The discrete-event kernel: SimPy's shape, nothing more.

``Engine`` keeps a heap of ``(time, priority, sequence, action, argument)``: events run
in time order, then by priority (lower first), then in the order they were scheduled
(the ``sequence`` counter breaks every tie, so the heap never compares actions and a
run is a pure function of its inputs). Time is an integer tick; the engine never reads
the wall clock and draws no random number -- randomness lives in the scenario's
seeded ``random.Random`` streams.

Verbs: ``now``; ``schedule(delay, action, arg)`` / ``at(time, action, arg)`` (an event
scheduled in the past is an error); ``peek()`` (time of the next event, or ``None``);
``step()`` (run one event); ``run(until=T)`` (run every event with time ``< T``, then
set ``now = T``; ``until=None`` runs to exhaustion). Cancelling is lazy: an action
checks its own state when it fires (the retransmission timer of an acknowledged
message simply returns), which keeps the heap a plain list.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

#: Default event priority; lower values run first at equal times.
NORMAL = 1
#: Runs before NORMAL events at the same time (e.g. clock resynchronisation, crashes).
URGENT = 0
#: Runs after NORMAL events at the same time (e.g. sampling a metric).
LATE = 2


class Engine:
    """A heap-scheduled discrete-event engine with integer time."""

    __slots__ = ("now", "_heap", "_seq", "events")

    def __init__(self, start: int = 0) -> None:
        self.now = start
        self._heap: list[tuple[int, int, int, Callable[[Any], None], Any]] = []
        self._seq = 0
        #: events run so far
        self.events = 0

    def at(self, time: int, action: Callable[[Any], None], arg: Any = None,
           priority: int = NORMAL) -> None:
        """Run ``action(arg)`` at absolute ``time`` (>= now)."""
        if time < self.now:
            raise ValueError(f"cannot schedule in the past: {time} < {self.now}")
        self._seq += 1
        heapq.heappush(self._heap, (time, priority, self._seq, action, arg))

    def schedule(self, delay: int, action: Callable[[Any], None], arg: Any = None,
                 priority: int = NORMAL) -> None:
        """Run ``action(arg)`` ``delay`` ticks from now (delay >= 0)."""
        self.at(self.now + delay, action, arg, priority)

    def peek(self) -> int | None:
        """Time of the next event, or None when nothing is scheduled."""
        return self._heap[0][0] if self._heap else None

    def step(self) -> None:
        """Run the next event."""
        time, _, _, action, arg = heapq.heappop(self._heap)
        self.now = time
        self.events += 1
        action(arg)

    def run(self, until: int | None = None,
            tick: Callable[[int], None] | None = None, tick_every: int = 10_000) -> None:
        """Run events with time < ``until`` (all, if None); then ``now = until``.

        ``tick(now)`` is called every ``tick_every`` events (progress reporting)."""
        heap = self._heap
        pop = heapq.heappop
        count = 0
        while heap and (until is None or heap[0][0] < until):
            time, _, _, action, arg = pop(heap)
            self.now = time
            action(arg)
            count += 1
            if tick is not None and count % tick_every == 0:
                tick(time)
        self.events += count
        if until is not None and until > self.now:
            self.now = until
