"""Every script in benchmarks/ runs at its ``--smoke`` size (seconds), so a benchmark
broken by an API change fails the suite instead of rotting. Scripts are globbed: a new
benchmark is covered as soon as it exists (it must accept ``--smoke``).

One test per script, each script in a fresh folder. The Spark scripts that keep their
session in their own process (``ONE_JVM``) run one after another in one Python
process, as ``python script.py --smoke`` would run each (``runpy``, ``__main__``,
their own ``sys.argv``, folder, stdout and stderr): each stops its session at the end
and the next starts one on the same JVM, so the five start one JVM, not five, and the
later ones run on a JVM that has compiled Spark's code already. The others run as
their own process, spread over the suite's workers. A script whose output carries
more than a return code (``CHECKS``) has that output checked in its test."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = sorted(BENCHMARKS.glob("*.py"))
TIMEOUT = 300
#: The Spark scripts (each starts a JVM of its own), longest smoke first: they are
#: collected first, so the workers start on them and the short ones fill in after.
SPARK = ("bench_pipeline.py", "bench_end_to_end.py", "bench_operators.py",
         "profile_pipeline.py", "bench_reorder.py", "bench_compare.py")
ORDER = sorted(SCRIPTS, key=lambda s: (SPARK.index(s.name) if s.name in SPARK
                                       else len(SPARK), s.name))
#: The Spark scripts whose session lives in their own process (``bench_end_to_end.py``
#: runs ``timebound pipeline`` processes instead): run in one process, one JVM.
ONE_JVM = ("bench_pipeline.py", "bench_operators.py", "profile_pipeline.py",
           "bench_reorder.py", "bench_compare.py")
#: Runs each script (argv[1]: [[script, folder], ...]) as ``python script --smoke``
#: would, one after another; writes [returncode, stdout, stderr] per script to argv[2].
_ONE_PROCESS = """
import contextlib, io, json, os, runpy, sys, traceback
results, scripts, where = {}, json.loads(sys.argv[1]), sys.argv[2]
for script, folder in scripts:
    os.chdir(folder)
    sys.argv = [script, "--smoke"]
    out, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
        except BaseException:
            traceback.print_exc()
            code = 1
    results[os.path.basename(script)] = [code, out.getvalue(), err.getvalue()]
with open(where, "w", encoding="utf-8") as handle:
    json.dump(results, handle)
"""


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(BENCHMARKS.parent / "src"), os.environ.get("PYTHONPATH", "")]))


def _smoke(script: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([sys.executable, str(script), "--smoke"], cwd=folder,
                              env=_env(), capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:  # subprocess.run kills the child first
        pytest.fail(f"{script.name} --smoke took more than {TIMEOUT} s")


@pytest.fixture(scope="module")
def one_jvm(tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[dict[str, subprocess.CompletedProcess[str]]]:
    """The ``ONE_JVM`` scripts' smoke runs, in one process (module docstring)."""
    tmp = tmp_path_factory.mktemp("one-jvm")
    scripts = [[str(BENCHMARKS / name), str(tmp / name[:-3])] for name in ONE_JVM]
    for _, folder in scripts:
        os.mkdir(folder)
    results = tmp / "results.json"
    try:
        done = subprocess.run([sys.executable, "-c", _ONE_PROCESS, json.dumps(scripts),
                               str(results)], cwd=tmp, env=_env(), capture_output=True,
                              text=True, timeout=TIMEOUT * len(ONE_JVM))
    except subprocess.TimeoutExpired:
        pytest.fail(f"{', '.join(ONE_JVM)} --smoke took more than "
                    f"{TIMEOUT * len(ONE_JVM)} s")
    assert done.returncode == 0 and results.exists(), done.stderr[-4000:]
    yield {name: subprocess.CompletedProcess([name, "--smoke"], code, out, err)
           for name, (code, out, err) in json.loads(results.read_text()).items()}


def test_there_are_benchmarks() -> None:
    assert SCRIPTS, f"no scripts in {BENCHMARKS}"
    assert {s.name for s in SCRIPTS} >= set(SPARK) >= set(ONE_JVM)


def check_bench_pipeline(stdout: str) -> None:
    """bench_pipeline.py's smoke run (timebound.pipeline.bench): the
    traces pair and the library pair (timebound.spark.at_most_once on spark.read.parquet
    under a user's columns against dropDuplicates), each with its ratio."""
    lines = stdout.splitlines()
    header = next(line for line in lines if line.lstrip().startswith("connections"))
    for column in ("ours M rows/s", "built-in M rows/s", "at_most_once M rows/s",
                   "dropDuplicates M rows/s", "path"):
        assert column in header
    assert header.count("ratio") == 2
    assert 'timebound.spark.at_most_once(df, conn="account", ts="sent_ms"' in stdout
    row = lines[lines.index(header) + 1].split()
    assert row[0] == "100"  # --smoke: 100 connections
    # M rows/s with 3 decimals (a smoke on a busy machine may read 0.000), ratios with 2
    assert [bool(re.fullmatch(r"\d+\.\d{3}", cell)) for cell in row[1:7]] == \
        [True, True, False, True, True, False], row
    assert all(re.fullmatch(r"\d+\.\d{2}", row[i]) for i in (3, 6)), row


