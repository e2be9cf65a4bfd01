"""The pipeline / sweep / demo side: a Spark failure is one line
``timebound: error: ...`` with exit status 2 (``--verbose`` shows the rest), Ctrl-C
during ``pipeline`` is the one line ``timebound: interrupted`` with exit status 130, and
nothing is left behind.

The commands run in a subprocess of the CLI (their own JVM, their own stderr). Ctrl-C is
sent as a terminal sends it: SIGINT to the whole process group (the JVM and Python
workers included), once the pipeline has said it is reading its table (Spark started,
the temporary output folder exists)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.test_pipeline_support import example_rows, write_table
from timebound.sparkutil import spark_failure, spark_reason

CLI = [sys.executable, "-m", "timebound.cli"]
#: Progress lines of the commands (stderr), not errors.
PROGRESS = ("pipeline ", "sweep [", "note: ")


def run(argv: list[str], timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=timeout)


def the_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one stderr line of a failed command (exit status 2)."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-3000:]
    assert len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith("timebound: error: "), lines
    return lines[0]


def merge_dataset(folder: Path, runs: int) -> Path:
    rows = example_rows("merge")
    write_table(str(folder), "arrivals", {f"r{i}": rows for i in range(runs)},
                extra={f"r{i}": {"epsilon": 2, "delta": 3} for i in range(runs)})
    return folder


# -- before Spark starts ------------------------------------------------------------------


@pytest.mark.parametrize("command", [["sweep", "merge", "--seeds", "1"], ["demo"]])
def test_bogus_master_is_one_line_before_spark(tmp_path: Path, command: list[str]) -> None:
    done = run([*command, "--out", str(tmp_path / "o"), "--master", "bogus://x"])
    line = the_line(done)
    assert line.startswith("timebound: error: --master: 'bogus://x' is not a Spark master URL")
    assert os.listdir(tmp_path) == []


# -- Spark does not start: the option to blame, Spark's reason ----------------------------


@pytest.mark.spark
def test_sweep_bad_executor_memory_names_conf_not_master(tmp_path: Path) -> None:
    # both options given: the reason's words ("Executor memory") name the one to blame
    done = run(["sweep", "merge", "--seeds", "1", "--out", str(tmp_path / "o"),
                "--master", "local[1]", "--conf", "spark.executor.memory=abc"])
    line = the_line(done)
    assert line.startswith("timebound: error: --conf: Spark did not start with "
                           "spark.executor.memory=abc: "), line
    assert "Executor memory" in line and "--master" not in line
    assert os.listdir(tmp_path) == []


@pytest.mark.spark
def test_pipeline_bad_driver_memory_is_one_line_and_verbose_shows_the_jvm(
        tmp_path: Path) -> None:
    ds = merge_dataset(tmp_path / "ds", 1)
    argv = ["pipeline", str(ds), "--out", str(tmp_path / "o"), "--conf",
            "spark.driver.memory=abc"]
    line = the_line(run(argv))
    assert line == ("timebound: error: --conf: Spark did not start with "
                    "spark.driver.memory=abc: Invalid maximum heap size: -Xmxabc")
    verbose = run([*argv, "--verbose"])
    assert verbose.returncode == 2
    assert "Could not create the Java Virtual Machine" in verbose.stderr  # the JVM's own
    assert "Traceback" in verbose.stderr
    assert verbose.stderr.strip().splitlines()[-1].startswith(
        "timebound: error: --conf: Spark did not start with spark.driver.memory=abc: ")
    assert sorted(os.listdir(tmp_path)) == ["ds"]


# -- Ctrl-C during the pipeline -----------------------------------------------------------


@pytest.mark.spark
@pytest.mark.slow
def test_ctrl_c_during_pipeline_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    ds = merge_dataset(tmp_path / "ds", 400)
    proc = subprocess.Popen([*CLI, "pipeline", str(ds), "--out", str(tmp_path / "o"),
                             "--master", "local[2]"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own group: Ctrl-C reaches all
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr or []), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 240
        while not any("reading arrivals" in line for line in lines):
            assert proc.poll() is None, "".join(lines)
            assert time.monotonic() < deadline, "the pipeline never started reading"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        reader.join(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
    assert proc.returncode == 130, "".join(lines)
    errors = [line.rstrip("\n") for line in lines if not line.startswith(PROGRESS)]
    assert errors == ["timebound: interrupted"], "".join(lines)
    assert sorted(os.listdir(tmp_path)) == ["ds"]  # no output, no hidden temporary folder


# -- the reason and the option, without Spark ---------------------------------------------


JVM_TRACE = """An error occurred while calling o57.parquet.
: org.apache.spark.SparkException: Job aborted due to stage failure: boom
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:1)
Caused by: java.lang.NumberFormatException: For input string: "x"
\tat java.lang.NumberFormatException.forInputString(NumberFormatException.java:67)
"""


class Py4JJavaError(Exception):
    """Stands for py4j's: only its module matters to ``spark_failure``."""


