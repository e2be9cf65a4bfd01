"""``timebound bench stream`` (issue 29, item 3) through the CLI in a subprocess: the
smoke run prints both sides with every column, the ratio and merge lines, lets resent
copies through only on the built-in's side and leaves nothing in its temporary folder;
a bad range is one line and exit 2 before Spark starts."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

SMOKE_TIMEOUT = 150  # seconds: ~40 on a quiet 2-core machine, more when it is busy
COLUMNS = ["connections", "batch rows", "side", "rows/s", "p50 ms", "p99 ms",
           "state rows", "peak", "state MB", "let through"]


def _cli(args: list[str], env: dict[str, str], timeout: float
         ) -> subprocess.CompletedProcess[str]:
    """``timebound ARGS`` in its own process group, killed whole on a timeout."""
    proc = subprocess.Popen([sys.executable, "-m", "timebound.cli", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"timebound {' '.join(args)} took more than {timeout} s")
    finally:
        if proc.poll() is None:  # pragma: no cover - interrupted test
            os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _env(tmp: Path) -> dict[str, str]:
    return dict(os.environ, TMPDIR=str(tmp), PYSPARK_PYTHON=sys.executable,
                PYSPARK_DRIVER_PYTHON=sys.executable)


def _side_rows(stdout: str) -> dict[str, list[str]]:
    """The table's rows by side: their whitespace-separated cells."""
    rows: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        cells = line.split()
        if len(cells) == 11 and cells[2] in ("ours", "builtin"):
            rows[cells[2]] = cells
    return rows


@pytest.mark.slow
def test_smoke_run_prints_both_sides_and_leaves_no_temporary_folder(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    done = _cli(["bench", "stream", "--smoke"], _env(tmp), SMOKE_TIMEOUT)
    assert done.returncode == 0, done.stderr[-3000:]
    header = next(line for line in done.stdout.splitlines() if "connections" in line
                  and "side" in line)
    for column in COLUMNS:
        assert column in header
    sides = _side_rows(done.stdout)
    assert set(sides) == {"ours", "builtin"}, done.stdout
    for cells in sides.values():
        assert float(cells[3].replace(",", "")) > 0  # rows/s
        assert float(cells[4].replace(",", "")) > 0  # p50 ms
    # the built-in lets the late copies through, ours none (the column can contradict)
    assert int(sides["ours"][10].replace(",", "")) == 0
    assert int(sides["builtin"][10].replace(",", "")) > 0
    # ours keeps one state row per (run, receiver, class) key; the built-in's peak is
    # one per message within the watermark
    assert int(sides["ours"][7]) < int(sides["builtin"][7].replace(",", ""))
    assert re.search(r"ratio rows/s \S+x, state rows \S+ \(peak \S+x\), ours/built-in",
                     done.stdout), done.stdout
    merge = re.search(r"merge: ([\d,]+) arrivals, ([\d,]+) rows/s, largest delivery delay "
                      r"(\d+) ticks \(bound delta \+ 3\*epsilon = (\d+)\)", done.stdout)
    assert merge is not None, done.stdout
    assert int(merge.group(3)) <= int(merge.group(4))
    assert "bench stream:" in done.stderr  # progress lines go to stderr
    assert "bench stream:" not in done.stdout
    assert list(tmp.iterdir()) == []


@pytest.mark.parametrize("args, option", [
    (["--rows", "5"], "--rows"),
    (["--batch-rows", "50"], "--batch-rows"),
    (["--rows", "1000", "--batch-rows", "2000"], "--batch-rows"),
    (["--connections", "1000,x"], "--connections"),
    (["--repeats", "0"], "--repeats"),
    (["--master", "nowhere"], "--master"),
])
def test_a_bad_range_is_one_line_before_spark_starts(tmp_path: Path, args: list[str],
                                                     option: str) -> None:
    done = _cli(["bench", "stream", *args], _env(tmp_path), 60)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"timebound: error: {option}: "), lines
    assert "starting Spark" not in done.stderr
    assert list(tmp_path.iterdir()) == []
