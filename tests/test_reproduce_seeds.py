"""``timebound simulate --reproduce FILE --seeds 7,8,9``: the seeds every reproduction
job runs on (the table must give the same verdicts on seeds 1-3 and 7-9). A verdict
needs at least 3 runs, so fewer seeds are refused in one line before any job runs."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from timebound.errors import UsageError
from timebound.sim import _reproduce


def test_seeds_are_parsed_in_the_order_given() -> None:
    assert _reproduce.parse_seeds("7,8,9") == (7, 8, 9)
    assert _reproduce.parse_seeds(" 9, 1 ,4,12") == (9, 1, 4, 12)
    assert _reproduce.parse_seeds(f"1,2,{2**63 - 1}")[-1] == 2**63 - 1


@pytest.mark.parametrize(("text", "reason"), [
    ("7,8", "a verdict needs at least 3 seeds, got 2 (7,8)"),
    ("7", "a verdict needs at least 3 seeds, got 1 (7)"),
    ("7,8,8", "seed 8 is given twice"),
    ("0,1,2", "a seed must be in [1, 2^63), got 0"),
    (f"1,2,{2**63}", f"a seed must be in [1, 2^63), got {2**63}"),
    ("-1,2,3", "expected a comma list of positive integers such as 7,8,9, got '-1,2,3'"),
    ("7,,9", "expected a comma list of positive integers such as 7,8,9, got '7,,9'"),
    ("7,8,x", "expected a comma list of positive integers such as 7,8,9, got '7,8,x'"),
    ("7;8;9", "expected a comma list of positive integers such as 7,8,9, got '7;8;9'"),
    ("1.5,2,3", "expected a comma list of positive integers such as 7,8,9, got '1.5,2,3'"),
    ("\u0661,2,3", "expected a comma list of positive integers such as 7,8,9, "
                   "got '\u0661,2,3'"),
])
def test_bad_seeds_are_refused(text: str, reason: str) -> None:
    with pytest.raises(UsageError) as err:
        _reproduce.parse_seeds(text)
    assert err.value.option == "--seeds"
    assert err.value.reason == reason


def test_plan_runs_every_job_on_every_seed() -> None:
    jobs = _reproduce.plan(False, (7, 8, 9))
    assert {j.seed for j in jobs} == {7, 8, 9}
    per_seed = {s: sorted(j.name.rsplit(" seed ", 1)[0] for j in jobs if j.seed == s)
                for s in (7, 8, 9)}
    assert per_seed[7] == per_seed[8] == per_seed[9]
    assert len(per_seed[7]) == len(_reproduce.FULL)
    assert _reproduce.plan(False) == _reproduce.plan(False, (1, 2, 3))


def test_table_header_names_the_seeds_and_the_command() -> None:
    other = _reproduce.table([], quick=False, seeds=(7, 8, 9), seconds=1.0, spark=False)
    assert "Every row is measured on seeds 7, 8, 9;" in other
    assert "`timebound simulate --reproduce docs/reproduction.md --seeds 7,8,9`" in other
    default = _reproduce.table([], quick=False, seeds=(1, 2, 3), seconds=1.0, spark=False)
    assert "Every row is measured on seeds 1, 2, 3;" in default
    assert "--seeds" not in default  # the default table's text is unchanged


def _small_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real plan, cut to its merge-checks jobs at a small duration (the verdict of
    every merge-checks row is over their runs)."""
    real_plan = _reproduce.plan

    def small(quick: bool, seeds: tuple[int, ...]) -> list[_reproduce.Job]:
        return [_reproduce.Job(j.label, j.scenario, (("duration", "300"),), j.seed)
                for j in real_plan(quick, seeds) if j.label == "merge-checks"]

    monkeypatch.setattr(_reproduce, "plan", small)
    monkeypatch.setattr(_reproduce, "live_plan", lambda quick, seeds: [])


