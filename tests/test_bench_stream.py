"""``timebound bench stream`` through the CLI in a
subprocess: the smoke run prints the three sides (the library's ``at_most_once``, the
built-in with its watermark on the arrival time and on the sender's time) with every
column, the ratio, stream and merge lines; ours lets no copy through, the built-in on the
arrival time does, and the built-in on the sender's time loses genuine late rows (the
genuine-lost column can show a loss); nothing is left in its temporary folder. A bad
range is one line and exit 2 before Spark starts. The generator is checked without
Spark."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

SMOKE_TIMEOUT = 300  # seconds: 104-133 on a 2-core machine at load average 4.5-9
COLUMNS = ["connections", "batch rows", "side", "rows/s", "x wm-recv", "x wm-sent",
           "p50 ms", "p99 ms", "state rows", "peak", "state MB", "let through",
           "genuine lost"]
SIDES = ("ours", "floor", "wm-recv", "wm-sent")
CELLS = 14  # a side's row: its whitespace-separated cells


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
        if len(cells) == CELLS and cells[2] in SIDES:
            rows[cells[2]] = cells
    return rows


@pytest.mark.slow
def test_smoke_run_prints_every_side_and_leaves_no_temporary_folder(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    done = _cli(["bench", "stream", "--smoke"], _env(tmp), SMOKE_TIMEOUT)
    assert done.returncode == 0, done.stderr[-3000:]
    header = next(line for line in done.stdout.splitlines() if "connections" in line
                  and "side" in line)
    for column in COLUMNS:
        assert column in header
    sides = _side_rows(done.stdout)
    assert set(sides) == set(SIDES), done.stdout
    number = {side: [c.replace(",", "") for c in cells] for side, cells in sides.items()}
    for cells in number.values():
        assert float(cells[3]) > 0  # rows/s
        assert cells[4].endswith("x") and cells[5].endswith("x")  # the two ratios
        assert float(cells[6]) > 0  # p50 ms
    assert number["wm-recv"][4] == "1x" and number["wm-sent"][5] == "1x"
    let_through = {side: int(cells[12]) for side, cells in number.items()}
    lost = {side: int(cells[13]) for side, cells in number.items()}
    # ours lets no copy through; the built-in with its watermark on the arrival time
    # lets the late copies through (the column can show a violation) and loses nothing
    assert let_through["ours"] == 0
    assert let_through["wm-recv"] > 0 and lost["wm-recv"] == 0
    # with its watermark on the sender's time it drops the genuine late rows as late
    # (the genuine-lost column can show a loss), ours refuses them as stale
    assert lost["wm-sent"] > 0 and lost["ours"] > 0
    stream = re.search(r"stream ([\d,]+) rows in 3 micro-batches: ([\d,]+) messages "
                       r"\(([\d,]+) arriving later than the 200-tick watermark, ([\d,]+) "
                       r"after a later-sent one of their account\), ([\d,]+) resent "
                       r"copies \(([\d,]+) later than it\)", done.stdout)
    assert stream is not None, done.stdout
    late, overtaken, copies = (int(stream.group(i).replace(",", "")) for i in (3, 4, 5))
    # the floor decides nothing: every copy through, no genuine row lost
    assert let_through["floor"] == copies > 0 and lost["floor"] == 0
    # ours loses the late rows (later than rho), and of those overtaken by later
    # messages of their account only what its reorder window (8 by default) cannot keep
    assert late <= lost["ours"] <= late + overtaken
    # ours keeps one state row per (receiver, class) key; the built-in's peak is one
    # per message within the watermark
    for builtin in ("wm-recv", "wm-sent"):
        assert int(number["ours"][9]) < int(number[builtin][9])
    assert re.search(r"ratio state rows ours/wm-recv \S+x \(peak \S+x\), ours/wm-sent "
                     r"\S+x \(peak \S+x\); rows/s ours/floor \S+x", done.stdout), done.stdout
    assert 'at_most_once(df, conn="account", ts="sent_ms", at="received_ms"' in done.stdout
    merge = re.search(r"merge: ([\d,]+) arrivals, ([\d,]+) rows/s, largest delivery delay "
                      r"(\d+) ticks \(bound delta \+ 3\*epsilon = (\d+)\), ([\d,]+) "
                      r"delivered \(timebound.spark.causal_merge", done.stdout)
    assert merge is not None, done.stdout
    assert int(merge.group(3)) <= int(merge.group(4))
    assert int(merge.group(5).replace(",", "")) > 0
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


def test_the_generated_stream_has_late_genuine_rows_and_copies(tmp_path: Path) -> None:
    """The smoke stream, without Spark: files in received_ms order (by name and by
    modification time), one first arrival per message, copies that repeat one."""
    import pyarrow.parquet as pq

    from timebound.stream.bench import SMOKE_WATERMARK_TICKS
    from timebound.stream.bench_data import EPOCH_MS, generate_user

    folder, firsts = tmp_path / "in", tmp_path / "firsts.parquet"
    truth = generate_user(str(folder), str(firsts), 3_000, 100, 3,
                          SMOKE_WATERMARK_TICKS)
    files = sorted(folder.iterdir())
    assert len(files) == 3
    assert [f.stat().st_mtime for f in files] == sorted(f.stat().st_mtime for f in files)
    rows = [row for f in files for row in pq.read_table(f).to_pylist()]
    assert list(rows[0]) == ["region", "account", "sent_ms", "received_ms", "amount",
                             "note"]
    received = [r["received_ms"] for r in rows]
    assert received == sorted(received) and len(rows) == truth["rows"]
    first = pq.read_table(firsts).to_pylist()
    assert len(first) == truth["messages"] == len({(r["account"], r["sent_ms"]) for r in rows})
    assert truth["copies"] == truth["rows"] - truth["messages"] > 0
    assert truth["late_copies"] > 0 and truth["late_genuine"] > 0
    late = sum(f["received_ms"] - f["sent_ms"] > SMOKE_WATERMARK_TICKS for f in first)
    assert late == truth["late_genuine"]
    assert min(r["sent_ms"] for r in rows) == EPOCH_MS + 1
    assert {r["region"] for r in rows} == {"eu-west", "eu-north", "us-east", "ap-south"}
