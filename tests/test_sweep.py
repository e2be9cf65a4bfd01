"""``timebound sweep``: grid x seeds as Spark tasks into one dataset folder that the
pipeline and the report read; a failed run names its grid point and seed."""

from __future__ import annotations

import json
import pathlib
import re
from typing import Any

import pyarrow.parquet as pq
import pytest

from timebound.cli import main

pytestmark = pytest.mark.spark


def test_sweep_merges_runs_and_the_report_plots_the_spread(
        spark: Any, tmp_path: pathlib.Path, capsys: Any) -> None:
    out = tmp_path / "sweep"
    grid = ["--grid", "deltas=5,20", "--grid", "duration=150"]
    code = main(["sweep", "merge", *grid, "--seeds", "2", "--out", str(out)])
    assert code == 0
    captured = capsys.readouterr()
    err = captured.err
    # both counts, named: 4 scenario runs wrote 8 runs of the dataset
    assert re.search(r"^sweep merge: 4 run\(s\) \(grid points x seeds\) in [\d.]+ s, 8 "
                     r"dataset run\(s\) \(what timebound pipeline counts\)$",
                     captured.out, re.M), captured.out
    assert "sweep [4/4]" in err and "grid point deltas=20,duration=150 seed 2" in err
    assert re.search(r"^sweep \[1/4\] grid point .* ETA \d", err, re.M)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["sweep"] == {"grid": {"deltas": ["5", "20"], "duration": ["150"]},
                                 "seeds": [1, 2]}
    runs = {r["run"] for r in manifest["runs"]}
    assert "deltas=5,duration=150/seed=1/delta=5" in runs and len(runs) == 8
    arrivals = pq.read_table(out / "arrivals").to_pandas()
    assert set(arrivals.run.unique()) <= runs
    assert arrivals.run.str.contains("/seed=2/").any()
    # seed s of a grid point is exactly `simulate --seed s` with those --set values
    assert main(["simulate", "merge", "--seed", "2", "--set", "deltas=20", "--set",
                 "duration=150", "--out", str(tmp_path / "one"), "--quiet"]) == 0
    one = pq.read_table(tmp_path / "one" / "arrivals").to_pandas()
    mine = arrivals[arrivals.run.str.startswith("deltas=20,duration=150/seed=2/")]
    assert len(mine) == len(one) and list(mine.msg) == list(one.msg)
    # the pipeline reads it like any other dataset; the report plots against the key
    assert main(["pipeline", str(out), "--out", str(tmp_path / "pipe")]) == 0
    assert main(["report", str(tmp_path / "pipe")]) == 0
    page = (tmp_path / "pipe" / "report.html").read_text()
    assert "against deltas (spread across seeds)" in page
    assert "class='verdict" in page


def test_a_failed_run_names_its_grid_point_and_seed(
        spark: Any, tmp_path: pathlib.Path, capsys: Any) -> None:
    code = main(["sweep", "adaptive", "--grid", "spikes=4,250", "--grid", "messages=10",
                 "--grid", "clients=2", "--seeds", "1", "--out", str(tmp_path / "bad"),
                 "--quiet"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "grid point spikes=250,messages=10,clients=2 seed 1" in err
    assert not (tmp_path / "bad").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp left


def test_bad_grid_is_refused_before_spark(tmp_path: pathlib.Path, capsys: Any) -> None:
    for args in (["--grid", "nosuch=1,2"], ["--grid", "deltas="], ["--grid", "deltas=x"],
                 ["--grid", "deltas=5", "--seeds", "0"]):
        assert main(["sweep", "merge", *args, "--out", str(tmp_path / "o")]) == 2
        assert capsys.readouterr().err.startswith("timebound: error:")


def test_reproduce_with_spark_gives_the_local_table(
        spark: Any, tmp_path: pathlib.Path, monkeypatch: Any) -> None:
    from timebound.sim import _reproduce

    tiny = [_reproduce.Job("merge-checks", "merge-checks", (("duration", "300"),), s)
            for s in (1, 2, 3)]
    monkeypatch.setattr(_reproduce, "plan", lambda quick, seeds: tiny)
    monkeypatch.setattr(_reproduce, "live_plan", lambda quick, seeds: [])  # not Spark's
    local = _reproduce.write_reproduction(str(tmp_path / "local.md"))
    remote = _reproduce.write_reproduction(str(tmp_path / "spark.md"), spark=True)
    assert local == remote
    causal = next(r for r in local if "causal delivery" in r.claim)
    assert causal.verdict == "agrees" and causal.seeds == 3


@pytest.mark.parametrize(("grid", "reason"), [
    ("deltas=5,,10", "--grid: an empty value in 'deltas=5,,10' (value 2 of 3)"),
    ("deltas=5,10,", "--grid: an empty value in 'deltas=5,10,' (value 3 of 3)"),
    ("deltas=5,10,5", "--grid: value '5' given twice in 'deltas=5,10,5'"),
])
def test_an_empty_or_repeated_grid_value_is_refused(tmp_path: pathlib.Path, capsys: Any,
                                                    grid: str, reason: str) -> None:
    assert main(["sweep", "merge", "--grid", grid, "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err == f"timebound: error: {reason}\n"
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("args", "command"), [
    (["sweep", "merge", "--grid", "deltas=5,10", "--seeds", "1", "--out"],
     "timebound sweep"),
    (["simulate", "--spark", "--quick", "--reproduce"], "timebound simulate --spark"),
])
def test_without_pyspark_the_line_names_the_command_and_the_extra(
        tmp_path: pathlib.Path, args: list[str], command: str) -> None:
    """One line naming the command and the extra (simulate --spark said '--spark:
    PySpark is not installed')."""
    from tests.test_spark_library import without_pyspark

    done = without_pyspark("from timebound.cli import main\n"
                           f"sys.exit(main({[*args, str(tmp_path / 'o')]!r}))\n", tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (f"timebound: error: {command} needs pyspark, which is not "
                           "installed: pip install 'timebound[spark]'\n")
    assert not (tmp_path / "o").exists()


def test_an_unwritable_out_names_the_option(capsys: Any) -> None:
    """``--out /proc/x`` named the hidden staging folder it could not create."""
    assert main(["sweep", "merge", "--seeds", "1", "--out", "/proc/x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("timebound: error: --out: cannot write '/proc/x': ")
    assert ".sweep-" not in err and err.count("\n") == 1