def check_bench_reorder(stdout: str) -> None:
    """bench_reorder.py's smoke run (the library's reorder window on Spark's Parquet
    source): no copy let through at any W, and W = 8 loses fewer genuine messages than
    SCMP's W = 1 on data where messages are overtaken, at more entries."""
    lines = stdout.splitlines()
    overtaken = int(re.search(r"([\d,]+) overtaken by a later one", stdout)
                    .group(1).replace(",", ""))
    header = next(i for i, line in enumerate(lines) if line.split()[:1] == ["W"])
    rows = {int(cells[0]): cells for cells in (line.split() for line in lines[header + 1:])}
    assert sorted(rows) == [1, 8]
    lost = {w: int(cells[1].replace(",", "")) for w, cells in rows.items()}
    assert all(cells[2] == "0" for cells in rows.values())
    assert overtaken > 0 and lost[1] >= overtaken > lost[8]
    assert int(rows[8][3].replace(",", "")) > int(rows[1][3].replace(",", ""))
    assert rows[1][5] == "1.00"


def check_profile_pipeline(stdout: str) -> None:
    """profile_pipeline.py's smoke run: the library's six stages, each with seconds, us
    per row and dropDuplicates' time over its own (1.00x on dropDuplicates' own line),
    and the library worker's line with the core loop's share."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines)
                 if line.startswith("Library batch at_most_once"))
    stages = lines[start + 1:start + 7]
    assert [line.split("  ")[1].strip() for line in stages] == [
        "Parquet scan (the user's file)", "+ shuffle on (receiver, hash class)",
        "+ key columns to Python and back", "+ row checks, working columns, guard",
        "whole at_most_once (decisions)", "dropDuplicates (built-in)"], stages
    for line in stages:
        assert re.search(r" \d+\.\d\d s +\d+\.\d\d us/row +\d+\.\d\dx$", line), line
    assert stages[-1].endswith(" 1.00x"), stages[-1]
    assert re.search(r"Library worker, one partition of [\d,]+ rows .*: \d+\.\d\d us/row; "
                     r"the core's loop \(drive, profiled\) \d+\.\d\d us/row", stdout)


#: script name -> the check of its smoke run's output, beyond its return code.
CHECKS: dict[str, Callable[[str], None]] = {
    "bench_pipeline.py": check_bench_pipeline,
    "profile_pipeline.py": check_profile_pipeline,
    "bench_reorder.py": check_bench_reorder,
}


#: Spark gives a Python worker a fixed time to connect back to the JVM: on a loaded
#: machine the worker may start later and the run fails for the machine's sake, not the
#: script's. Such a run (only that failure) is run again, once.
LOAD_ONLY = "Python worker failed to connect back"


def _check(script: Path, done: subprocess.CompletedProcess[str], tmp_path: Path) -> None:
    if done.returncode != 0 and LOAD_ONLY in done.stdout + done.stderr:
        (tmp_path / "again").mkdir()
        done = _smoke(script, tmp_path / "again")  # once more, in a process of its own
    assert done.returncode == 0, (
        f"{script.name} --smoke exited {done.returncode}\n{done.stdout[-2000:]}\n"
        f"{done.stderr[-4000:]}")
    assert done.stdout.strip(), f"{script.name} --smoke printed nothing"
    if script.name in CHECKS:
        CHECKS[script.name](done.stdout)


@pytest.mark.parametrize("script", [
    pytest.param(s, marks=[pytest.mark.slow] if s.name in SPARK else [])
    for s in ORDER if s.name not in ONE_JVM], ids=[s.name for s in ORDER
                                                   if s.name not in ONE_JVM])
def test_benchmark_runs_at_smoke_size(script: Path, tmp_path: Path) -> None:
    (tmp_path / "1").mkdir()
    _check(script, _smoke(script, tmp_path / "1"), tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", ONE_JVM)
def test_spark_benchmark_runs_at_smoke_size_in_one_jvm(
        name: str, one_jvm: dict[str, subprocess.CompletedProcess[str]],
        tmp_path: Path) -> None:
    _check(BENCHMARKS / name, one_jvm[name], tmp_path)


def test_every_check_names_a_script() -> None:
    assert set(CHECKS) <= {s.name for s in SCRIPTS}
