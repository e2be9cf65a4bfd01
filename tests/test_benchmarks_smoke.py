"""Every script in benchmarks/ runs at its ``--smoke`` size (seconds), so a benchmark
broken by an API change fails the suite instead of rotting. Scripts are globbed: a new
benchmark is covered as soon as it exists (it must accept ``--smoke``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = sorted(BENCHMARKS.glob("*.py"))
TIMEOUT = 300


def test_there_are_benchmarks() -> None:
    assert SCRIPTS, f"no scripts in {BENCHMARKS}"


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_benchmark_runs_at_smoke_size(script: Path, tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(BENCHMARKS.parent / "src"), os.environ.get("PYTHONPATH", "")]))
    try:
        done = subprocess.run([sys.executable, str(script), "--smoke"], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:  # subprocess.run kills the child first
        pytest.fail(f"{script.name} --smoke took more than {TIMEOUT} s")
    assert done.returncode == 0, (
        f"{script.name} --smoke exited {done.returncode}\n{done.stdout[-2000:]}\n"
        f"{done.stderr[-4000:]}")
    assert done.stdout.strip(), f"{script.name} --smoke printed nothing"
