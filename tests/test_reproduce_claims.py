"""The claims module (one verdict logic for docs/reproduction.md and the report) and
the reproduction's job runner: verdicts over seeds, no verdict that cannot fail,
deterministic results however the jobs are spread."""

from __future__ import annotations

import ast
import pathlib

import pytest

from timebound import claims
from timebound.claims import CLAIMS, evaluate, spread
from timebound.errors import UsageError
from timebound.sim import _reproduce

SRC = pathlib.Path(__file__).parent.parent / "src" / "timebound"


def _merge_runs(late: list[float], mismatches: float = 0.0) -> dict[str, dict[str, float]]:
    return {f"delta={d}": {"order_mismatches": mismatches, "max_buffering": d + 5.0,
                           "buffering_bound": d + 12.0, "late_pct": x}
            for d, x in zip((5, 10, 20), late, strict=True)}


def _row(rows: list[claims.Row], text: str) -> claims.Row:
    return next(r for r in rows if text in r.claim)


def test_agrees_only_when_every_seed_agrees() -> None:
    good = {"merge": _merge_runs([50.0, 30.0, 2.0])}
    bad = {"merge": _merge_runs([50.0, 60.0, 2.0])}
    rows = evaluate([good, good, good], only=["merge"])
    late = _row(rows, "fewer late losses")
    assert late.verdict == "agrees" and late.seeds == 3
    rows = evaluate([good, bad, good], only=["merge"])
    late = _row(rows, "fewer late losses")
    assert late.verdict.startswith("differs (2 of 3 seeds agree)")
    assert "delta=10: 30.00-60.00" in late.measured  # min-max over the seeds


def test_missing_runs_and_pending_and_computed_rows() -> None:
    rows = evaluate([{"merge": _merge_runs([1.0, 1.0, 1.0])}], only=["merge"])
    assert _row(rows, "causal delivery").verdict.startswith("not measured here")
    rows = evaluate([{}], only=["scmp"], root=str(pathlib.Path("/nonexistent")))
    assert _row(rows, "RPC").verdict.startswith("not yet measured")
    stab = {"stability": {f"N={n}/{v}": {"ack_bytes_per_s": 8.0 * n if v == "vector" else 8.0}
                          for n in (2, 4) for v in ("vector", "timestamp")}}
    # the bandwidth row is measured from the wire (ack_wire_bytes_per_s): without it,
    # not measured here (tests/test_stability_rows_measured.py checks its verdicts)
    assert _row(evaluate([stab], only=["stability"]), "bandwidth").verdict.startswith(
        "not measured here")


def test_every_measured_claim_can_fail() -> None:
    """No hard-coded verdict: every measured claim has a check, every differs a cause."""
    for claim in CLAIMS:
        if claim.kind == "measured":
            assert claim.check is not None and claim.measure is not None, claim.claim
            assert claim.why or claim.check is not None


def test_spread_format() -> None:
    assert spread([1.0, 1.0], ".1f") == "1.0"
    assert spread([3.0, 1.0, 2.0], ".0f") == "1-3"


def test_claims_is_a_leaf_package() -> None:
    modules = sorted((SRC / "claims").glob("*.py"))
    assert len(modules) > 1, "the claims package has no modules"
    for module in modules:
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                assert not node.module.startswith("timebound"), (module.name, node.module)
            if isinstance(node, ast.Import):
                assert all(not a.name.startswith("timebound") for a in node.names), module.name


def test_jobs_are_deterministic_whatever_the_workers() -> None:
    jobs = [_reproduce.Job("merge-checks", "merge-checks", (("duration", "300"),), s)
            for s in (1, 2)]
    jobs.append(_reproduce.Job("stability", "stability",
                               (("modes", "fig2"), ("fig2_duration", "30")), 1))
    one = _reproduce.run_local(jobs, 1, None)
    two = _reproduce.run_local(jobs, 2, None)
    assert one == two
    assert one[0]["causal"]["causal_order_violations"] == 0


def test_unwritable_target_is_refused_before_work(tmp_path: pathlib.Path) -> None:
    with pytest.raises(UsageError):
        _reproduce.check_target(str(tmp_path))  # a folder
    with pytest.raises(UsageError):
        _reproduce.check_target("/nonexistent-folder/x.md")