Py4JJavaError.__module__ = "py4j.protocol"


class PythonException(Exception):
    """Stands for PySpark's: a Python error inside a task."""


PythonException.__module__ = "pyspark.errors.exceptions.captured"


def test_spark_reason_is_the_deepest_cause() -> None:
    assert spark_reason(JVM_TRACE) == 'For input string: "x" (NumberFormatException)'
    assert spark_reason("no java here", None) is None
    assert spark_reason(None, 'Exception in thread "main" org.apache.spark.SparkException: '
                        "Master must either be yarn or start with spark, k8s, or local"
                        ) == ("Master must either be yarn or start with spark, k8s, or local "
                              "(SparkException)")


def test_spark_failure_names_the_conf_item_its_reason_names() -> None:
    failure = spark_failure(Py4JJavaError(JVM_TRACE), {"spark.default.parallelism": "x"})
    assert str(failure) == ('--conf: Spark failed with spark.default.parallelism=x: '
                            'For input string: "x" (NumberFormatException)')
    failure = spark_failure(Py4JJavaError(JVM_TRACE), {"spark.other": "y"})
    assert str(failure) == ('Spark: the job failed: For input string: "x" '
                            "(NumberFormatException)")


def test_spark_failure_leaves_our_bugs_to_the_cli() -> None:
    assert spark_failure(KeyError("x")) is None
    assert spark_failure(PythonException("KeyError: 'x'")) is None


def test_the_jvm_gone_mid_call_is_named() -> None:
    """A socket error raised inside Py4J (the JVM killed) says so; any other OSError is
    left to the CLI's own line for it."""
    scope: dict[str, object] = {}
    exec(compile("def call():\n    raise ConnectionRefusedError(111, 'Connection refused')\n",
                 os.path.join(os.sep, "site", "py4j", "clientserver.py"), "exec"), scope)
    try:
        scope["call"]()  # type: ignore[operator]
    except ConnectionRefusedError as exc:
        assert str(spark_failure(exc)) == ("Spark: lost its JVM (stopped or killed): "
                                           "Connection refused")
    assert spark_failure(ConnectionRefusedError(111, "Connection refused")) is None


def test_ctrl_c_while_publishing_puts_the_previous_output_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C between moving the previous DIR aside and renaming the new one into place."""
    from timebound.pipeline import job

    out, tmp = tmp_path / "o", tmp_path / ".o.tmp-x"
    for folder, text in ((out, "previous"), (tmp, "new")):
        folder.mkdir()
        (folder / "summary.json").write_text(text)
    real, calls = os.replace, []

    def replace(src: str, dst: str) -> None:
        calls.append(src)
        if len(calls) == 2:  # out moved aside, tmp not yet in place
            raise KeyboardInterrupt
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        job._publish(str(tmp), str(out))
    monkeypatch.undo()
    assert (out / "summary.json").read_text() == "previous"
    assert sorted(os.listdir(tmp_path)) == [".o.tmp-x", "o"]  # run_pipeline removes tmp


@pytest.mark.spark
def test_a_failing_pipeline_leaves_a_callers_session_running(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``run_pipeline`` stops on a failure only a session it started itself: one it
    found running (a caller's, this suite's shared one) only has its jobs cancelled."""
    from timebound.demo import scaled
    from timebound.pipeline import job, run_pipeline
    from timebound.sim import DEMO_PARAMS, run_scenario

    dataset = tmp_path / "ds"
    run_scenario("slotted", str(dataset), seed=3,
                 params=scaled(DEMO_PARAMS["slotted"], 0.05))

    def broken(*_args: Any, **_kwargs: Any) -> None:
        raise RuntimeError("metrics failed")

    monkeypatch.setattr(job, "write_metrics", broken)
    with pytest.raises(RuntimeError, match="metrics failed"):
        run_pipeline(str(dataset), str(tmp_path / "out"), progress=lambda _l: None)
    assert spark.sparkContext._jsc is not None  # noqa: SLF001 -- not stopped
    assert spark.range(3).count() == 3
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["ds"]  # no temporary folder left
