"""The papers' claims and their verdicts: one definition for the table and the report.

``docs/reproduction.md`` (``timebound simulate --reproduce``) and the report page
(``timebound report``) both call ``evaluate`` here, so the two never disagree.

Input: ``seeds`` is a list with one entry per seed; each entry maps a *source* (a
scenario name, or a reproduction job label such as ``adaptive-horizon``) to that
source's scalar metrics, ``{run: {measure: value}}``. Every claim names the sources
it needs; it measures named values on each seed and checks them. A claim's verdict is
``agrees`` only when the check holds on every seed; otherwise ``differs (k of n seeds
agree)`` followed by the cause, which the reproduction's own runs confirm (a row on
the seeds together, ``Claim.across``, such as a spread across seeds, is judged once on
every seed's values: ``differs (on the n seeds together)``). A claim
whose figures come from a formula rather than from encoded or observed data has the
verdict ``computed``; a claim without a measurement yet is ``not yet measured``; a
claim whose runs are not in the given data is ``not measured here`` (the report of a
dataset that lacks those runs). A live row whose runs' own timers ran late against the
time it checks is ``not measured here (the machine was late by ...)`` (``_live`` states
the rule).

One module per paper holds its measurements, checks and rows (``_scmp``, ``_rpc``,
``_adaptive``, ``_slotted``, ``_stability``, ``_merge``, ``_ours``); ``_base`` holds
what they share; this module assembles ``CLAIMS`` in the table's order and evaluates
it.

Leaf package: standard library only (the report may import it; it imports no core).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from . import _adaptive, _merge, _rpc, _scmp, _slotted, _stability
from ._base import (
    LATENESS,
    SLACK_SHARE,
    Claim,
    Lateness,
    Live,
    Missing,
    Row,
    Runs,
    Sources,
    Values,
    Why,
    machine_late,
    one_value,
    spread,
)
from ._live import LIVE, LIVE_JOBS, NO_LIVE
from ._ours import OURS, REORDER, REORDER_WINDOWS, RESTART
from ._rpc import (
    RPC_BENCH,
    bench_verdict,
    rpc_bench_ratios,
    rpc_bench_runs,
    rpc_core_cpu_us,
    rpc_tcp_over_udp,
    rpc_why,
)

__all__ = [
    "CLAIMS", "LATENESS", "LIVE_JOBS", "OURS", "REORDER_WINDOWS", "RPC_BENCH",
    "SCENARIO_PAPERS", "SLACK_SHARE", "Claim", "Lateness", "Live", "Missing", "machine_late",
    "Row", "Runs", "Sources", "Values", "Why", "evaluate", "one_value", "rpc_bench_ratios",
    "rpc_bench_runs", "rpc_core_cpu_us", "rpc_tcp_over_udp", "rpc_why", "spread",
]

#: Every row, in the table's order: the restart row follows the SCMP crash row it
#: answers, the RPC row closes SCMP, the reorder row comes last.
#: Each row's live check, or why a service does not check it live, comes from ``_live``
#: (by the row's claim text).
CLAIMS: tuple[Claim, ...] = tuple(
    dataclasses.replace(claim, live=LIVE.get(claim.claim),
                        no_live=NO_LIVE.get(claim.claim, claim.no_live))
    for claim in (*_scmp.CLAIMS, RESTART, *_rpc.CLAIMS, *_adaptive.CLAIMS,
                  *_slotted.CLAIMS, *_stability.CLAIMS, *_merge.CLAIMS, REORDER)
)


def _judge(per_seed: list[Values], check: object, why: Why,
           seeds: Sequence[Sources]) -> tuple[str, str, int]:
    """The measured text and the verdict of values measured on every seed (a cause
    given as a function is built from the same ``seeds``)."""
    labels = [k for k, _, _ in per_seed[0]]
    fmts = {k: f for k, _, f in per_seed[0]}
    values = [{a: b for a, b, _ in vals} for vals in per_seed]
    measured = ", ".join(
        f"{k}: {spread([v[k] for v in values if k in v], fmts[k])}" for k in labels)
    if not callable(check):
        return measured, "computed", len(per_seed)
    oks = [bool(check({k: x for k, x, _ in vals})) for vals in per_seed]
    n = len(oks)
    if all(oks):
        return measured, "agrees", n
    if callable(why):
        cause = why(seeds)
    else:  # a sentence: the figures come from the seeds that differ
        failed = [i for i, ok in enumerate(oks) if not ok]
        cause = (f"{why + '; ' if why else ''}measured on the seeds that differ: "
                 + ", ".join(f"{k}: {spread([values[i][k] for i in failed], fmts[k])}"
                             for k in labels if all(k in values[i] for i in failed)))
    return measured, f"differs ({sum(oks)} of {n} seeds agree): {cause}", n


def _judge_across(per_seed: list[Values], claim: Claim,
                  seeds: Sequence[Sources]) -> tuple[str, str, int]:
    """The measured text and the verdict of a row on the seeds together
    (``Claim.across``): its values come from every seed's at once and are judged once;
    one seed has no spread, so its verdict is ``not measured here``."""
    n = len(per_seed)
    if n < 2:
        return "-", "not measured here (a spread across seeds needs two seeds or more)", 0
    assert claim.across is not None and callable(claim.check)
    values = claim.across(per_seed)
    measured = ", ".join(f"{k}: {format(x, f)}" for k, x, f in values)
    if claim.check({k: x for k, x, _ in values}):
        return measured, "agrees", n
    cause = claim.why(seeds) if callable(claim.why) else claim.why
    return measured, f"differs (on the {n} seeds together): {cause}", n


def _measure(measure: object, needs: Sequence[str],
             seeds: Sequence[Sources]) -> tuple[list[Values], str]:
    """``measure`` on every seed, or why it cannot be (its runs are not in the data)."""
    per_seed: list[Values] = []
    for sources in seeds:
        absent = [src for src in needs if src not in sources]
        if absent:
            return [], f"runs of {', '.join(absent)} not in this data"
        try:
            assert callable(measure)
            per_seed.append(measure(sources))
        except (Missing, KeyError, ZeroDivisionError) as exc:
            return [], f"needs {exc}"
    return per_seed, "" if per_seed else "no data"


def _live(claim: Claim, seeds: Sequence[Sources]) -> tuple[str, str, str, int]:
    """The live column of ``claim``'s row: measured, where, verdict, runs."""
    live = claim.live
    if live is None:
        return "-", "", "not run live" + (f" ({claim.no_live})" if claim.no_live else ""), 0
    per_seed, missing = _measure(live.measure, (live.job,), seeds)
    if missing:
        return "-", live.where, f"not measured here ({missing})", 0
    measured, verdict, n = _judge(per_seed, live.check, live.why, seeds)
    lateness = [_lateness(sources[live.job]) for sources in seeds]
    if all(late is not None for late in lateness):
        measured += (", timer late p99 ms: " + spread([x[0] for x in lateness if x], ".1f")
                     + ", max ms: " + spread([x[1] for x in lateness if x], ".1f"))
    if any(x is not None for x in lateness):
        verdict = machine_late(lateness, _checks_ms(live, seeds), live.checks) or verdict
    return measured, live.where, verdict, n


