"""What a simulation will cost, before it starts: memory and time from its parameters.

``estimate(name, values)`` plans the scenario's runs the way its ``run`` function does
(one ``RunPlan`` per run: a label and its size in the scenario's unit of work -- calls,
messages, publications, sends) and prices them with the constants below:

- memory: ``BASE_BYTES`` plus the largest run times the family's bytes per unit. Runs
  are executed one after another and a run's objects are dropped when the next one
  starts (the dataset tables are flushed in row groups), so the peak is the largest
  run, not the sum;
- time: every run's units times the family's seconds per unit.

``check(estimate, max_memory=..., max_time=...)`` raises ``UsageError`` naming the
estimate and the option that overrides the limit (``--max-memory``, ``--max-time``)
when it does not fit. ``available_memory()`` is this machine's ``MemAvailable``
(``/proc/meminfo``; ``os.sysconf`` where there is no such file).

How the constants were measured (2 cores, CPython 3.12, pure-Python build): each
family ran at two sizes in a fresh process (``timebound simulate NAME --set ...``);
bytes per unit = (peak RSS at the larger size - peak RSS at the smaller) / (units
difference), seconds per unit = wall time at the larger size / its units. The
constants are those figures rounded up (about 1.5x), so an estimate errs on the large
side; a run on a slower machine takes longer than its estimate, never less memory.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from timebound.durations import format_bytes
from timebound.durations import format_eta as format_eta
from timebound.errors import UsageError

#: Resident memory of the simulator before its first run (interpreter, pyarrow), bytes.
#: (Measured 140-215 MiB, the most for stability.)
BASE_BYTES = 240 * 2**20
#: Start-up time of a simulation (imports, dataset folder), seconds (measured about 2 s).
BASE_SECONDS = 3.0

#: family -> (unit name, bytes per unit at the peak, seconds per unit).
#: scmp, adaptive: one unit = one client call (a message and its retransmissions);
#: merge: one publication (its copies to every publisher and two mergers);
#: slotted: one message sent on the channel; stability: one message or ack delivery.
#: Measured (2026-11, see the module docstring), before rounding up:
#: scmp 1120 B and 88 us per call (sweep run, 1000 and 10000 clients x 10 calls);
#: adaptive 1320 B and 54 us (bounded/unlimited, 10000 and 80000 messages);
#: merge 3160 B and 104 us (one delta, duration 20000 and 100000 ticks);
#: slotted 1390 B and 57 us (scheme a, duration 5 s and 40 s);
#: stability 350 B and 16 us (N=4 sweep, duration 1 s and 5 s; at N=16, 1 s: 28 us).
COSTS: dict[str, tuple[str, float, float]] = {
    "scmp": ("calls", 1700.0, 130e-6),
    "adaptive": ("calls", 2000.0, 80e-6),
    "merge": ("publications", 4700.0, 160e-6),
    "slotted": ("messages", 2100.0, 85e-6),
    "stability": ("deliveries", 520.0, 32e-6),
}

#: The time limit when none is given (seconds): longer runs are refused unless
#: ``--max-time`` allows them.
DEFAULT_MAX_SECONDS = 6 * 3600


@dataclass(frozen=True)
class RunPlan:
    label: str
    units: int


@dataclass(frozen=True)
class Estimate:
    scenario: str
    unit: str
    runs: tuple[RunPlan, ...]
    memory: int   # bytes, peak
    seconds: float

    @property
    def units(self) -> int:
        return sum(r.units for r in self.runs)

    def describe(self) -> str:
        """``about 321.1 MiB of memory and 16s (2 run(s), 100,000 calls)``."""
        return (f"about {format_bytes(self.memory)} of memory and {format_eta(self.seconds)} "
                f"({self.work()})")

    def work(self) -> str:
        return f"{len(self.runs)} run(s), {self.units:,} {self.unit}"


def _scmp(p: Mapping[str, Any]) -> list[RunPlan]:
    exps = p["experiments"]
    normal = p["clients"] * p["calls"]
    plan: list[RunPlan] = []
    if "once" in exps:
        plan.append(RunPlan("once", p["clients"]))
    if "many" in exps:
        plan.append(RunPlan("many", p["many_calls"]))
    if "sweep" in exps:
        plan += [RunPlan(f"rho={rho}", normal) for rho in p["rhos"]]
    if "skew" in exps:
        plan += [RunPlan(n, normal) for n in ("clients-synced", "clients-slow", "clients-fast",
                                               "server-slow", "server-fast")]
    if "crash" in exps:
        plan += [RunPlan("crash", normal), RunPlan("crash-grace", normal)]
    if "reorder" in exps:
        plan += [RunPlan(f"reorder W={w}", p["reorder_clients"] * p["reorder_calls"])
                 for w in p["reorder_windows"]]
    if "restart" in exps:
        each = p["restart_clients"] * p["restart_callers"] * p["restart_calls"]
        plan += [RunPlan("restart", each), RunPlan("restart-marked", each)]
    return plan


def _adaptive(p: Mapping[str, Any]) -> list[RunPlan]:
    each = p["clients"] * max(1, p["messages"] // p["clients"])
    return [RunPlan(f"{load}/{est}", each) for load in p["loads"] for est in p["estimators"]]


def _merge(p: Mapping[str, Any]) -> list[RunPlan]:
    each = math.ceil(p["publishers"] * p["rate"] * p["duration"])
    return [RunPlan(f"delta={d}", each) for d in p["deltas"]]


def _slotted(p: Mapping[str, Any]) -> list[RunPlan]:
    each = math.ceil(p["rate"] * p["duration"] / 1000)  # rate per ms, duration in us
    return [RunPlan(f"{s}/Ts={t}", each) for s in p["schemes"] for t in p["slots"]]


def _stability(p: Mapping[str, Any]) -> list[RunPlan]:
    plan: list[RunPlan] = []  # the fig2 runs (a few hundred deliveries) cost nothing
    if "sweep" in p["modes"]:
        variants = len(p["variants"]) + (2 if p["uneven"] > 1 else 0)
        for n in p["sizes"]:
            # every sender to every receiver, every receiver's ack to every sender
            each = n * n * (p["duration"] // p["t_send"] + p["duration"] // p["t_ack"])
            plan += [RunPlan(f"N={n}", each)] * variants
    return plan


PLANS = {"scmp": _scmp, "adaptive": _adaptive, "merge": _merge, "slotted": _slotted,
         "stability": _stability}


def estimate(name: str, values: Mapping[str, Any]) -> Estimate:
    """The cost of ``timebound simulate NAME`` with these resolved parameter values."""
    unit, per_byte, per_second = COSTS[name]
    runs = tuple(PLANS[name](values))
    peak = max((r.units for r in runs), default=0)
    return Estimate(name, unit, runs, int(BASE_BYTES + peak * per_byte),
                    BASE_SECONDS + sum(r.units for r in runs) * per_second)


def available_memory() -> int:
    """Bytes this machine can give a new process now (MemAvailable)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):  # pragma: no cover - no way to tell: no limit
        return 2**62


