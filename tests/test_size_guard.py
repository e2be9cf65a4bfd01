"""``simulate`` and ``sweep`` estimate a run's memory and time before they start and
refuse what does not fit in one line, exit 2, nothing written.

The override is the limit itself: ``--max-memory SIZE`` / ``--max-time DURATION``. The
tests make a small run too big with a low limit, rather than start a really large one.
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from timebound.cli import main
from timebound.errors import UsageError
from timebound.sim import (
    DEMO_PARAMS,
    SCENARIOS,
    check_cost,
    estimate_cost,
    parse_size,
)

#: A run far too large: 7 runs of a million clients x a million calls.
HUGE = ["simulate", "scmp", "--set", "clients=1000000", "--set", "calls=1000000",
        "--set", "experiments=sweep"]
SMALL_MERGE = ["simulate", "merge", "--set", "duration=150", "--set", "deltas=5"]


def one_error_line(capsys: Any) -> str:
    captured = capsys.readouterr()
    assert captured.out == ""
    lines: list[str] = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("timebound: error: "), captured.err
    return str(lines[0])


def test_a_huge_run_is_refused_in_one_line_before_anything_is_written(
        tmp_path: pathlib.Path, capsys: Any) -> None:
    assert main([*HUGE, "--out", str(tmp_path / "big")]) == 2
    line = one_error_line(capsys)
    assert "--max-memory" in line and "simulate scmp" in line
    assert "7 run(s), 7,000,000,000,000 calls" in line and "GiB of memory" in line
    assert list(tmp_path.iterdir()) == []  # no dataset, no temporary folder


def test_a_low_max_memory_refuses_and_a_higher_one_lets_the_same_run_start(
        tmp_path: pathlib.Path, capsys: Any) -> None:
    out = tmp_path / "d"
    assert main([*SMALL_MERGE, "--out", str(out), "--max-memory", "1M"]) == 2
    line = one_error_line(capsys)
    assert "--max-memory is 1.0 MiB" in line and "give --max-memory SIZE" in line
    assert "MiB of memory (1 run(s), " in line and "publications" in line
    assert list(tmp_path.iterdir()) == []
    assert main([*SMALL_MERGE, "--out", str(out), "--max-memory", "64G", "--quiet"]) == 0
    assert (out / "manifest.json").exists()


def test_a_short_max_time_refuses_naming_the_estimate(tmp_path: pathlib.Path,
                                                      capsys: Any) -> None:
    # stability's defaults: minutes of simulated deliveries, refused under one second
    assert main(["simulate", "stability", "--out", str(tmp_path / "s"),
                 "--max-time", "1s"]) == 2
    line = one_error_line(capsys)
    assert "--max-time" in line and "the limit is 1s" in line
    assert "deliveries" in line and "give --max-time DURATION" in line
    assert list(tmp_path.iterdir()) == []


def test_a_sweep_is_refused_before_spark_starts(tmp_path: pathlib.Path,
                                                capsys: Any) -> None:
    # no spark fixture: the refusal comes before any session (or PySpark import)
    assert main(["sweep", "merge", "--grid", "deltas=5,20", "--grid", "duration=150",
                 "--seeds", "2", "--out", str(tmp_path / "sw"), "--max-memory", "1M"]) == 2
    line = one_error_line(capsys)
    assert "sweep merge (2 run(s) at once)" in line and "--max-memory" in line
    assert "4 run(s)" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [
    ["--max-memory", "lots"], ["--max-memory", "-5G"], ["--max-memory", "0"],
    ["--max-time", "5"], ["--max-time", "1d"], ["--max-time", "1.5h"],
])
def test_a_bad_limit_is_one_line(argv: list[str], tmp_path: pathlib.Path,
                                 capsys: Any) -> None:
    assert main([*SMALL_MERGE, "--out", str(tmp_path / "d"), *argv]) == 2
    assert argv[0] in one_error_line(capsys)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_docs_and_tests_sizes_pass_untouched(name: str) -> None:
    """Every scenario's defaults (docs/simulate.md) and the demo's sizes fit 2 GiB and
    the default time limit."""
    for params in ({}, DEMO_PARAMS[name]):
        cost = estimate_cost(name, SCENARIOS[name].resolve(params))
        check_cost(cost, max_memory=2 * 2**30, max_time=None, what=name)
        assert cost.memory > 0 and cost.seconds > 0


def test_the_estimate_follows_the_size_of_the_runs() -> None:
    scmp = SCENARIOS["scmp"]
    small = estimate_cost("scmp", scmp.resolve({"experiments": "sweep", "rhos": "1000"}))
    wide = estimate_cost("scmp", scmp.resolve({"experiments": "sweep", "rhos": "1000,2000"}))
    big = estimate_cost("scmp", scmp.resolve({"experiments": "sweep", "rhos": "1000",
                                               "calls": "100"}))
    assert [r.units for r in small.runs] == [10_000]  # 1000 clients x 10 calls
    assert wide.memory == small.memory and wide.seconds > small.seconds  # one at a time
    assert big.memory > small.memory and big.units == 10 * small.units
    with pytest.raises(UsageError) as refused:
        check_cost(big, max_memory=small.memory, max_time=None, what="simulate scmp")
    assert refused.value.option == "--max-memory"


def test_sizes_are_read_with_binary_units() -> None:
    assert parse_size("512M") == 512 * 2**20
    assert parse_size("2GiB") == parse_size("2g") == 2 * 2**30
    assert parse_size("1500") == 1500
    for bad in ("", "G", "1X", "nan", "-1M"):
        with pytest.raises(UsageError):
            parse_size(bad)
