"""How late a live check's own event loops run their timers: the machine's part of it.

``probing()`` installs, for the duration of a ``with`` block, an event loop policy
whose every new loop (``asyncio.run`` makes one per call) runs a timer beside the
check's own work: due every ``PERIOD`` seconds on the loop's clock, it records at
each firing how late it fired (the loop's time at the firing minus the time it was
due). That lateness is the loop's slack: the time a wake-up the check asked for waits
for the process to be scheduled and for the callbacks ahead of it to finish. A quiet
machine fires it within about a millisecond (the selector's millisecond timeout); a
machine busy with other processes fires it later, and so every timer of the check.

``Probe.measures()`` gives the ``LATENESS`` measures (``timebound.claims``): the
largest and the 99th percentile lateness (ms) and the number of firings, which
``timebound.net.live`` adds to the check's runs as the run ``LATENESS_RUN``; the
claims judge a live row only when that lateness is small against the time the row
checks. Processes the check starts (the ``rpc serve`` server) run their own loops;
this probe measures the check's process only, on the same machine.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

from timebound.claims import LATENESS

#: the timer's period (seconds): often enough for a percentile over a run of a second
PERIOD = 0.005


class Probe:
    """The lateness of every firing of the timer, over every loop it was attached to."""

    def __init__(self, period: float = PERIOD) -> None:
        self.period = period
        self.late: list[float] = []

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        due = loop.time() + self.period
        loop.call_at(due, self._fire, loop, due)

    def _fire(self, loop: asyncio.AbstractEventLoop, due: float) -> None:
        now = loop.time()
        self.late.append(max(0.0, now - due))
        nxt = now + self.period
        loop.call_at(nxt, self._fire, loop, nxt)

    def measures(self) -> dict[str, float]:
        """``LATENESS``'s measures: max and p99 lateness (ms), firings."""
        late = sorted(self.late)
        p99 = late[min(len(late) - 1, int(0.99 * len(late)))] if late else 0.0
        return {LATENESS.max: (late[-1] if late else 0.0) * 1000, LATENESS.p99: p99 * 1000,
                LATENESS.firings: float(len(late))}


@contextlib.contextmanager
def probing(period: float = PERIOD) -> Iterator[Probe]:
    """Every event loop made through the policy inside the block runs the probe's
    timer; the previous policy is restored after it."""
    probe = Probe(period)

    class _Probing(asyncio.DefaultEventLoopPolicy):
        def new_event_loop(self) -> asyncio.AbstractEventLoop:
            loop = super().new_event_loop()
            probe.attach(loop)
            return loop

    previous = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(_Probing())
    try:
        yield probe
    finally:
        asyncio.set_event_loop_policy(previous)
