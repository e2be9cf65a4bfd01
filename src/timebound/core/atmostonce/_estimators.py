"""Lifetime estimators: how long the receiver remembers a connection.

Implements the adaptive paper (Chaudhuri, Coan, Welch), Fig. 2 (unlimited horizon)
and Fig. 3 (limited horizon), plus the fixed ``rho`` of SCMP Fig. 2-1.

The receiver skeleton is the paper's Fig. 1 (the "standard form"); an estimator only
computes ``ltime-est`` (here ``estimate``). The only data flowing back into the
skeleton is ``estimate``, which is why no estimator can break at-most-once
(Theorem 2, pinned by ``tests/test_atmostonce_properties.py``).

How it works. On every message the receiver calls ``observe(lifetime, verdict)``
where ``lifetime = now - ts`` (receiver clock minus sender timestamp). The estimator
keeps the period's lifetimes, ``numacc`` (accepted messages) and ``numrej``
(summary-rejected messages, our ``STALE``). At garbage collection ``update()``:

- ``maxltime`` is the period's maximum (unlimited: max over lifetimes and 0; limited:
  the (H+1)-st largest lifetime, so H spikes per period are ignored);
- if ``maxltime > estimate`` the estimate rises to ``nextpow2(maxltime)``;
- else if ``numacc > p * numrej`` and ``estimate > maxltime > 0`` it falls to
  ``nextpow2(maxltime)``, charging the counters (unlimited: ``numacc -= p*numrej``,
  ``p += 1``; limited: ``numacc -= p*numrej + 1``, p fixed) and zeroing ``numrej``;
- the period's lifetimes are emptied.

Choices where the figures leave room (pinned by
``tests/test_atmostonce_receiver.py::test_unlimited_rises_falls_and_charges_only_on_a_real_fall``
and ``tests/test_atmostonce_estimator_mutants.py``):

- *Only an actual fall charges the counters.* When the decrease condition holds but
  ``nextpow2(maxltime)`` equals the current estimate (e.g. estimate 8, max 5) the
  figures would still charge ``numacc`` and bump ``p``; the paper's text counts
  *decreases* ("the p-th time the estimate is decreased"), so we change nothing.
- *Memory.* Unlimited keeps only the running maximum (the paper's footnote); limited
  keeps a min-heap of the H+1 largest lifetimes and a count, O(H) <= O(S).
- *Crash.* The period's lifetimes and the counters are volatile and lost; the
  estimate and ``p`` are on stable storage with ``latest`` (``restore``).
- Lifetimes may be zero or negative under hostile clocks; they are recorded as they
  are (they can never raise the estimate, which is at least 1).
"""

from __future__ import annotations

import heapq
from typing import Final, Protocol

from timebound.core.atmostonce._events import Verdict
from timebound.errors import ProtocolUsageError

_ACCEPTED: Final = Verdict.ACCEPTED
_STALE: Final = Verdict.STALE


def nextpow2(value: int) -> int:
    """The smallest power of two >= value (value >= 1)."""
    return 1 << (value - 1).bit_length()


class Estimator(Protocol):
    """The receiver's view of a lifetime estimator."""

    #: The current lifetime estimate (``ltime-est``), in ticks, >= 1.
    estimate: int
    #: Decrease counter ``p`` (fixed for the limited horizon; unused by ``Fixed``).
    p: int
    #: True when garbage collection runs after every S-th lifetime, not on a timer.
    gc_by_count: bool
    #: False when ``observe`` has no effect, so the receiver may skip the call.
    observes: bool

    def observe(self, lifetime: int, verdict: Verdict) -> bool:
        """Record a message; True when a count-triggered GC is now due."""
        ...

    def update(self) -> bool:
        """The GC-time estimate update; True when the estimate or ``p`` changed."""
        ...

    def lose_volatile(self) -> None:
        """A crash: forget the period's lifetimes and the counters."""
        ...

    def restore(self, estimate: int, p: int) -> None:
        """Recovery: take the estimate and ``p`` back from stable storage."""
        ...


