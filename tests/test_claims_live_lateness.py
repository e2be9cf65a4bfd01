"""A live row is judged only when its runs' own timer lateness is small against the time
the row checks (``timebound.claims.machine_late``, the rule ``claims._live`` states):
late by more than ``SLACK_SHARE`` of it on some seed, the verdict is ``not measured
here (the machine was late by ...)`` whatever the check found; within it, the check's
own verdict. Pure: made-up runs, no network."""

from __future__ import annotations

import dataclasses
from typing import Any

from timebound import claims
from timebound.claims import CLAIMS, LATENESS, SLACK_SHARE, Live, machine_late

JOB = "live-test"


def _claim(checks_ms: Any) -> claims.Claim:
    """A row whose live check reads one value ``v`` (0 agrees, else differs)."""
    live = Live(JOB, lambda s: [("v", s[JOB]["run"]["v"], ".0f")],
                lambda v: v["v"] == 0, "live: a test", why="v was not 0",
                checks_ms=checks_ms, checks="slot")
    return dataclasses.replace(CLAIMS[0], live=live)


def _seeds(v: float, p99s: list[float]) -> list[dict[str, Any]]:
    return [{JOB: {"run": {"v": v, "slot_ms": 10.0},
                   LATENESS.run: {LATENESS.p99: p99, LATENESS.max: 2 * p99,
                                  LATENESS.firings: 100.0}}} for p99 in p99s]


def _live_verdict(claim: claims.Claim, seeds: list[dict[str, Any]]) -> str:
    return claims._live(claim, seeds)[2]


def test_the_rule_on_its_own() -> None:
    bound = SLACK_SHARE * 10
    assert machine_late([(bound, bound * 3)] * 3, 10, "slot") is None
    assert machine_late([None, None, None], 10, "slot") is None  # not measured: judged
    late = machine_late([(0.1, 0.2), (bound * 1.5, 30.0), (0.1, 0.3)], 10, "slot")
    assert late is not None and late.startswith(
        "not measured here (the machine was late by 0.1-1.5 ms"), late
    assert "max 0.2-30.0 ms, on 1 of 3 seeds" in late and "10 ms slot" in late


def test_small_lateness_gives_the_checks_verdict_large_lateness_not_measured() -> None:
    for checks_ms in (10.0, lambda runs: runs["run"]["slot_ms"]):
        claim = _claim(checks_ms)
        assert _live_verdict(claim, _seeds(0, [0.2, 0.5, 0.9])) == "agrees"
        assert _live_verdict(claim, _seeds(1, [0.2, 0.5, 0.9])).startswith(
            "differs (0 of 3 seeds agree): v was not 0")
        for v in (0, 1):  # a late machine: no verdict, and no cause blaming the rule
            verdict = _live_verdict(claim, _seeds(v, [0.2, 4.0, 0.9]))
            assert verdict.startswith("not measured here (the machine was late by"), verdict
            assert "v was not 0" not in verdict
    measured = claims._live(_claim(10.0), _seeds(0, [0.2, 4.0, 0.9]))[0]
    assert measured == "v: 0, timer late p99 ms: 0.2-4.0, max ms: 0.4-8.0"


def test_every_live_row_names_the_time_it_checks() -> None:
    lives = [c.live for c in CLAIMS if c.live is not None]
    assert lives
    for live in lives:
        assert live.checks and (callable(live.checks_ms) or live.checks_ms > 0), live.where
