"""``run_scenario``: resolve parameters, simulate, write the dataset atomically."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from timebound.errors import UsageError
from timebound.sim._dataset import DatasetWriter
from timebound.sim._scenario import Scenario


def run_scenario_with(scenarios: dict[str, Scenario], name: str, out_dir: str, *,
                      seed: int = 0, params: dict[str, str] | None = None,
                      progress: Callable[[str, int, int], None] | None = None
                      ) -> dict[str, object]:
    scenario = scenarios.get(name)
    if scenario is None:
        raise UsageError("SCENARIO", f"unknown scenario {name!r}; choose one of "
                                     + ", ".join(scenarios))
    if not 0 <= seed < 2**63:
        raise UsageError("--seed", f"must be in [0, 2^63), got {seed}")
    values = scenario.resolve(params)
    ds = DatasetWriter(out_dir)
    try:
        result = scenario.run(ds, values, seed, progress)
        manifest = {
            "scenario": name,
            "seed": seed,
            "params": {p.name: _plain(values[p.name]) for p in scenario.params
                       if p.recorded(values)},
            "runs": result["runs"],
            "claims": result["claims"],
            "created_by": "timebound simulate",
        }
        counts = ds.commit(manifest)
    except BaseException:
        ds.abort()
        raise
    return {
        "scenario": name,
        "seed": seed,
        "out": ds.out_dir,
        "runs": [r["run"] for r in result["runs"]],
        "tables": counts,
        "summary": result.get("summary", {}),
    }


def _plain(value: Any) -> Any:
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return value
