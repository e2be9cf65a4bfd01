"""The reproduction's merge checks (sim/_merge_checks.py, rows of docs/reproduction.md)
run end to end: causal delivery holds (Theorem 4.5) and a corrupted state recovers
within its bound (Theorems 3.7, 4.6) on a seed, through the merger's own verbs."""

from __future__ import annotations

from timebound.sim._merge_checks import run_checks


def test_causal_order_holds_and_a_corrupted_state_recovers_in_bound() -> None:
    checks = run_checks(1)
    causal = checks["causal"]
    assert causal["causal_order_violations"] == 0
    assert causal["causal_pairs_checked"] > 1000
    assert causal["delivered"] == causal["published"]
    stabilize = checks["stabilize"]
    assert stabilize["recovery_ticks"] <= stabilize["recovery_bound"]
