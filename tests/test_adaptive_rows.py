"""The adaptive paper's rows can fail: each check against values like the runs' (agrees)
and against values that break the theorem (differs), and the scenario's measurements
behind them on small runs (the step loads, Lemma 3's count, the spike groups)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from timebound.claims import evaluate
from timebound.sim import read_table, run_scenario
from timebound.sim.scenarios import adaptive


def _runs(**runs: dict[str, float]) -> dict[str, dict[str, float]]:
    return {name.replace("__", "/").replace("_", "-"): values for name, values in runs.items()}


def _step(settle: float, final: float, at_step: float = 1.7, settled: float = 1.0,
          slow_settle: float = 3.0, lost: float = 0.0, outside: float = 0.0) -> dict[str, Any]:
    base = {"step_estimate_over_2x2": at_step, "step_settled": settled,
            "step_after_s": 30.0, "lost_per_accepted": 0.0}
    return _runs(
        step__unlimited={**base, "step_settle_s": 0.2, "step_final_over_2x2": 0.2,
                         "lost": 0.0, "lost_outside_lemma3": 0.0},
        step__limited={**base, "step_settle_s": settle, "step_final_over_2x2": final,
                       "step_messages_to_settle": 290.0},
        step_slow__limited={**base, "step_settle_s": slow_settle, "step_final_over_2x2": 0.4,
                            "step_messages_to_settle": 288.0, "slowdown": 10.0},
        step_up__unlimited={**base, "step_settle_s": 0.0, "step_final_over_2x2": 0.6,
                            "lost": lost, "lost_outside_lemma3": outside},
    )


def _default(lost: float = 31.0, outside: float = 0.0, p_la: float = 0.0015
             ) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for load in ("bounded", "spikes", "daynight"):
        out[f"{load}/unlimited"] = {"lost": lost if load == "spikes" else 0.0,
                                    "lost_outside_lemma3": outside if load == "spikes" else 0.0,
                                    "lost_per_accepted": 0.0015}
        out[f"{load}/limited"] = {"lost_per_accepted": p_la, "p": 10.0}
    out["bounded/small"] = {"lost_per_accepted": 0.13}
    out["bounded/large"] = {"table_mean": 10000.0}
    out["bounded/unlimited"]["table_mean"] = 140.0
    for run in out.values():
        run.update(out_of_order_accepted=0.0, out_of_order_arrivals=3.0)
    return out


def _horizon(final: float = 0.083, p: float = 2.0, spikes: float = 65.0,
             over: float = 0.0) -> dict[str, Any]:
    return {"spikes/limited": {
        "p": p, "window": 200.0, "horizon_spikes": spikes, "spike_share": 0.2,
        "groups_over_h": over, "lost_per_accepted_at_10pct": 0.05,
        "lost_per_accepted_at_25pct": 0.07, "lost_per_accepted_at_50pct": 0.08,
        "lost_per_accepted_at_100pct": final}}


def _verdicts(adaptive_runs: dict[str, Any] | None = None,
              step: dict[str, Any] | None = None,
              horizon: dict[str, Any] | None = None) -> dict[str, str]:
    seed = {"adaptive": adaptive_runs or _default(),
            "adaptive-step": step or _step(0.3, 0.4),
            "adaptive-horizon": horizon or _horizon()}
    rows = evaluate([seed, seed, seed], only=["adaptive"])
    return {row.claim: row.verdict for row in rows}


def _verdict(text: str, **data: Any) -> str:
    found = [v for claim, v in _verdicts(**data).items() if text in claim]
    assert len(found) == 1, text
    return found[0]


def test_every_adaptive_row_agrees_on_values_like_the_runs() -> None:
    verdicts = _verdicts()
    assert len(verdicts) == 6
    assert all(v == "agrees" for v in verdicts.values()), verdicts


@pytest.mark.parametrize("step", [
    _step(0.3, 0.4, at_step=0.9),       # the estimate at the step is below 2 X2 already
    _step(0.3, 1.2),                    # the limited estimate ends at 2 X2 or above
    _step(0.3, 0.4, settled=0.0),       # never settles below 2 X2
    _step(16.0, 0.4),                   # settles only in the second half after the step
])
def test_theorems_4_8_row_differs_on_a_wrong_estimate(step: dict[str, Any]) -> None:
    assert _verdict("Theorems 4, 8", step=step).startswith("differs")


def test_theorem_6_row_differs_on_a_loss_outside_lemma_3_or_no_loss() -> None:
    assert _verdict("Theorem 6", adaptive_runs=_default(outside=1.0)).startswith("differs")
    assert _verdict("Theorem 6", step=_step(0.3, 0.4, lost=3.0, outside=1.0)
                    ).startswith("differs")
    assert _verdict("Theorem 6", adaptive_runs=_default(lost=0.0)).startswith("differs")


@pytest.mark.parametrize("horizon,default", [
    (_horizon(final=0.6), _default()),      # L/A above 1/p = 0.5
    (_horizon(p=3.0), _default()),          # p above (S - H)/H = 2.08: outside
    (_horizon(over=2.0), _default()),       # groups with more than H spikes: outside
    (_horizon(), _default(p_la=0.12)),      # a default load's L/A * p above 1
])
def test_theorem_10_row_differs_above_1_over_p_or_outside(horizon: dict[str, Any],
                                                          default: dict[str, Any]) -> None:
    verdict = _verdict("Theorem 10", horizon=horizon, adaptive_runs=default)
    assert verdict.startswith("differs")


def test_theorem_11_row_differs_when_settling_does_not_grow_with_the_slowdown() -> None:
    assert _verdict("Theorem 11", step=_step(0.3, 0.4, slow_settle=0.35)).startswith("differs")


def _lemma(estimate: int = 65536) -> Any:
    """A tracker with only Lemma 3's state (GC every 100000 ticks, epsilon 10000)."""
    tracked: Any = object.__new__(adaptive._Tracked)
    tracked.engine = SimpleNamespace(now=0)
    tracked.net = SimpleNamespace(epsilon=10_000)
    tracked.opts = SimpleNamespace(gc_every=100_000, estimator="unlimited")
    tracked.estimate = estimate
    tracked.increase = (0, estimate)
    tracked.pending = []
    tracked.previous = 0
    tracked.last_arrival = 0
    tracked.lost_outside = tracked.increases = tracked.decreases = 0
    return tracked


