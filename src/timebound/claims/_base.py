"""What every paper's rows share: the ``Claim`` and ``Row`` records, ``Missing``, and
the helpers that read a run's measures and check common shapes.

A claim's ``measure`` takes the sources of one seed (``Sources``: source name ->
``{run: {measure: value}}``) and returns ``Values``, the (label, value, format)
triples the table shows; its ``check`` reads those values by label. A measure raises
``Missing`` (or ``KeyError``) when a run or measure it needs is not in the data.

Leaf module: standard library only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

Runs = Mapping[str, Mapping[str, float]]
Sources = Mapping[str, Runs]
#: measured values of one seed: (label, value, format) in display order
Values = list[tuple[str, float, str]]
#: the cause of a row that differs: text, or a function of every seed's sources that
#: builds it from their measurements (so no figure in it is typed by hand)
Why = str | Callable[[Sequence[Sources]], str]


@dataclass(frozen=True)
class Live:
    """A row's live column: the same claim checked on the live service over loopback
    UDP (``timebound.net``), run by ``simulate --reproduce`` on the same seeds.
    ``job``: the live job whose runs ``measure`` reads (a ``Sources`` key such as
    ``live-channel``); ``measure``/``check``/``why`` as a claim's; ``where``: what ran
    live and what result would make it differ; ``checks_ms``, ``checks``: the time the
    check depends on (ms, or a function of one seed's runs of ``job`` giving it) and
    what it is (the shortest slot, the ack period, delta, beta), against which the
    run's own lateness is weighed (``machine_late``)."""

    job: str
    measure: Callable[[Sources], Values]
    check: Callable[[dict[str, float]], bool]
    where: str
    why: Why = ""
    checks_ms: float | Callable[[Runs], float] = 0.0
    checks: str = ""


@dataclass(frozen=True)
class Lateness:
    """The run in which a live job reports how late its own event loop fired a
    periodic timer (``timebound.net.live``), and its measures (ms; firings)."""

    run: str = "loop lateness"
    max: str = "lateness_max_ms"
    p99: str = "lateness_p99_ms"
    firings: str = "lateness_firings"


LATENESS = Lateness()

#: A live row is judged only when its runs' timers were late (99th percentile) by at
#: most this share of the time the row checks (``Live.checks_ms``).
SLACK_SHARE = 0.1


def machine_late(lateness: Sequence[tuple[float, float] | None], checks_ms: float,
                 checks: str) -> str | None:
    """The verdict of a live row whose runs' own lateness is not small against the time
    it checks: ``not measured here (the machine was late by X ms ...)`` when on some
    seed the 99th percentile of the timer's lateness exceeds ``SLACK_SHARE`` x
    ``checks_ms``; None when every seed is within it (the row is judged). ``lateness``:
    per seed, (p99, max) in ms, or None for runs that carry no such measure (written
    before it existed: judged as they were)."""
    known = [late for late in lateness if late is not None]
    bound = SLACK_SHARE * checks_ms
    if not known or not any(p99 > bound for p99, _ in known):
        return None
    late = [i for i, x in enumerate(lateness) if x is not None and x[0] > bound]
    return (f"not measured here (the machine was late by {spread([p for p, _ in known], '.1f')}"
            f" ms at the 99th percentile of this run's own timer, max "
            f"{spread([m for _, m in known], '.1f')} ms, on {len(late)} of {len(lateness)} "
            f"seeds more than {SLACK_SHARE:g}x the {checks_ms:g} ms {checks} this row checks)")


@dataclass(frozen=True)
class Claim:
    paper: str
    claim: str
    published: str
    where: str
    needs: tuple[str, ...]
    measure: Callable[[Sources], Values] | None
    check: Callable[[dict[str, float]], bool] | None
    why: Why = ""          # the confirmed cause, shown when the check fails
    kind: str = "measured"  # measured | computed | pending
    note: str = ""          # how the check reads the claim (shown beside the verdict)
    #: A trend (increasing, decreasing): it can fail only on two distinct values or
    #: more, so on fewer its verdict is "not measured here" (``one_value``).
    trend: bool = False
    #: The live column (None: the claim has no live check; ``no_live`` says why).
    live: Live | None = None
    no_live: str = ""
    #: A row on the seeds together (a spread across seeds): ``measure`` reads each seed,
    #: ``across`` turns every seed's values into the row's values, judged once by
    #: ``check`` (None: each seed is judged on its own).
    across: Callable[[Sequence[Values]], Values] | None = None
    #: A ``pending`` row's bars of the bench file (label parts; ``_rpc.bench_verdict``).
    bars: tuple[str, ...] = ()


def one_value(claim: Claim, per_seed: Sequence[Values]) -> str | None:
    """Why ``claim`` cannot fail on these measurements (a trend measured at fewer than
    two distinct values), or None."""
    if not claim.trend:
        return None
    labels = {str(label) for values in per_seed for label, _, _ in values}
    if len(labels) >= 2:
        return None
    what = ", ".join(sorted(labels)) or "none"
    return (f"not measured here (a trend needs at least two distinct values; this data "
            f"has {what} only)")


@dataclass(frozen=True)
class Row:
    paper: str
    claim: str
    published: str
    measured: str
    where: str
    verdict: str
    seeds: int
    #: the live column: measured values, what ran, verdict (over ``live_seeds`` runs)
    live_measured: str = "-"
    live_where: str = ""
    live_verdict: str = "not run live"
    live_seeds: int = 0

    @property
    def agrees(self) -> bool:
        return self.verdict == "agrees"


class Missing(Exception):
    """A run or measure the claim needs is not in the data."""


def _get(runs: Runs, run: str, measure: str) -> float:
    try:
        value = runs[run][measure]
    except KeyError:
        raise Missing(f"{run}:{measure}") from None
    if value is None or (isinstance(value, float) and math.isnan(value)):
        raise Missing(f"{run}:{measure}")
    return float(value)



def _num(run: str, key: str) -> float:
    found = re.search(rf"{re.escape(key)}=(-?\d+(?:\.\d+)?)", run)
    if not found:
        raise Missing(run)
    return float(found.group(1))


def spread(values: Sequence[float], fmt: str) -> str:
    """``a`` when every seed gives the same text, else ``min-max``."""
    lo, hi = min(values), max(values)
    a, b = format(lo, fmt), format(hi, fmt)
    return a if a == b else f"{a}-{b}"


# -- checks shared by several papers' rows ----------------------------------------

def _increasing(v: dict[str, float]) -> bool:
    xs = list(v.values())
    return all(a <= b for a, b in zip(xs, xs[1:]))


def _decreasing(v: dict[str, float]) -> bool:
    xs = list(v.values())
    return all(a >= b for a, b in zip(xs, xs[1:]))


def _zero(v: dict[str, float]) -> bool:
    return all(x == 0 for k, x in v.items() if not k.startswith("("))
