"""``timebound.sim``: the discrete-event simulator.

A seeded, reproducible network of clocks, links and nodes that drives the one core
copy of each protocol and writes trace datasets (CONTRIBUTING.md contract) that the
replay commands and the pipeline can re-decide offline. See docs/simulate.md.

- ``Engine`` (``_engine``): the SimPy-shaped kernel; ``Clock`` (``_clocks``);
  ``Link`` and delay distributions (``_links``); ``Reliable`` (``_transport``);
  ``DatasetWriter`` (``_dataset``).
- ``SCENARIOS``: name -> ``Scenario``; ``DEMO_PARAMS``: modest ``--set`` overrides;
  ``run_scenario(name, out_dir, seed=, params=, progress=)``.
- ``estimate_cost(name, values)`` / ``check_cost(...)`` (``_budget``): a scenario's
  memory and time before it starts, and the refusal of what does not fit;
  ``RunProgress`` (``_progress``): progress lines within a run, with an ETA.
"""

from __future__ import annotations

from collections.abc import Callable

from timebound.sim._budget import Estimate, RunPlan, available_memory, format_eta, parse_size
from timebound.sim._budget import check as check_cost
from timebound.sim._budget import estimate as estimate_cost
from timebound.sim._clocks import Clock
from timebound.sim._dataset import DatasetWriter, read_table, run_rows
from timebound.sim._engine import Engine
from timebound.sim._links import (
    Constant,
    Delay,
    Empirical,
    Exponential,
    Link,
    LogNormal,
    parse_delay,
)
from timebound.sim._progress import RunProgress
from timebound.sim._run import run_scenario_with
from timebound.sim._scenario import Param, Scenario
from timebound.sim._spark import map_tasks
from timebound.sim._transport import Packet, Reliable
from timebound.sim.scenarios import load as _load

SCENARIOS: dict[str, Scenario] = _load()

#: ``--set`` overrides for a modest demo scale (all five together well under 60 s).
DEMO_PARAMS: dict[str, dict[str, str]] = {
    "scmp": {"clients": "200", "calls": "5", "many_calls": "300",
             "rhos": "50000,200000,800000,3200000"},
    "adaptive": {"messages": "6000"},
    "slotted": {"duration": "4000000", "slots": "5000,20000,50000"},
    "stability": {"sizes": "2,4,8", "duration": "500000"},
    "merge": {"duration": "5000", "publishers": "4"},
}


def run_scenario(name: str, out_dir: str, *, seed: int = 0,
                 params: dict[str, str] | None = None,
                 progress: Callable[[str, int, int], None] | None = None) -> dict[str, object]:
    """Simulate scenario ``name`` and write its dataset to ``out_dir`` atomically;
    return a summary dict for printing."""
    return run_scenario_with(SCENARIOS, name, out_dir, seed=seed, params=params,
                             progress=progress)


__all__ = [
    "DEMO_PARAMS", "SCENARIOS", "Clock", "Constant", "DatasetWriter", "Delay", "Empirical",
    "Engine", "Estimate", "Exponential", "Link", "LogNormal", "Packet", "Param", "Reliable",
    "RunPlan", "RunProgress", "Scenario", "available_memory", "check_cost", "estimate_cost",
    "format_eta", "map_tasks", "parse_delay", "parse_size", "read_table", "run_rows",
    "run_scenario",
]