def test_rpc_bench_ratios_are_read_from_the_bench_file(tmp_path: pathlib.Path) -> None:
    bench = tmp_path / "benchmarks" / "rpc_bench.md"
    bench.parent.mkdir()
    bench.write_text(
        "### event loop: asyncio\n\n"
        "- (i) at-most-once / plain UDP = 1.06 (per run: 0.98-1.12, median 1.05, met in 3 of "
        "5 runs, inside run-to-run noise) (bar: <= 1.10: met)\n"
        "- (ii, fresh) TCP per call / at-most-once = 2.5 (per run: 2.20-2.70, median 2.40, "
        "met in 5 of 5 runs) (bar: >= 2.00: met)\n"
        "### event loop: uvloop\n"
        "- (i) at-most-once / plain UDP = 2.06 (per run: 2.00-2.10, median 2.05, met in 0 of "
        "5 runs) (bar: <= 1.10: not met)\n")
    row = _row(evaluate([{}], only=["scmp"], root=str(tmp_path)), "RPC")
    assert row.verdict == "agrees"  # the asyncio bars decide
    assert row.seeds == 5  # over the file's runs
    assert ("asyncio (i) at-most-once / plain UDP: median 1.05x, per run 0.98-1.12, met in 3 "
            "of 5 runs, inside run-to-run noise (bar met)") in row.measured
    bench.write_text(bench.read_text().replace(
        "median 1.05, met in 3 of 5 runs, inside run-to-run noise) (bar: <= 1.10: met)",
        "median 1.80, met in 0 of 5 runs) (bar: <= 1.10: not met)"))
    row = _row(evaluate([{}], only=["scmp"], root=str(tmp_path)), "RPC")
    assert row.verdict.startswith("differs (over 5 bench runs per cell, each bar judged on "
                                  "the median of its per-run ratios): "), row.verdict
    # the explanation quotes this file's figures, never a number written in the code
    assert ("asyncio (i) at-most-once / plain UDP: median 1.80x, per run 0.98-1.12, met in 0 "
            "of 5 runs") in row.verdict
    assert "(ii, fresh)" not in row.verdict.split("what is left")[0]  # a met bar
    assert "one bench run" not in row.verdict
    bench.write_text(bench.read_text() + "\nIn-process cost of one at-most-once null call, "
                     "client and server cores together, no sockets (CPU time): 7.5 µs "
                     "(mypyc-compiled core).\nNull calls, 1000 calls x 5 run(s) per cell\n")
    row = _row(evaluate([{}], only=["scmp"], root=str(tmp_path)), "RPC")
    assert "7.5 us of CPU per call in the client and server cores together " \
           "(mypyc-compiled core, measured" in row.verdict
    assert "TCP per call is itself" not in row.verdict  # (ii, fresh) met here
    bench.write_text(bench.read_text().replace(
        "median 2.40, met in 5 of 5 runs) (bar: >= 2.00: met)",
        "median 1.60, met in 1 of 5 runs, inside run-to-run noise) (bar: >= 2.00: not met)")
        + "\n### event loop: asyncio\n\n| protocol | a | b | c | d | e | f |\n"
        "| TCP, connection per call | 228 | 538 | 2.70 | 224 | 461 | 1.51 |\n")
    row = _row(evaluate([{}], only=["scmp"], root=str(tmp_path)), "RPC")
    assert "asyncio (ii, fresh) TCP per call / at-most-once: median 1.60x, per run 2.20-2.70, " \
           "met in 1 of 5 runs, inside run-to-run noise; in the (ii, fresh) column TCP per " \
           "call is itself only 1.51x plain UDP on loopback" in row.verdict
    # a file written before the bench kept its runs apart: one run, no verdict
    bench.write_text("### event loop: asyncio\n\n"
                     "- (i) at-most-once / plain UDP = 1.05 (bar: <= 1.10: met)\n")
    row = _row(evaluate([{}], only=["scmp"], root=str(tmp_path)), "RPC")
    assert row.verdict.startswith("not yet measured (needs `timebound rpc bench --runs 3` "
                                  "or more"), row.verdict
    assert "asyncio (i) at-most-once / plain UDP: 1.05x (bar met)" in row.measured


def _reorder_runs(rates: list[float], sizes: list[float] | None = None,
                  violations: float = 0.0) -> dict[str, dict[str, float]]:
    sizes = sizes or [1000.0, 2000.0, 3000.0, 4000.0, 12000.0]
    return {f"reorder W={w}": {"reorder_window": float(w), "refused_genuine_rate": r,
                               "table_bytes_mean": b,
                               "at_most_once_violations": violations if w == 4 else 0.0}
            for w, r, b in zip((1, 2, 4, 8, 32), rates, sizes, strict=True)}


def test_reorder_window_row_is_ours_and_can_fail() -> None:
    """The reorder window row (beyond the papers): agrees only with no
    violation, a refused-genuine rate that never rises with W and is lower at W=8 than
    at W=1, and table bytes that never fall."""
    good = {"scmp-reorder": _reorder_runs([0.09, 0.02, 0.001, 0.0, 0.0])}
    row = _row(evaluate([good, good, good], only=[claims.OURS]), "reorder window")
    assert row.paper == "ours (beyond the papers)"
    assert row.verdict == "agrees" and row.seeds == 3
    assert "W=1 refused %: 9.00" in row.measured and "W=32 table B: 12000" in row.measured
    bad_cases = [
        _reorder_runs([0.09, 0.02, 0.001, 0.0, 0.0], violations=1.0),  # a duplicate
        _reorder_runs([0.09, 0.02, 0.03, 0.0, 0.0]),                   # the rate rises
        _reorder_runs([0.0, 0.0, 0.0, 0.0, 0.0]),                      # W=8 not lower
        _reorder_runs([0.09, 0.02, 0.001, 0.0, 0.0],
                      sizes=[1000.0, 900.0, 3000.0, 4000.0, 12000.0]),  # bytes fall
    ]
    for bad in bad_cases:
        row = _row(evaluate([good, {"scmp-reorder": bad}, good], only=[claims.OURS]),
                   "reorder window")
        assert row.verdict.startswith("differs (2 of 3 seeds agree)"), bad
    # an scmp dataset's reorder runs count too (the report); without them: not measured
    row = _row(evaluate([{"scmp": good["scmp-reorder"]}], only=["scmp", claims.OURS]),
               "reorder window")
    assert row.verdict == "agrees"
    row = _row(evaluate([{"scmp": {}}], only=["scmp", claims.OURS]), "reorder window")
    assert row.verdict.startswith("not measured here")


def test_reorder_job_is_in_both_plans() -> None:
    full = dict((label, params) for label, _, params in _reproduce.FULL)
    quick = dict((label, params) for label, _, params in _reproduce.QUICK)
    assert full["scmp-reorder"]["experiments"] == "reorder"
    assert int(quick["scmp-reorder"]["reorder_calls"]) < 200
    # the other quick jobs still take their full settings (no index shift)
    assert quick["adaptive-horizon"]["loads"] == "spikes"
    assert quick["adaptive-reorder"]["clients"] == "10"
