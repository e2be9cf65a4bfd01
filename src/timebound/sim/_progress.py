"""Progress lines on stderr for ``timebound simulate``: between runs and within a run.

A ``RunProgress`` is the scenario's ``progress(label, done, total)`` (called before each
run and once at the end: one bar line each) and also takes ``within(done, total,
unit)`` from the engine's tick inside a run (``_scenario.in_run``), printed at most
every ``every`` seconds as::

    run 3/7 scmp rho=200000: 40% (120,000/300,000 calls) ETA 1m20s

The ETA is measured, not guessed: the work done so far (runs finished plus the
current run's fraction, each run weighed by its size in the cost estimate when one is
given, else all runs alike) over the wall time since the first run started, applied
to the work left. No line is printed before there is a rate to measure.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from timebound.sim._budget import Estimate, format_eta

#: Seconds between two progress lines within a run.
PROGRESS_EVERY = 2.0


class RunProgress:
    """Plain-text progress on stderr (nothing when ``quiet``)."""

    def __init__(self, quiet: bool, estimate: Estimate | None = None, *,
                 every: float = PROGRESS_EVERY, stream: TextIO | None = None) -> None:
        self.quiet = quiet
        self.estimate = estimate
        self.every = every
        self.stream = stream
        self.start = time.perf_counter()
        self.first_run: float | None = None
        self.label = ""
        self.index = 0
        self.total = 0
        self.last_line = 0.0

    def _print(self, line: str) -> None:
        print(line, file=self.stream or sys.stderr, flush=True)

    def _weights(self) -> list[float]:
        runs = self.estimate.runs if self.estimate is not None else ()
        if len(runs) == self.total and sum(r.units for r in runs) > 0:
            return [float(r.units) for r in runs]
        return [1.0] * self.total

    def eta(self, fraction_of_run: float) -> str:
        """`` ETA 1m20s`` for the work left, or ``""`` while there is no rate yet."""
        if self.first_run is None or self.total == 0:
            return ""
        weights = self._weights()
        done = sum(weights[: self.index])
        if self.index < len(weights):
            done += weights[self.index] * min(1.0, max(0.0, fraction_of_run))
        elapsed = time.perf_counter() - self.first_run
        whole = sum(weights)
        if done <= 0 or elapsed <= 0 or done >= whole:
            return ""
        return f" ETA {format_eta(elapsed * (whole - done) / done)}"

    def __call__(self, label: str, done: int, total: int) -> None:
        now = time.perf_counter()
        if self.first_run is None:
            self.first_run = now
        self.label, self.index, self.total = label, done, total
        self.last_line = now
        if self.quiet:
            return
        width = 30
        filled = width * done // total if total else width
        bar = "#" * filled + "." * (width - filled)
        eta = self.eta(0.0) if 0 < done < total else ""
        self._print(f"[{bar}] {done}/{total} {now - self.start:6.1f}s {label}{eta}")

    def within(self, done: int, total: int, unit: str) -> None:
        """The current run has done ``done`` of ``total`` units."""
        if self.quiet or total <= 0:
            return
        now = time.perf_counter()
        if now - self.last_line < self.every:
            return
        self.last_line = now
        done = min(done, total)
        fraction = done / total
        run = f"run {self.index + 1}/{self.total} " if self.total else ""
        self._print(f"{run}{self.label}: {100 * fraction:.0f}% ({done:,}/{total:,} {unit})"
                    f"{self.eta(fraction)}")
