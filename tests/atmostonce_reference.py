"""A literal, slow reference of the ``atmostonce`` replay contract (docs/replay-atmostonce.md).

Written independently of ``timebound.core`` and as plainly as possible: every timer
fires one by one at every multiple of its period (no idle-gap shortcut), lifetimes are
kept as a plain list, the estimator is the figure's code line by line. Tests compare
the product's replay against it on generated traces, so it must stay naive.

``Options.epsilon`` set selects SCMP section 2.2's alternative for a monotonic clock,
written from the paper's paragraph alone: "the server treats messages as too early if
m.ts > G.time + epsilon, rather than keeping a separate value for G.latest. When
restarting after a crash, the server refuses all messages for a period of epsilon,
then sets G.upper to G.time and begins normal processing." No stable storage: the
refusal window is ``[restart, restart + epsilon)``, and at ``restart + epsilon``
(before that instant's GC) ``upper`` becomes that time. The estimate is kept in
memory across the crash (the estimator object survives the simulated crash; only its
period's lifetimes and counters are volatile, as for the stable-storage mode).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field


def nextpow2(value: int) -> int:
    result = 1
    while result < value:
        result *= 2
    return result


@dataclass
class Options:
    estimator: str = "fixed"
    rho: int | None = None
    gc_every: int | None = None
    window: int | None = None
    spikes: int | None = None
    p: int | None = None
    resilient: bool = False
    beta: int | None = None
    latest_every: int | None = None
    recovery_grace: int | None = None
    classes: int = 1
    epsilon: int | None = None  # the monotonic-clock alternative (module docstring)


@dataclass
class RefReceiver:
    o: Options
    CT: dict[str, int] = field(default_factory=dict)
    upper: int = 0
    est: int = 1
    p: int = 1
    numacc: int = 0
    numrej: int = 0
    lifetimes: list[int] = field(default_factory=list)
    latest: int | None = None
    recover_at: int | None = None
    fired_upto: int = 0
    no_evict_until: float = float("-inf")
    refuse_until: int | None = None  # monotonic clock: end of the restart window

    def __post_init__(self) -> None:
        if self.o.estimator == "fixed":
            assert self.o.rho is not None
            self.est = self.o.rho
        if self.o.estimator == "limited":
            assert self.o.p is not None
            self.p = self.o.p
        if self.o.resilient:
            self.latest = self.o.beta

    def down(self) -> bool:
        return self.recover_at is not None

    def fire_timers(self, now: int) -> None:
        t = self.fired_upto + 1
        while t <= now:
            if self.recover_at == t:
                self.recover(t)
            if not self.down() and self.refuse_until == t:
                self.upper = t  # "then sets G.upper to G.time"
                self.refuse_until = None
            if not self.down():
                if self.o.resilient and t % self.o.latest_every == 0:
                    self.latest = max(self.latest, t + self.o.beta)
                if self.o.estimator != "limited" and t % self.o.gc_every == 0:
                    self.gc(t)
            t += 1
        self.fired_upto = max(self.fired_upto, now)

    def recover(self, t: int) -> None:
        self.recover_at = None
        self.no_evict_until = t + (self.o.recovery_grace or 0)
        self.CT = {}
        if self.o.epsilon is not None:
            self.upper = 0  # every message is refused until refuse_until anyway
            self.refuse_until = t + self.o.epsilon
            return
        self.upper = self.latest
        self.latest = max(self.latest, t + self.o.beta)

    def crash(self, at: int, down: int) -> None:
        self.fire_timers(at)
        assert not self.down()
        self.CT = {}
        self.upper = 0
        self.numacc = 0
        self.numrej = 0
        self.lifetimes = []
        self.refuse_until = None
        self.recover_at = at + down

    def gc(self, t: int) -> None:
        if self.o.estimator != "fixed":
            if self.o.estimator == "unlimited":
                maxl = max(self.lifetimes + [0])
            else:
                maxl = sorted(self.lifetimes, reverse=True)[self.o.spikes]
            if maxl > self.est:
                self.est = nextpow2(maxl)
            elif self.numacc > self.p * self.numrej and self.est > maxl > 0:
                if nextpow2(maxl) < self.est:
                    self.est = nextpow2(maxl)
                    if self.o.estimator == "unlimited":
                        self.numacc = self.numacc - self.p * self.numrej
                        self.numrej = 0
                        self.p = self.p + 1
                    else:
                        self.numacc = self.numacc - self.p * self.numrej - 1
                        self.numrej = 0
        self.lifetimes = []
        if t < self.no_evict_until:
            return  # the optional GC pause after a recovery (SCMP 2.4)
        for conn in list(self.CT):
            if self.CT[conn] <= t - self.est:
                self.upper = max(self.upper, self.CT[conn])
                del self.CT[conn]

    def message(self, conn: str, ts: int, at: int) -> tuple[str, int | None, int | None]:
        self.fire_timers(at)
        if self.down():
            return "down", None, None
        rho = self.est
        if self.o.resilient and ts > self.latest:
            return "early", rho, len(self.CT)
        if self.o.epsilon is not None:
            if self.refuse_until is not None:
                return "recovering", None, None
            if ts > at + self.o.epsilon:
                return "early", rho, len(self.CT)
        if conn in self.CT:
            if ts <= self.CT[conn]:
                verdict = "duplicate"
            else:
                verdict = "accepted"
                self.CT[conn] = ts
        elif ts <= self.upper:
            verdict = "stale"
        else:
            verdict = "accepted"
            self.CT[conn] = ts
        self.lifetimes.append(at - ts)
        if verdict == "accepted":
            self.numacc += 1
        if verdict == "stale":
            self.numrej += 1
        if self.o.estimator == "limited" and len(self.lifetimes) == self.o.window:
            self.gc(at)
        return verdict, rho, len(self.CT)


def reference_replay(rows: list[dict], o: Options) -> list[dict]:
    """The contract's output for ``rows``."""
    nodes: dict[str, list[RefReceiver]] = {}
    out = []
    for row in rows:
        node = nodes.setdefault(row["receiver"], [RefReceiver(o) for _ in range(o.classes)])
        if row["type"] == "crash":
            for receiver in node:
                receiver.crash(row["at"], row["down"])
            continue
        index = zlib.crc32(row["conn"].encode("utf-8")) % o.classes
        verdict, rho, entries = node[index].message(row["conn"], row["ts"], row["at"])
        out.append(dict(row, verdict=verdict, rho=rho, entries=entries))
    return out

