"""No data destroyed: an output is never an input, never inside an input
folder, never a folder of the user's own files; SIGTERM leaves no temporary file;
outputs follow the umask."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.test_pipeline_support import example_rows, write_table
from timebound._safety import Terminated, hidden_temp, sigterm_raises
from timebound.cli import main

MERGE = ["--epsilon", "2", "--delta", "3"]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def merge_trace(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "same.jsonl", example_rows("merge"))


@pytest.mark.parametrize("spelling", ["same", "./same", "link"])
def test_replay_refuses_to_write_over_its_input(tmp_path: Path, spelling: str,
                                                capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    src = merge_trace(tmp_path)
    before = src.read_bytes()
    monkeypatch.chdir(tmp_path)
    if spelling == "link":
        os.link(src, tmp_path / "link.jsonl")
    out = f"{spelling}.jsonl"
    assert main(["replay", "merge", "-i", str(src), "-o", out, *MERGE]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is the input" in err[0] and "--output" in err[0]
    assert src.read_bytes() == before
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")]


def test_replay_refuses_a_folder_as_output(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    src = merge_trace(tmp_path)
    (tmp_path / "d.jsonl").mkdir()
    assert main(["replay", "merge", "-i", str(src), "-o", str(tmp_path / "d.jsonl"),
                 *MERGE]) == 2
    assert "is a folder" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["d.jsonl", "same.jsonl"]


def _dataset(tmp_path: Path) -> Path:
    ds = tmp_path / "ds"
    write_table(str(ds), "arrivals", {"r1": example_rows("merge")},
                extra={"r1": {"epsilon": 2, "delta": 3}})
    (ds / "manifest.json").write_text('{"scenario": "hand"}', encoding="utf-8")
    return ds


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(("out", "says"), [
    ("ds", "is the input"),
    ("ds/out", "inside the input folder"),
    (".", "holds the input"),
    ("user", "holds files timebound did not write"),
])
def test_pipeline_refuses_outputs_that_destroy_data(tmp_path: Path, out: str, says: str,
                                                    capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    ds = _dataset(tmp_path)
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "notes.txt").write_text("mine", encoding="utf-8")
    before = _snapshot(tmp_path)
    monkeypatch.chdir(tmp_path)
    started = time.perf_counter()
    assert main(["pipeline", str(ds), "--out", out]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0] and "--out" in err[0], err
    assert _snapshot(tmp_path) == before
    assert time.perf_counter() - started < 5  # refused before Spark starts


def test_simulate_still_refuses_a_folder_of_user_files(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "notes.txt").write_text("mine", encoding="utf-8")
    assert main(["simulate", "merge", "--out", str(tmp_path / "user"), "--quiet"]) == 2
    assert "not a timebound dataset" in capsys.readouterr().err
    assert os.listdir(tmp_path / "user") == ["notes.txt"]


@pytest.mark.parametrize("mask", [0o022, 0o027])
@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_replay_output_follows_the_umask(tmp_path: Path, mask: int, suffix: str) -> None:
    src = merge_trace(tmp_path)
    old = os.umask(mask)
    try:
        assert main(["replay", "merge", "-i", str(src), "-o", str(tmp_path / f"o{suffix}"),
                     *MERGE]) == 0
    finally:
        os.umask(old)
    assert (tmp_path / f"o{suffix}").stat().st_mode & 0o777 == 0o666 & ~mask


@pytest.mark.spark
def test_pipeline_output_folder_follows_the_umask(tmp_path: Path, spark: object) -> None:
    ds = _dataset(tmp_path)
    old = os.umask(0o022)
    try:
        assert main(["pipeline", str(ds), "--out", str(tmp_path / "out")]) == 0
        # a second run replaces its own earlier output (summary.json marks it)
        assert main(["pipeline", str(ds), "--out", str(tmp_path / "out")]) == 0
    finally:
        os.umask(old)
    assert (tmp_path / "out").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "out" / "summary.json").stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds", "out"]


def sigterm_mid_replay(args: list[str], folder: Path, temporaries: int) -> tuple[int, str]:
    """Run ``timebound replay ARGS``, send SIGTERM once ``temporaries`` hidden files
    are in ``folder`` (it is writing), and return its exit status and stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "timebound.cli", "replay", *args],
                            stderr=subprocess.PIPE, text=True)

    def hidden() -> int:
        return len([p for p in os.listdir(folder) if p.startswith(".")])

    try:
        deadline = time.monotonic() + 30
        while hidden() < temporaries:
            assert proc.poll() is None and time.monotonic() < deadline, "no temp file seen"
            time.sleep(0.01)
        # Freeze it first, so a loaded machine cannot let it finish between seeing its
        # temporaries and the signal; the signal is then pending when it resumes.
        proc.send_signal(signal.SIGSTOP)
        assert hidden() >= temporaries, "the replay finished before the signal"
        proc.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGCONT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            proc.wait()
    return proc.returncode, err


