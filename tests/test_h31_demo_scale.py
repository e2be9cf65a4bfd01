"""``timebound demo --scale F`` runs for every F its help allows ("every option
is checked before step 1"). At the smallest scale, 0.01, a demo size scaled below a
scenario's own lower bound (stability's ``duration`` >= 10000) used to stop the demo in
step 2, after the examples and two datasets were written; the sizes are now raised to
each parameter's lower bound, and checked with the other options before step 1."""

from __future__ import annotations

import pytest

from timebound.demo import scaled
from timebound.sim import DEMO_PARAMS, SCENARIOS


@pytest.mark.parametrize("scale", [0.01, 0.05, 1.0, 100.0])
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_scale_in_range_gives_sizes_the_scenario_accepts(name: str,
                                                                scale: float) -> None:
    sizes = scaled(DEMO_PARAMS.get(name, {}), scale, SCENARIOS[name])
    values = SCENARIOS[name].resolve(sizes)  # raises the one-line --set error if not
    for key in sizes:
        lowest = SCENARIOS[name].param(key).lo
        if lowest is not None and isinstance(values[key], int | float):
            assert values[key] >= lowest, (key, sizes)