def _feed(tracked: Any, events: list[tuple[int, bool, int]]) -> float:
    for now, lost, estimate in events:
        tracked.engine.now = tracked.last_arrival = now
        tracked._lemma3(lost, estimate)
    return float(dict((m, v) for m, v, _ in tracked.lemma_metrics())["lost_outside_lemma3"])


def test_lemma_3_count() -> None:
    # within the new estimate after an increase: allowed
    assert _feed(_lemma(), [(10_000, True, 65536), (500_000, False, 65536)]) == 0
    # in the GC period before an increase: allowed
    assert _feed(_lemma(), [(1_000_000, True, 65536), (1_050_000, False, 131072)]) == 0
    # long after the last increase, and the next change is a decrease: outside
    assert _feed(_lemma(), [(1_000_000, True, 65536), (1_050_000, False, 32768)]) == 1
    # long after, and no increase for more than a GC period: outside (also at the end)
    assert _feed(_lemma(), [(1_000_000, True, 65536), (1_200_000, False, 65536),
                            (1_400_000, False, 131072)]) == 1
    assert _feed(_lemma(), [(1_000_000, True, 65536), (1_400_000, False, 65536)]) == 1
    # a GC at the loss's own arrival ran before its decision: a decrease there and the
    # loss explained by the next increase
    assert _feed(_lemma(), [(1_000_000, True, 32768), (1_050_000, False, 65536)]) == 0


def _metrics(path: Path) -> dict[str, dict[str, float]]:
    got: dict[str, dict[str, float]] = {}
    for row in read_table(str(path), "metrics").to_pylist():
        if row["t"] is None:
            got.setdefault(row["run"], {})[row["measure"]] = row["value"]
    return got


def test_step_loads_small_run(tmp_path: Path) -> None:
    out = tmp_path / "step"
    run_scenario("adaptive", str(out), seed=2, params={
        "messages": "2000", "clients": "50", "loads": "step,step-slow,step-up",
        "estimators": "unlimited,limited", "step_at": "1000000"})
    m = _metrics(out)
    fast, slow = m["step/limited"], m["step-slow/limited"]
    assert fast["step_estimate_over_2x2"] > 1  # the step makes the bound matter
    assert fast["step_settled"] == slow["step_settled"] == 1
    assert fast["step_x2"] < fast["step_x1"] / 2
    # the same traffic up to the step; slowed, settling takes longer, not more messages
    assert slow["step_x1"] == fast["step_x1"]
    assert slow["step_settle_s"] > 2 * fast["step_settle_s"]
    assert slow["step_messages_to_settle"] < 2 * fast["step_messages_to_settle"]
    assert m["step-up/unlimited"]["step_x2"] > 2 * m["step-up/unlimited"]["step_x1"]
    for run in ("step/unlimited", "step-up/unlimited", "step-slow/unlimited"):
        assert m[run]["lost_outside_lemma3"] == 0
    assert "lost_outside_lemma3" not in m["step/limited"]


def test_spike_groups_count_the_hypothesis(tmp_path: Path) -> None:
    common = {"messages": "2000", "clients": "50", "loads": "spikes", "estimators": "limited",
              "spike": "100000", "bounded_values": "10000", "window": "100"}
    inside, outside = tmp_path / "in", tmp_path / "out"
    run_scenario("adaptive", str(inside), seed=1,
                 params={**common, "spike_p": "0.05", "spikes": "30", "p": "2"})
    run_scenario("adaptive", str(outside), seed=1,
                 params={**common, "spike_p": "0.4", "spikes": "30", "p": "2"})
    a, b = _metrics(inside)["spikes/limited"], _metrics(outside)["spikes/limited"]
    assert a["groups"] == b["groups"] == 20
    assert a["groups_over_h"] == 0 and 0.02 < a["spike_share"] < 0.09
    assert b["groups_over_h"] >= 15 and b["spike_share"] > 0.3



def _reorder(offered: float, accepted: float) -> dict[str, Any]:
    runs = _default()
    for run in runs.values():
        run.update(out_of_order_accepted=accepted, out_of_order_arrivals=offered)
    return runs


def test_theorem_2_with_nothing_offered_is_not_measured_here() -> None:
    """A verdict only from data that can contradict it. With no
    out-of-order arrival offered (and none accepted) the row says so instead of
    "differs"; one accepted is a violation whatever was offered."""
    theorem = "no duplicate and no out-of-order message"
    assert _verdict(theorem, adaptive_runs=_reorder(3, 0)).startswith("agrees")
    nothing = _verdict(theorem, adaptive_runs=_reorder(0, 0))
    assert nothing.startswith("not measured here") and "offer none" in nothing, nothing
    assert _verdict(theorem, adaptive_runs=_reorder(0, 1)).startswith("differs")
    assert _verdict(theorem, adaptive_runs=_reorder(3, 1)).startswith("differs")
