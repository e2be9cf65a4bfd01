"""Links: delay distributions, loss, duplication, reordering, partitions.

A ``Link`` carries payloads one way between two nodes. ``send(deliver, payload)``
decides the fate of one datagram with the link's own ``random.Random`` (seeded from
the scenario's stream): during a partition (``[start, end)`` intervals of true time)
it is dropped; else it is lost with probability ``loss``; else it arrives after a
delay drawn from ``delay``; with probability ``reorder`` an extra delay uniform in
``[0, reorder_extra]`` is added (so it may overtake, or be overtaken by, later
datagrams); with probability ``duplicate`` a second copy follows, with its own
independent delay. Each decision is one draw, always in the same order, so a link's
behaviour is a pure function of its seed and the sequence of sends.

Delay distributions (ticks, integers >= 0), written ``kind:args`` on the command line:
``constant:D``; ``exponential:MEAN[:MIN]`` (MIN + Exp(mean MEAN), the slotted paper's
network delay); ``lognormal:MEDIAN:SIGMA[:MIN]``; ``empirical:v1,v2,...`` (uniform
choice among measured values).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import Any

from timebound.errors import UsageError
from timebound.sim._engine import Engine


class Delay:
    """A delay distribution; ``sample(rng)`` returns ticks (int >= 0)."""

    spec = ""

    def sample(self, rng: random.Random) -> int:
        raise NotImplementedError

    def quantile(self, q: float) -> float:
        """The q-quantile (used for the paper's delta = P_net quantile)."""
        raise NotImplementedError

    def mean(self) -> float:
        raise NotImplementedError


class Constant(Delay):
    def __init__(self, value: int) -> None:
        self.value = value
        self.spec = f"constant:{value}"

    def sample(self, rng: random.Random) -> int:
        return self.value

    def quantile(self, q: float) -> float:
        return float(self.value)

    def mean(self) -> float:
        return float(self.value)


class Exponential(Delay):
    def __init__(self, mean: float, minimum: int = 0) -> None:
        self.mu = mean
        self.minimum = minimum
        self._rate = 1.0 / mean
        self.spec = f"exponential:{mean:g}" + (f":{minimum}" if minimum else "")

    def sample(self, rng: random.Random) -> int:
        return self.minimum + int(rng.expovariate(self._rate))

    def quantile(self, q: float) -> float:
        return self.minimum - self.mu * math.log(1.0 - q)

    def mean(self) -> float:
        return self.minimum + self.mu - 0.5


class LogNormal(Delay):
    def __init__(self, median: float, sigma: float, minimum: int = 0) -> None:
        self.median = median
        self.sigma = sigma
        self.minimum = minimum
        self._mu = math.log(median)
        self.spec = f"lognormal:{median:g}:{sigma:g}" + (f":{minimum}" if minimum else "")

    def sample(self, rng: random.Random) -> int:
        return self.minimum + int(rng.lognormvariate(self._mu, self.sigma))

    def quantile(self, q: float) -> float:
        from statistics import NormalDist

        return self.minimum + math.exp(self._mu + self.sigma * NormalDist().inv_cdf(q))

    def mean(self) -> float:
        return self.minimum + math.exp(self._mu + self.sigma ** 2 / 2)


class Empirical(Delay):
    def __init__(self, values: Sequence[int]) -> None:
        self.values = list(values)
        self._sorted = sorted(self.values)
        self.spec = "empirical:" + ",".join(str(v) for v in self.values)

    def sample(self, rng: random.Random) -> int:
        return self.values[rng.randrange(len(self.values))]

    def quantile(self, q: float) -> float:
        index = min(len(self._sorted) - 1, math.ceil(q * len(self._sorted)) - 1)
        return float(self._sorted[max(index, 0)])

    def mean(self) -> float:
        return sum(self.values) / len(self.values)


def parse_delay(text: str, option: str = "--set delay") -> Delay:
    """``kind:args`` -> a ``Delay`` (UsageError naming ``option`` when malformed)."""
    kind, _, rest = text.partition(":")
    args = rest.split(":") if rest else []
    try:
        if kind == "constant" and len(args) == 1:
            value = int(args[0])
            if value >= 0:
                return Constant(value)
        elif kind == "exponential" and len(args) in (1, 2):
            mean = float(args[0])
            minimum = int(args[1]) if len(args) == 2 else 0
            if mean > 0 and minimum >= 0:
                return Exponential(mean, minimum)
        elif kind == "lognormal" and len(args) in (2, 3):
            median, sigma = float(args[0]), float(args[1])
            minimum = int(args[2]) if len(args) == 3 else 0
            if median > 0 and sigma >= 0 and minimum >= 0:
                return LogNormal(median, sigma, minimum)
        elif kind == "empirical" and len(args) == 1:
            values = [int(v) for v in args[0].split(",")]
            if values and min(values) >= 0:
                return Empirical(values)
    except ValueError:
        pass
    raise UsageError(option, "expected constant:D | exponential:MEAN[:MIN] | "
                     "lognormal:MEDIAN:SIGMA[:MIN] | empirical:v1,v2,... "
                     f"(ticks >= 0), got {text!r}")


class Link:
    """One direction between two nodes (module docstring)."""

    __slots__ = ("engine", "rng", "delay", "loss", "duplicate", "reorder", "reorder_extra",
                 "partitions", "sent", "lost", "cut", "duplicated", "reordered")

    def __init__(self, engine: Engine, rng: random.Random, delay: Delay, *,
                 loss: float = 0.0, duplicate: float = 0.0, reorder: float = 0.0,
                 reorder_extra: int = 0,
                 partitions: Sequence[tuple[int, int]] = ()) -> None:
        self.engine = engine
        self.rng = rng
        self.delay = delay
        self.loss = loss
        self.duplicate = duplicate
        self.reorder = reorder
        self.reorder_extra = reorder_extra
        self.partitions = list(partitions)
        self.sent = 0
        self.lost = 0
        self.cut = 0
        self.duplicated = 0
        self.reordered = 0

    def partitioned(self, t: int) -> bool:
        return any(start <= t < end for start, end in self.partitions)

    def _delay(self) -> int:
        rng = self.rng
        d = self.delay.sample(rng)
        if self.reorder and rng.random() < self.reorder:
            self.reordered += 1
            d += rng.randint(0, self.reorder_extra)
        return d

    def send(self, deliver: Callable[[Any], None], payload: Any) -> None:
        """Hand one datagram to the link; ``deliver(payload)`` runs at each arrival."""
        self.sent += 1
        engine = self.engine
        if self.partitions and self.partitioned(engine.now):
            self.cut += 1
            return
        rng = self.rng
        if self.loss and rng.random() < self.loss:
            self.lost += 1
            return
        engine.schedule(self._delay(), deliver, payload)
        if self.duplicate and rng.random() < self.duplicate:
            self.duplicated += 1
            engine.schedule(self._delay(), deliver, payload)
