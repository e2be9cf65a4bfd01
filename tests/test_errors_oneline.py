"""One line, not a traceback, and limits and contradictions caught: every bad
input is one line ``timebound: error: ...`` and exit status 2, found before any work,
and nothing is left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.test_pipeline_support import example_rows, write_table
from timebound import __version__
from timebound.cli import main

MERGE = ["--epsilon", "2", "--delta", "3"]
FIXED = ["--rho", "100", "--gc-every", "50"]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("timebound: error: "), err
    return err[0]


def visible(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


# -- output paths that cannot be written -------------------------------------------


@pytest.mark.parametrize("target", ["/proc/x.jsonl", "/proc/x.parquet", "DIR.jsonl"])
def test_replay_unwritable_output_is_one_line(tmp_path: Path, target: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", example_rows("merge"))
    if target == "DIR.jsonl":
        (tmp_path / target).mkdir()
        target = str(tmp_path / target)
    assert main(["replay", "merge", "-i", str(src), "-o", target, *MERGE]) == 2
    assert target in one_line(capsys)
    assert visible(tmp_path) in (["in.jsonl"], ["DIR.jsonl", "in.jsonl"])


def test_full_device_is_one_line(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", example_rows("merge"))
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "timebound.cli", "replay", "merge",
                               "-i", str(src), "-o", "-", *MERGE], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "timebound: error: cannot write the output: No space left on device"]


def test_simulate_reproduce_checks_its_path_before_the_run(
        capsys: pytest.CaptureFixture[str]) -> None:
    started = time.perf_counter()
    assert main(["simulate", "--reproduce", "/proc/x.md", "--quiet"]) == 2
    line = one_line(capsys)
    assert "--reproduce" in line and "/proc/x.md" in line
    assert time.perf_counter() - started < 2  # no scenario ran


def _pipeline_output(tmp_path: Path, metrics_bytes: bytes | None = None) -> Path:
    out = tmp_path / "out"
    (out / "metrics").mkdir(parents=True)
    table = pa.table({"run": ["a"], "protocol": ["merge"], "measure": ["x"],
                      "value": [1.0], "t": pa.array([None], pa.int64())})
    part = out / "metrics" / "part-00000.parquet"
    pq.write_table(table, part)
    if metrics_bytes is not None:
        part.write_bytes(part.read_bytes()[:metrics_bytes])
    return out


def test_report_on_a_truncated_metrics_file(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = _pipeline_output(tmp_path, metrics_bytes=40)
    assert main(["report", str(out)]) == 2
    assert "metrics" in one_line(capsys)
    assert visible(out) == ["metrics"]


def test_report_when_report_html_is_a_folder(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = _pipeline_output(tmp_path)
    (out / "report.html").mkdir()
    assert main(["report", str(out)]) == 2
    assert "report.html" in one_line(capsys)
    assert visible(out) == ["metrics", "report.html"]


def test_pipeline_bogus_master_before_spark(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    ds = tmp_path / "ds"
    write_table(str(ds), "arrivals", {"r1": example_rows("merge")})
    started = time.perf_counter()
    assert main(["pipeline", str(ds), "--out", str(tmp_path / "o"), "--master",
                 "bogus://x"]) == 2
    assert "--master" in one_line(capsys)
    assert time.perf_counter() - started < 5
    assert visible(tmp_path) == ["ds"]


def test_unreadable_parquet_is_named(tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    ds = tmp_path / "ds"
    write_table(str(ds), "arrivals", {"r1": example_rows("merge")})
    part = ds / "arrivals" / "part-00000.parquet"
    part.write_bytes(part.read_bytes()[:100])
    assert main(["pipeline", str(ds), "--out", str(tmp_path / "o")]) == 2
    assert str(part) in one_line(capsys)


# -- values beyond int64, NaN, negative times ----------------------------------------


def test_ts_beyond_int64_with_parquet_output(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [
        {"type": "msg", "receiver": "s", "conn": "c", "ts": 10**30, "at": 5}])
    assert main(["replay", "atmostonce", "-i", str(src), "-o",
                 str(tmp_path / "o.parquet"), *FIXED]) == 2
    assert "in.jsonl:1: field 'ts'" in one_line(capsys)
    assert visible(tmp_path) == ["in.jsonl"]


def test_pass_through_field_beyond_int64_with_parquet_output(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = example_rows("stability")
    rows[0]["extra"] = 10**30
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    assert main(["replay", "stability", "-i", str(src), "-o", str(tmp_path / "o.parquet"),
                 "--acks", "timestamp", "--senders", "s1,s2", "--receivers", "s1,r1,r2"]) == 2
    assert "Parquet" in one_line(capsys)
    assert visible(tmp_path) == ["in.jsonl"]


@pytest.mark.parametrize(("argv", "says"), [
    (["replay", "atmostonce", "--rho", str(10**30), "--gc-every", "5"], "--rho"),
    (["replay", "atmostonce", *FIXED, "--classes", "10000000"], "--classes"),
    (["replay", "causal", "--epsilon", "10000000"], "--epsilon"),
    (["replay", "merge", "--epsilon", "2", "--delta", str(10**30)], "--delta"),
])
def test_options_out_of_their_documented_range(tmp_path: Path, argv: list[str], says: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [])
    argv = argv[:2] + ["-i", str(src), "-o", str(tmp_path / "o.parquet")] + argv[2:]
    assert main(argv) == 2
    line = one_line(capsys)
    assert says in line and "must be in [" in line
    assert visible(tmp_path) == ["in.jsonl"]


@pytest.mark.parametrize(("argv", "says"), [
    (["pipeline", "DS", "--out", "O", "--classes", "10000000"], "--classes"),
    (["pipeline", "DS", "--out", "O", "--rho", str(10**30)], "--rho"),
    (["simulate", "scmp", "--out", "O", "--set", f"rho={10**30}"], "--set rho"),
    (["simulate", "scmp", "--out", "O", "--set", "loss=nan"], "--set loss"),
    (["simulate", "scmp", "--out", "O", "--set", "loss=inf"], "--set loss"),
    (["demo", "--scale", "nan"], "--scale"),
    (["demo", "--scale", "0"], "--scale"),
    (["demo", "--scenarios", ""], "--scenarios"),
    (["demo", "--scenarios", "bogus"], "--scenarios"),
    (["demo", "--scenarios", "merge,,scmp"], "--scenarios"),
    (["simulate", "scmp", "--reproduce", "x.md"], "--reproduce"),
    (["simulate", "--list", "--out", "O"], "--list"),
    (["simulate", "--list", "bogus"], "bogus"),
])
def test_bad_options_rejected_before_any_work(tmp_path: Path, argv: list[str], says: str,
                                              capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "DS").mkdir()
    started = time.perf_counter()
    assert main([*argv, *(["--out", "d"] if argv[0] == "demo" else [])]) == 2
    assert says in one_line(capsys)
    assert time.perf_counter() - started < 5
    assert visible(tmp_path) == ["DS"]  # demo: step 1 never ran


def test_simulate_list_of_one_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--list", "merge"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("merge:") and "\nscmp:" not in out


@pytest.mark.parametrize(("field", "value"), [("at", -1), ("r", -5), ("c", -1)])
def test_negative_times_are_bad_rows(tmp_path: Path, field: str, value: int,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    rows = example_rows("merge")
    rows[0][field] = value
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    assert main(["replay", "merge", "-i", str(src), "-o", str(tmp_path / "o.jsonl"),
                 *MERGE]) == 2
    assert f"in.jsonl:1: field '{field}': must be >= 0" in one_line(capsys)


def test_negative_at_in_atmostonce(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [
        {"type": "msg", "receiver": "s", "conn": "c", "ts": 3, "at": -5}])
    assert main(["replay", "atmostonce", "-i", str(src), "-o", str(tmp_path / "o.jsonl"),
                 *FIXED]) == 2
    assert "field 'at': must be >= 0" in one_line(capsys)


def test_manifest_is_never_written_with_a_bare_nan(tmp_path: Path) -> None:
    from timebound.sim import DatasetWriter

    writer = DatasetWriter(str(tmp_path / "ds"))
    try:
        with pytest.raises(ValueError):
            writer.commit({"params": {"loss": float("nan")}})
    finally:
        writer.abort()
    assert visible(tmp_path) == []


# -- --stats with -o -, --version -----------------------------------------------------


def test_stats_with_stdout_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", example_rows("merge"))
    assert main(["replay", "merge", "-i", str(src), "-o", "-", "--stats", *MERGE]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out.splitlines()[0])
    assert "delivered" in captured.err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"timebound {__version__}"


def test_argparse_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "merge", "-i", "a.jsonl", "-o", "b.jsonl", "--bogus"]) == 2
    assert "--bogus" in one_line(capsys)


# -- Spark ----------------------------------------------------------------------------


@pytest.mark.spark
def test_dataset_option_column_contradicting_the_command_line(
        tmp_path: Path, spark: object, capsys: pytest.CaptureFixture[str]) -> None:
    ds = tmp_path / "ds"
    write_table(str(ds), "arrivals", {"r1": example_rows("merge")},
                extra={"r1": {"epsilon": 2, "delta": 3}})
    assert main(["pipeline", str(ds), "--out", str(tmp_path / "o"), "--delta", "5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == "pipeline ds [1/1] merge: reading arrivals"  # names the scenario
    line = err[-1]
    assert "--delta" in line and "contradicts the dataset" in line and "r1" in line
    assert visible(tmp_path) == ["ds"]
    # the same value as the column is no contradiction
    assert main(["pipeline", str(ds), "--out", str(tmp_path / "o"), "--delta", "3"]) == 0
    capsys.readouterr()
    # a run without the column takes the command line; the other run's override is noted
    ds2 = tmp_path / "ds2"
    write_table(str(ds2), "arrivals", {"r1": example_rows("merge"), "r2": example_rows("merge")},
                extra={"r1": {"epsilon": 2, "delta": 3}})
    assert main(["pipeline", str(ds2), "--out", str(tmp_path / "o2"),
                 "--epsilon", "2", "--delta", "5"]) == 0
    err = capsys.readouterr().err
    assert "note: table arrivals, run 'r1': option column delta = 3 overrides --delta 5" in err


@pytest.mark.spark
@pytest.mark.slow
def test_bad_row_in_pipeline_is_one_line_without_spark_traces(tmp_path: Path) -> None:
    """In a fresh process (its own Spark): the last line names the row, and no Java or
    Python trace is printed (only with --verbose)."""
    rows = example_rows("merge")
    rows[3]["c"] = -1
    ds = tmp_path / "ds"
    write_table(str(ds), "arrivals", {"r1": rows}, extra={"r1": {"epsilon": 2, "delta": 3}})
    done = subprocess.run([sys.executable, "-m", "timebound.cli", "pipeline", str(ds),
                           "--out", str(tmp_path / "o"), "--master", "local[1]"],
                          capture_output=True, text=True, timeout=300)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-3000:]
    assert lines[-1] == "timebound: error: arrivals[run 'r1']:3: field 'c': must be >= 0, got -1"
    assert "Traceback" not in done.stderr and "\tat " not in done.stderr
    assert "Exception" not in done.stderr
    assert len(lines) < 15, done.stderr
    assert visible(tmp_path) == ["ds"]


# -- docs that must be true -----------------------------------------------------------


def test_merge_help_example_is_what_the_command_gives(tmp_path: Path) -> None:
    from timebound.replay import load_commands

    command = next(c for c in load_commands() if c.name == "merge")
    rows = [json.loads(line.strip()) for line in command.description.splitlines()
            if line.strip().startswith('{"merger"')]
    given, shown = rows
    src = write_jsonl(tmp_path / "arrivals.jsonl", [given])
    out = tmp_path / "order.jsonl"
    assert main(["replay", "merge", "--input", str(src), "--output", str(out),
                 "--epsilon", "2", "--delta", "3"]) == 0
    assert [json.loads(line) for line in out.read_text().splitlines()] == [shown]


@pytest.mark.parametrize("argv", [
    ["simulate", "merge", "--out", "/proc/x", "--quiet"],
    ["pipeline", "DS", "--out", "/proc/x"],
    ["demo", "--out", "/proc/x"],
])
def test_unwritable_output_folder_before_any_work(tmp_path: Path, argv: list[str],
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_table(str(tmp_path / "DS"), "arrivals", {"r1": example_rows("merge")})
    started = time.perf_counter()
    assert main(argv) == 2
    assert one_line(capsys) == "timebound: error: --out: cannot write '/proc/x': " \
                               "No such file or directory"
    assert time.perf_counter() - started < 5  # before the simulation / Spark / step 1
    assert visible(tmp_path) == ["DS"]


def test_stats_values_line_up_in_one_column(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """``replay slotted --stats`` has labels longer than 28 characters: every value still
    starts in the same column."""
    from importlib import resources

    src = tmp_path / "slotted.jsonl"
    src.write_text(resources.files("timebound.examples").joinpath("slotted.jsonl")
                   .read_text())
    assert main(["replay", "slotted", "-i", str(src), "-o", str(tmp_path / "o.jsonl"),
                 "--stats"]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) > 5 and any(len(line.split("  ")[0].strip()) > 28 for line in lines)
    starts = {len(line) - len(line.lstrip()) + len(line.lstrip().split("  ")[0])
              for line in lines}
    assert len(starts) == 1
