"""Every script in benchmarks/ runs at its ``--smoke`` size (seconds), so a benchmark
broken by an API change fails the suite instead of rotting. Scripts are globbed: a new
benchmark is covered as soon as it exists (it must accept ``--smoke``).

The Spark scripts spend most of their smoke run starting a JVM and planning
queries, so the smoke runs of the selected scripts go two at a time (the suite's 2
cores), Spark scripts first, the longest first; the live-UDP ones run one at a time
after them, never beside a JVM start (their smoke sizes are timed runs). Each script's
test then reads its own run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = sorted(BENCHMARKS.glob("*.py"))
TIMEOUT = 300
#: The Spark scripts, longest smoke first (the pipeline bench runs four sides).
SPARK = ("bench_pipeline.py", "bench_end_to_end.py", "bench_operators.py",
         "profile_pipeline.py", "bench_reorder.py", "bench_compare.py")
Run = subprocess.CompletedProcess[str] | None  # None: timed out (the child was killed)


def _smoke(script: Path, folder: Path) -> Run:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(BENCHMARKS.parent / "src"), os.environ.get("PYTHONPATH", "")]))
    try:
        return subprocess.run([sys.executable, str(script), "--smoke"], cwd=folder,
                              env=env, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:  # subprocess.run kills the child first
        return None


@pytest.fixture(scope="module")
def smoke_runs(request: pytest.FixtureRequest) -> Any:
    """script name -> its smoke run, for the scripts this session selected."""
    selected = [item.callspec.params["script"] for item in request.session.items
                if isinstance(item, pytest.Function)
                and item.originalname == "test_benchmark_runs_at_smoke_size"]
    spark = sorted((s for s in selected if s.name in SPARK),
                   key=lambda s: SPARK.index(s.name))
    live = [s for s in selected if s.name not in SPARK]
    with tempfile.TemporaryDirectory(prefix="benchmark-smoke-") as root:
        folders = {s: Path(root) / s.stem for s in selected}
        for folder in folders.values():
            folder.mkdir()
        with ThreadPoolExecutor(max_workers=2) as pool:
            runs = dict(zip(spark, pool.map(lambda s: _smoke(s, folders[s]), spark),
                            strict=True))
        runs.update({s: _smoke(s, folders[s]) for s in live})
        yield {s.name: run for s, run in runs.items()}


def test_there_are_benchmarks() -> None:
    assert SCRIPTS, f"no scripts in {BENCHMARKS}"
    assert {s.name for s in SCRIPTS} >= set(SPARK)


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_benchmark_runs_at_smoke_size(script: Path, smoke_runs: Any) -> None:
    done = smoke_runs[script.name]
    if done is None:
        pytest.fail(f"{script.name} --smoke took more than {TIMEOUT} s")
    assert done.returncode == 0, (
        f"{script.name} --smoke exited {done.returncode}\n{done.stdout[-2000:]}\n"
        f"{done.stderr[-4000:]}")
    assert done.stdout.strip(), f"{script.name} --smoke printed nothing"


def test_bench_pipeline_prints_every_column(smoke_runs: Any) -> None:
    """bench_pipeline.py's smoke run (timebound.pipeline.bench): the
    traces pair and the library pair (timebound.spark.at_most_once on spark.read.parquet
    under a user's columns against dropDuplicates), each with its ratio."""
    if "bench_pipeline.py" not in smoke_runs:
        pytest.skip("bench_pipeline.py's smoke run is not selected")
    done = smoke_runs["bench_pipeline.py"]
    if done is None or done.returncode != 0:
        pytest.skip("its smoke run failed: test_benchmark_runs_at_smoke_size says why")
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.lstrip().startswith("connections"))
    for column in ("ours M rows/s", "built-in M rows/s", "at_most_once M rows/s",
                   "dropDuplicates M rows/s", "path"):
        assert column in header
    assert header.count("ratio") == 2
    assert 'timebound.spark.at_most_once(df, conn="account", ts="sent_ms"' in done.stdout
    row = lines[lines.index(header) + 1].split()
    assert row[0] == "100"  # --smoke: 100 connections
    # M rows/s with 3 decimals (a smoke on a busy machine may read 0.000), ratios with 2
    assert [bool(re.fullmatch(r"\d+\.\d{3}", cell)) for cell in row[1:7]] == \
        [True, True, False, True, True, False], row
    assert all(re.fullmatch(r"\d+\.\d{2}", row[i]) for i in (3, 6)), row


def test_bench_reorder_counts_what_a_window_keeps(smoke_runs: Any) -> None:
    """bench_reorder.py's smoke run (the library's reorder window on Spark's Parquet
    source): no copy let through at any W, and W = 8 loses fewer genuine messages than
    SCMP's W = 1 on data where messages are overtaken, at more entries."""
    if "bench_reorder.py" not in smoke_runs:
        pytest.skip("bench_reorder.py's smoke run is not selected")
    done = smoke_runs["bench_reorder.py"]
    if done is None or done.returncode != 0:
        pytest.skip("its smoke run failed: test_benchmark_runs_at_smoke_size says why")
    lines = done.stdout.splitlines()
    overtaken = int(re.search(r"([\d,]+) overtaken by a later one", done.stdout)
                    .group(1).replace(",", ""))
    header = next(i for i, line in enumerate(lines) if line.split()[:1] == ["W"])
    rows = {int(cells[0]): cells for cells in (line.split() for line in lines[header + 1:])}
    assert sorted(rows) == [1, 8]
    lost = {w: int(cells[1].replace(",", "")) for w, cells in rows.items()}
    assert all(cells[2] == "0" for cells in rows.values())
    assert overtaken > 0 and lost[1] >= overtaken > lost[8]
    assert int(rows[8][3].replace(",", "")) > int(rows[1][3].replace(",", ""))
    assert rows[1][5] == "1.00"