class Fixed:
    """SCMP's configured ``rho``: the estimate never changes."""

    gc_by_count = False
    observes = False

    def __init__(self, rho: int) -> None:
        if rho < 1:
            raise ProtocolUsageError(f"rho must be >= 1, got {rho}")
        self.estimate = rho
        self.p = 1

    def observe(self, lifetime: int, verdict: Verdict) -> bool:
        return False

    def update(self) -> bool:
        return False

    def lose_volatile(self) -> None:
        pass

    def restore(self, estimate: int, p: int) -> None:
        pass

    def __repr__(self) -> str:
        return f"Fixed(rho={self.estimate})"


class _Adaptive:
    """Counters and the decision rule shared by Figs. 2 and 3."""

    gc_by_count = False
    observes = True

    def __init__(self, p: int) -> None:
        self.estimate = 1
        self.p = p
        self.numacc = 0
        self.numrej = 0

    def _decide(self, maxltime: int) -> bool:
        if maxltime > self.estimate:
            self.estimate = nextpow2(maxltime)
            return True
        if self.numacc > self.p * self.numrej and self.estimate > maxltime > 0:
            lower = nextpow2(maxltime)
            if lower < self.estimate:
                self.estimate = lower
                self._charge()
                return True
        return False

    def _charge(self) -> None:
        raise NotImplementedError

    def lose_volatile(self) -> None:
        self.numacc = 0
        self.numrej = 0

    def restore(self, estimate: int, p: int) -> None:
        self.estimate = estimate
        self.p = p


class UnlimitedHorizon(_Adaptive):
    """Fig. 2: p starts at 1 and grows with every decrease; max over the period."""

    def __init__(self) -> None:
        super().__init__(p=1)
        self._max = 0

    def observe(self, lifetime: int, verdict: Verdict) -> bool:
        if lifetime > self._max:
            self._max = lifetime
        if verdict is _ACCEPTED:
            self.numacc += 1
        elif verdict is _STALE:
            self.numrej += 1
        return False

    def update(self) -> bool:
        changed = self._decide(self._max)
        self._max = 0
        return changed

    def _charge(self) -> None:
        self.numacc -= self.p * self.numrej
        self.numrej = 0
        self.p += 1

    def lose_volatile(self) -> None:
        super().lose_volatile()
        self._max = 0

    def __repr__(self) -> str:
        return f"UnlimitedHorizon(estimate={self.estimate}, p={self.p})"


class LimitedHorizon(_Adaptive):
    """Fig. 3: GC after every S-th lifetime; max is the (H+1)-st largest; p fixed."""

    gc_by_count = True

    def __init__(self, window: int, spikes: int, p: int) -> None:
        if window < 1:
            raise ProtocolUsageError(f"window S must be >= 1, got {window}")
        if not 0 <= spikes < window:
            raise ProtocolUsageError(f"spikes H must be in [0, S), got {spikes}")
        if p < 1:
            raise ProtocolUsageError(f"p must be >= 1, got {p}")
        super().__init__(p=p)
        self.window = window
        self.spikes = spikes
        self._top: list[int] = []  # min-heap of the H+1 largest lifetimes
        self._count_in_period = 0

    def observe(self, lifetime: int, verdict: Verdict) -> bool:
        top = self._top
        if len(top) <= self.spikes:
            heapq.heappush(top, lifetime)
        elif lifetime > top[0]:
            heapq.heapreplace(top, lifetime)
        if verdict is _ACCEPTED:
            self.numacc += 1
        elif verdict is _STALE:
            self.numrej += 1
        self._count_in_period += 1
        return self._count_in_period >= self.window

    def update(self) -> bool:
        # With exactly S >= H+1 lifetimes the heap holds the H+1 largest; its
        # minimum is the (H+1)-st largest. An early update (a forced GC) with
        # fewer lifetimes has no (H+1)-st largest and changes nothing.
        if self._count_in_period < self.window:
            return False
        maxltime = self._top[0]
        self._top.clear()
        self._count_in_period = 0
        return self._decide(maxltime)

    def _charge(self) -> None:
        self.numacc -= self.p * self.numrej + 1
        self.numrej = 0

    def lose_volatile(self) -> None:
        super().lose_volatile()
        self._top.clear()
        self._count_in_period = 0

    def __repr__(self) -> str:
        return (f"LimitedHorizon(S={self.window}, H={self.spikes}, p={self.p}, "
                f"estimate={self.estimate})")