def _checks_ms(live: Live, seeds: Sequence[Sources]) -> float:
    """The time ``live`` checks (ms): the smallest over the seeds' runs (0 when the
    runs do not say it: no lateness is then small against it)."""
    if not callable(live.checks_ms):
        return live.checks_ms
    try:
        return min(live.checks_ms(sources[live.job]) for sources in seeds)
    except (Missing, KeyError, ValueError):
        return 0.0


def _lateness(runs: Runs) -> tuple[float, float] | None:
    """(p99, max) lateness (ms) of the live job's own timer, or None (not measured)."""
    run = runs.get(LATENESS.run)
    if run is None or LATENESS.p99 not in run or LATENESS.max not in run:
        return None
    return float(run[LATENESS.p99]), float(run[LATENESS.max])


def evaluate(seeds: Sequence[Sources], *, root: str = "",
             only: Sequence[str] | None = None) -> list[Row]:
    """One row per claim (per paper in ``only``, if given) over the seeds' metrics;
    the live columns from the seeds' live jobs (``LIVE_JOBS``), when they ran."""
    rows = []
    for claim in CLAIMS:
        if only is not None and claim.paper.lower() not in only:
            continue
        lm, lw, lv, ln = _live(claim, seeds)
        if claim.kind == "pending":
            measured, verdict, n = bench_verdict(root, claim.bars)
            rows.append(Row(claim.paper, claim.claim, claim.published, measured,
                            claim.where, verdict, n, lm, lw, lv, ln))
            continue
        per_seed, missing = _measure(
            claim.measure, [src for src in claim.needs if src != "adaptive-reorder"], seeds)
        if missing:
            rows.append(Row(claim.paper, claim.claim, claim.published, "-", claim.where,
                            f"not measured here ({missing})", 0, lm, lw, lv, ln))
            continue
        check = None if claim.kind == "computed" else claim.check
        if claim.across is not None:
            measured, verdict, n = _judge_across(per_seed, claim, seeds)
        else:
            measured, verdict, n = _judge(per_seed, check, claim.why, seeds)
        verdict = one_value(claim, per_seed) or verdict
        rows.append(Row(claim.paper, claim.claim, claim.published, measured, claim.where,
                        verdict, n, lm, lw, lv, ln))
    return rows


#: which papers a scenario's data can answer (the report's sections)
SCENARIO_PAPERS = {"scmp": ("scmp", OURS), "adaptive": ("adaptive",),
                   "slotted": ("slotted",), "stability": ("stability",), "merge": ("merge",)}
