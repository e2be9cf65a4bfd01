"""Node clocks: offset, drift, NTP-like resynchronisation, steps, a monotonic guard.

A ``Clock`` maps true (simulation) time ``t`` to the node's reading::

    reading(t) = t + offset + err_k + drift_ppm * (t - sync_k) / 1e6 + steps(t)

``sync_k = phase + k * resync`` is the k-th resynchronisation before ``t``; at each
one the accumulated drift is cancelled and a fresh error ``err_k``, uniform in
``[-epsilon/2, epsilon/2]``, is installed (an NTP client lands within its error bound
of true time), so two clocks of the same configuration differ by at most
``epsilon + 2 * |drift| * resync / 1e6`` ticks plus their offsets -- the scenarios
choose drift and period so the drift term stays small beside epsilon. ``err_k`` is
drawn from a stream seeded per clock and per epoch (``seed * 1_000_003 + k``), so the
reading at ``t`` does not depend on when or how often the clock was read. ``offset``
models a permanently slow (< 0) or fast (> 0) clock (SCMP section 2.3); ``steps`` are
``(time, amount)`` jumps, forward or backward, e.g. an operator setting the clock.

``read(t)`` is the raw reading, which may go backwards at a resynchronisation or a
backward step. Protocols that need monotone time use ``monotonic(t)``: the guard
returns ``max(raw, previous)``, and with ``strict=True`` (senders' timestamps)
``max(raw, previous + 1)`` so two messages of a connection never share a timestamp.
"""

from __future__ import annotations

import random
from bisect import bisect_right
from collections.abc import Sequence


class Clock:
    __slots__ = ("offset", "drift_ppm", "resync", "epsilon", "_seed", "_phase",
                 "_epoch", "_err", "_step_times", "_step_sums", "_last")

    def __init__(self, *, offset: int = 0, drift_ppm: float = 0.0, resync: int = 0,
                 epsilon: int = 0, seed: int = 0, phase: int = 0,
                 steps: Sequence[tuple[int, int]] = ()) -> None:
        self.offset = offset
        self.drift_ppm = drift_ppm
        self.resync = resync
        self.epsilon = epsilon
        self._seed = seed
        self._phase = phase % resync if resync > 0 else 0
        self._epoch = -2
        self._err = 0
        ordered = sorted(steps)
        self._step_times = [t for t, _ in ordered]
        sums: list[int] = []
        total = 0
        for _, amount in ordered:
            total += amount
            sums.append(total)
        self._step_sums = sums
        self._last: int | None = None

    def _error(self, epoch: int) -> int:
        if epoch != self._epoch:
            self._epoch = epoch
            if self.epsilon > 0:
                half = self.epsilon // 2
                self._err = random.Random(self._seed * 1_000_003 + epoch).randint(-half, half)
            else:
                self._err = 0
        return self._err

    def read(self, t: int) -> int:
        """The raw reading at true time ``t`` (may go backwards)."""
        value = t + self.offset
        if self.resync > 0:
            epoch = (t - self._phase) // self.resync
            since = t - (self._phase + epoch * self.resync)
            value += self._error(epoch)
        else:
            since = t
            value += self._error(0)
        if self.drift_ppm:
            value += int(self.drift_ppm * since / 1_000_000)
        if self._step_times:
            i = bisect_right(self._step_times, t)
            if i:
                value += self._step_sums[i - 1]
        return value

    def monotonic(self, t: int, strict: bool = False) -> int:
        """The guarded reading: never below the previous guarded one (``strict``:
        always above it)."""
        value = self.read(t)
        last = self._last
        if last is not None:
            floor = last + 1 if strict else last
            if value < floor:
                value = floor
        self._last = value
        return value