def test_sigterm_while_a_temporary_file_is_created_leaves_no_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The signal lands after the file exists and before its name reaches the caller:
    it is held until the name is known, then raised with the file removed."""
    assert threading.current_thread() is threading.main_thread()
    real = tempfile.mkstemp

    def mkstemp_then_signal(*args: object, **kwargs: object) -> tuple[int, str]:
        made = real(*args, **kwargs)  # type: ignore[call-overload]
        os.kill(os.getpid(), signal.SIGTERM)
        return made  # type: ignore[no-any-return]

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp_then_signal)
    with sigterm_raises(), pytest.raises(Terminated):
        hidden_temp(str(tmp_path / "out.parquet"), ".spool")
    assert os.listdir(tmp_path) == []


def _big_trace(path: Path, rows: int) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for i in range(rows):
            handle.write(json.dumps({"type": "send", "id": f"m{i}", "kind": "N"}) + "\n")
            handle.write(json.dumps({"type": "arrive", "id": f"m{i}"}) + "\n")


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_sigterm_during_a_replay_leaves_no_temporary_file(tmp_path: Path,
                                                          suffix: str) -> None:
    src = tmp_path / "big.jsonl"
    _big_trace(src, 150_000)
    out = tmp_path / f"out{suffix}"
    returncode, err = sigterm_mid_replay(["slotted", "-i", str(src), "-o", str(out)],
                                         tmp_path, temporaries=1)
    assert returncode == 143, err
    assert err.strip() == "timebound: terminated"
    assert sorted(os.listdir(tmp_path)) == ["big.jsonl"]


def test_a_failed_spark_stop_never_hides_what_ended_the_command() -> None:
    """SIGTERM or Ctrl-C inside a Py4J call leaves the connection unusable and
    ``spark.stop()`` then raises; the command must still end as terminated/interrupted
    (one line, 143/130), not as an internal error (``sparkutil.stopped_after``)."""
    from timebound._safety import Terminated
    from timebound.sparkutil import stopped_after

    class Broken:
        stops = 0

        def stop(self) -> None:
            self.stops += 1
            raise RuntimeError("Py4JError: SparkSession does not exist in the JVM")

    spark = Broken()
    for ended in (Terminated, KeyboardInterrupt, ValueError):
        with pytest.raises(ended), stopped_after(spark):
            raise ended()
    assert spark.stops == 3
    with pytest.raises(RuntimeError), stopped_after(spark):  # a clean end: its failure shows
        pass
    with stopped_after(spark, owned=False):  # a caller's session is left running
        pass
    assert spark.stops == 4


def test_a_failed_spark_stop_prints_no_warning_after_an_interruption() -> None:
    """PySpark's ``SparkContext.stop`` warns "Unable to cleanly shutdown Spark JVM
    process" when the Py4J connection was cut (Ctrl-C inside a call); after an
    interruption the user's one line is "timebound: interrupted", nothing before it."""
    import warnings

    from timebound.sparkutil import stop_quietly, stopped_after

    class CutConnection:
        def stop(self) -> None:
            warnings.warn("Unable to cleanly shutdown Spark JVM process.", RuntimeWarning,
                          stacklevel=1)
            raise RuntimeError("Py4JError: the connection was cut")

    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")  # as a fresh interpreter shows a first warning
        with pytest.raises(KeyboardInterrupt), stopped_after(CutConnection()):
            raise KeyboardInterrupt()
        stop_quietly(CutConnection(), owned=True)
    assert [str(w.message) for w in shown] == []


@pytest.mark.parametrize("writer", ["rows-jsonl", "rows-parquet", "batches"])
def test_an_interrupt_while_an_output_opens_leaves_no_temporary_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str) -> None:
    """SIGTERM (or Ctrl-C) between the output's two temporary files, inside
    ``__enter__``, where the ``with`` block's own clean-up does not run yet."""
    import tempfile

    import pyarrow as pa

    from timebound.replay import _batch, _io

    made: list[str] = []
    real = tempfile.mkstemp

    def mkstemp(*args: object, **kwargs: object) -> tuple[int, str]:
        if made and writer != "rows-jsonl":
            raise KeyboardInterrupt  # the second temporary file: interrupted
        fd, path = real(*args, **kwargs)  # type: ignore[call-overload]
        made.append(path)
        return fd, path

    def interrupted_open(*args: object, **kwargs: object) -> object:
        raise KeyboardInterrupt  # the JSON Lines writer opens its one file: interrupted

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    if writer == "rows-jsonl":
        monkeypatch.setattr(_io, "open", interrupted_open, raising=False)
        out = _io.OutputWriter(str(tmp_path / "out.jsonl"), {})
    elif writer == "rows-parquet":
        out = _io.OutputWriter(str(tmp_path / "out.parquet"), {})
    else:
        schema = pa.schema([pa.field("a", pa.int64())])
        out = _batch._BatchOutput(str(tmp_path / "out.parquet"), schema, schema)
    with pytest.raises(KeyboardInterrupt):
        with out:
            pass
    assert made and os.listdir(tmp_path) == []