def test_write_reproduction_runs_the_seeds_given(tmp_path: pathlib.Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _small_plan(monkeypatch)
    seen: list[str] = []
    target = tmp_path / "table.md"
    rows = _reproduce.write_reproduction(str(target), lambda name, i, n: seen.append(name),
                                         seeds=(7, 8, 9), workers=1)
    assert seen == ["merge-checks seed 7", "merge-checks seed 8", "merge-checks seed 9"]
    causal = next(r for r in rows if "causal delivery" in r.claim)
    assert causal.seeds == 3
    assert "measured on seeds 7, 8, 9;" in target.read_text()


def test_cli_passes_the_seeds_to_the_table(tmp_path: pathlib.Path,
                                           monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from timebound.cli import main

    _small_plan(monkeypatch)
    target = tmp_path / "table.md"
    assert main(["simulate", "--reproduce", str(target), "--seeds", "9,4,7", "--quiet"]) == 0
    assert capsys.readouterr().out == f"wrote {target}\n"
    text = target.read_text()
    assert "measured on seeds 9, 4, 7;" in text
    assert "--reproduce docs/reproduction.md --seeds 9,4,7`" in text


def _simulate(tmp_path: pathlib.Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "timebound.cli", "simulate", *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env,
                          check=False)


@pytest.mark.parametrize(("args", "line"), [
    (("--reproduce", "t.md", "--seeds", "7,8"),
     "timebound: error: --seeds: a verdict needs at least 3 seeds, got 2 (7,8)"),
    (("--reproduce", "t.md", "--seeds", "7,8,7"),
     "timebound: error: --seeds: seed 7 is given twice"),
    (("scmp", "--out", "ds", "--seeds", "7,8,9"),
     "timebound: error: --seeds: only with --reproduce"),
])
def test_cli_refuses_bad_seeds_in_one_line(tmp_path: pathlib.Path, args: tuple[str, ...],
                                           line: str) -> None:
    done = _simulate(tmp_path, *args)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", line + "\n")
    assert os.listdir(tmp_path) == []  # refused before any job ran or file was written


def test_help_explains_seeds(tmp_path: pathlib.Path) -> None:
    done = _simulate(tmp_path, "--help")
    text = " ".join(done.stdout.split())
    assert "--seeds S1,S2,S3 with --reproduce: the seeds every job runs on" in text
    assert "at least 3 distinct integers >= 1" in text
    assert "(default 1,2,3)" in text


def test_the_table_has_the_live_columns(tmp_path: pathlib.Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The live jobs run after the simulated ones (each in its own process) and fill the
    live columns of the rows they check, over the same seeds."""
    real_live = _reproduce.live_plan
    _small_plan(monkeypatch)
    monkeypatch.setattr(_reproduce, "live_plan", lambda quick, seeds: [
        job for job in real_live(True, seeds) if job.label == "live-pubsub"])
    seen: list[str] = []
    target = tmp_path / "table.md"
    rows = _reproduce.write_reproduction(str(target), lambda name, i, n: seen.append(name),
                                         seeds=(1, 2, 3), workers=1)
    assert seen[-3:] == ["live-pubsub seed 1", "live-pubsub seed 2", "live-pubsub seed 3"]
    order = next(r for r in rows if "same order (Thm 4.4)" in r.claim)
    # judged unless this machine ran the job's timers late (claims.machine_late)
    late = order.live_verdict.startswith("not measured here (the machine was late by")
    assert order.live_seeds == 3 and (late or order.live_verdict == "agrees"), order
    assert order.live_measured.startswith("mismatches: " if late else "mismatches: 0,")
    assert "timer late p99 ms: " in order.live_measured
    causal = next(r for r in rows if "causal delivery" in r.claim)
    assert causal.live_verdict == "not run live"
    text = target.read_text()
    assert "| live: measured | live: service / run | live: verdict |" in text
    assert "- `live-pubsub` (live): python -m timebound.net.live pubsub" in text


def test_a_failing_live_check_is_one_error_naming_it() -> None:
    from timebound.errors import TimeboundError

    job = _reproduce.Job("live-x", "live", (("kind", "nope"), ("quick", "1")), 1)
    with pytest.raises(TimeboundError, match=r"^live check live-x seed 1 failed: .*"
                                             r"invalid choice: 'nope'"):
        _reproduce.run_live(job)
