"""The scenarios, one module each; ``SCENARIOS`` maps name -> ``Scenario``."""

from __future__ import annotations

from timebound.sim._scenario import Scenario


def load() -> dict[str, Scenario]:
    from timebound.sim.scenarios import adaptive, merge, scmp, slotted, stability

    return {m.SCENARIO.name: m.SCENARIO for m in (scmp, adaptive, slotted, stability, merge)}
