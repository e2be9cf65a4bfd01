"""Shared test configuration.

Hypothesis profiles, chosen by ``HYPOTHESIS_PROFILE``:
- ``dev`` (default): few examples, for quick local runs;
- ``ci``: a fixed, derandomized number of examples (what ``.ci/run`` uses);
- ``thorough``: many examples, for a long local hunt.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=40, deadline=None)
settings.register_profile(
    "ci",
    max_examples=150,
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("thorough", max_examples=2000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