_SIZE_UNITS = {"": 1, "B": 1, "K": 2**10, "KB": 2**10, "KIB": 2**10, "M": 2**20,
               "MB": 2**20, "MIB": 2**20, "G": 2**30, "GB": 2**30, "GIB": 2**30,
               "T": 2**40, "TB": 2**40, "TIB": 2**40}


def parse_size(text: str, option: str = "--max-memory") -> int:
    """``"512M"``, ``"4G"``, ``"2GiB"`` -> bytes (binary units; a bare number is bytes)."""
    raw = text.strip().upper()
    digits = raw.rstrip("KMGTIB")
    suffix = raw[len(digits):]
    try:
        number = float(digits)
    except ValueError:
        number = math.nan
    if suffix not in _SIZE_UNITS or not math.isfinite(number) or number <= 0:
        raise UsageError(option, f"expected a size such as 512M, 4G or 2GiB, got {text!r}")
    return int(number * _SIZE_UNITS[suffix])


def check(est: Estimate, *, max_memory: int | None, max_time: float | None,
          what: str, parallel: int = 1) -> None:
    """Refuse ``est`` when it does not fit: memory above ``max_memory`` (None: this
    machine's available memory), time (divided over ``parallel`` workers) above
    ``max_time`` seconds (None: ``DEFAULT_MAX_SECONDS``)."""
    memory_limit = available_memory() if max_memory is None else max_memory
    if est.memory * parallel > memory_limit:
        had = ("this machine has" if max_memory is None else "--max-memory is")
        raise UsageError("--max-memory", (
            f"{what} would need about {format_bytes(est.memory * parallel)} of memory "
            f"({est.work()}{f', {parallel} at once' if parallel > 1 else ''}; an "
            f"estimate) but {had} {format_bytes(memory_limit)}; make it smaller or give "
            f"--max-memory SIZE to run it anyway"))
    time_limit = DEFAULT_MAX_SECONDS if max_time is None else max_time
    seconds = est.seconds / max(1, parallel)
    if seconds > time_limit:
        raise UsageError("--max-time", (
            f"{what} would take about {format_eta(seconds)} ({est.work()}; an estimate) "
            f"but the limit is {format_eta(time_limit)}; make it smaller or give "
            f"--max-time DURATION to run it anyway"))
