"""Progress moves within a run, and long simulate / sweep / pipeline runs show an ETA
measured from their rate.

The within-run lines come from real simulator runs (``RunProgress`` with its interval
set to 0, so a run of a second shows them; the command's interval is ~2 s). No
assertion is about how long anything took.
"""

from __future__ import annotations

import io
import pathlib
import re
from typing import Any

import pytest

from timebound.cli import main
from timebound.pipeline.job import eta_after
from timebound.sim import SCENARIOS, RunProgress, estimate_cost, format_eta, run_scenario
from timebound.sweep import Point, SweepProgress, TaskProgress

ETA = r"ETA (\d+s|\d+m\d\ds|\d+h\d\dm|\d+d\d\dh)"
WITHIN = re.compile(r"^run (\d+)/(\d+) (.+): (\d+)% \(([\d,]+)/([\d,]+) (calls|ticks)\)"
                    rf"( {ETA})?$")


def within_lines(name: str, params: dict[str, str], out: pathlib.Path,
                 quiet: bool = False) -> list[re.Match[str]]:
    stream = io.StringIO()
    cost = estimate_cost(name, SCENARIOS[name].resolve(params))
    run_scenario(name, str(out), params=params,
                 progress=RunProgress(quiet, cost, every=0, stream=stream))
    lines = stream.getvalue().splitlines()
    found = [m for m in map(WITHIN.match, lines) if m]
    assert all(WITHIN.match(line) or line.startswith("[") for line in lines), lines
    return found


def test_calls_move_within_one_run_with_an_eta(tmp_path: pathlib.Path) -> None:
    params = {"experiments": "sweep", "rhos": "1000000,2000000", "clients": "100",
              "calls": "50"}
    found = within_lines("scmp", params, tmp_path / "d")
    runs = {m.group(1) for m in found}
    assert runs == {"1", "2"}  # both runs report from inside, not only between runs
    for run in runs:
        mine = [m for m in found if m.group(1) == run]
        done = [int(m.group(5).replace(",", "")) for m in mine]
        assert done == sorted(done) and all(d <= 5000 for d in done)
        assert {m.group(6) for m in mine} == {"5,000"} and mine[0].group(2) == "2"
        assert mine[0].group(3) == f"scmp rho={run}000000"
    assert any(m.group(8) for m in found)  # an ETA while work is left


def test_simulated_time_moves_within_a_run_of_a_timed_scenario(
        tmp_path: pathlib.Path) -> None:
    found = within_lines("slotted", {"schemes": "a", "slots": "20000",
                                     "duration": "4000000"}, tmp_path / "d")
    assert found and {m.group(7) for m in found} == {"ticks"}
    assert {m.group(6) for m in found} == {"4,000,000"}


def test_quiet_prints_nothing(tmp_path: pathlib.Path, capsys: Any) -> None:
    params = {"experiments": "sweep", "rhos": "1000000", "clients": "50", "calls": "20"}
    assert within_lines("scmp", params, tmp_path / "d", quiet=True) == []
    assert main(["simulate", "merge", "--set", "duration=150", "--set", "deltas=5",
                 "--out", str(tmp_path / "m"), "--quiet"]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (9, "9s"), (59.2, "1m00s"), (80, "1m20s"), (3599, "59m59s"),
    (3725, "1h02m"), (100 * 3600, "4d04h"),
])
def test_the_eta_spelling(seconds: float, text: str) -> None:
    assert format_eta(seconds) == text


def test_the_eta_is_the_rate_so_far_applied_to_the_work_left() -> None:
    assert eta_after(1, 3, 10) == " ETA 30s"
    assert eta_after(2, 1, 160) == " ETA 1m20s"
    assert eta_after(1, 0, 10) == eta_after(0, 5, 10) == ""


def test_sweep_lines_carry_an_eta_until_the_last_run() -> None:
    lines: list[str] = []
    progress = SweepProgress([100, 100, 200], lines.append)
    progress("grid point deltas=5 seed 1", 1, 3)
    progress("grid point deltas=5 seed 2", 2, 3)
    progress("grid point deltas=20 seed 1", 3, 3)
    assert re.fullmatch(rf"sweep \[1/3\] grid point deltas=5 seed 1 {ETA}", lines[0])
    assert re.fullmatch(rf"sweep \[2/3\] grid point deltas=5 seed 2 {ETA}", lines[1])
    assert lines[2] == "sweep [3/3] grid point deltas=20 seed 1"


def test_a_sweep_task_reports_within_its_run_and_the_driver_prints_it(
        tmp_path: pathlib.Path) -> None:
    """The task side (``TaskProgress``, what ``run_point`` gives the scenario inside a
    Spark task) and the driver side (``SweepProgress.poll``), without Spark."""
    values = (("experiments", "sweep"), ("rhos", "1000000,2000000"), ("clients", "100"),
              ("calls", "50"))
    point = Point("scmp", values, 1, str(tmp_path), number=0)
    run_scenario("scmp", str(tmp_path / "run"), seed=1, params=dict(values),
                 progress=TaskProgress(point, every=0))
    fraction, _, text = (tmp_path / "progress" / "0").read_text().strip().partition(" ")
    assert 0.5 < float(fraction) <= 1.0  # the second of two runs, near its end
    assert re.fullmatch(r"run 2/2 \d+% \([\d,]+/5,000 calls\)", text), text
    lines: list[str] = []
    progress = SweepProgress([10_000, 10_000], lines.append,
                             names=[point.name, "grid point other seed 1"],
                             staging=str(tmp_path))
    progress.poll()
    assert len(lines) == 1
    assert re.fullmatch(rf"sweep \[0/2\] grid point experiments=sweep,.* seed 1: "
                        rf"run 2/2 \d+% \([\d,]+/5,000 calls\) {ETA}", lines[0]), lines
    progress(point.name, 1, 2)  # finished: no longer polled as in progress
    progress.poll()
    assert len(lines) == 2 and lines[1].startswith("sweep [1/2] grid point experiments=")
