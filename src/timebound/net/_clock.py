"""The timestamp clock of a live endpoint: microseconds of the system clock.

``Clock.now()`` is ``time.time_ns() // 1000`` plus an injectable ``offset`` (µs) and
``drift`` (parts per million since the clock was made), and it never goes backwards:
a reading below the last one returns the last one. Tests give clients offsets of
±epsilon and far beyond to provoke the paper's stale and early refusals; the core
client makes timestamps unique per connection on top of this (a repeated reading
becomes last + 1 on that connection).
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: Ticks per second of every live endpoint (timestamps are in microseconds).
TICKS_PER_SECOND = 1_000_000


class Clock:
    def __init__(self, offset: int = 0, drift_ppm: float = 0.0,
                 source: Callable[[], int] = time.time_ns) -> None:
        self.offset = offset
        self.drift_ppm = drift_ppm
        self._source = source
        self._origin = source() // 1000
        self._last = 0

    def now(self) -> int:
        t = self._source() // 1000
        if self.drift_ppm:
            t += int((t - self._origin) * self.drift_ppm / 1e6)
        t += self.offset
        if t < self._last:
            return self._last
        self._last = t
        return t


def seconds(value: float) -> int:
    """``value`` seconds in ticks (µs)."""
    return int(round(value * TICKS_PER_SECOND))
