"""Stream failures are one line (stream side).

A query as a separate process: Ctrl-C (SIGINT to the whole process group, as a
terminal sends it) inside micro-batch 1 exits 130 with one line on stderr -- not
Spark's ``java.lang.StackOverflowError``, its WARN lines and exit 0 -- and none of the
Python worker's start-up chatter reaches the terminal (it goes to
``CHECKPOINT/timebound-spark.log``, which stands in for every trace: a bad row's
traces go there too). Then the same query again, on the shared session: the
checkpoint is usable -- batch 1 runs again, batch 2 follows -- until a bad row in the
last file stops it with its typed error; the sink holds batches 0-2 exactly once,
equal to the replay of the good files.

The other ends are unit-checked: SIGTERM inside a batch exits 143, a failure Spark
finds is one ``QueryFailed`` line. Every process is killed in ``finally``.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.test_stream_atmostonce import (
    KEY,
    SHUFFLE,
    TYPES,
    amo_trace,
    options,
    read_table,
    replay,
)
from timebound.errors import TraceError
from timebound.stream import stream_atmostonce
from timebound.stream._errors import QueryFailed
from timebound.stream._run import Summary
from timebound.stream.cli import _finish

DEADLINE = 240.0  # seconds for one phase, even on a loaded machine
ARGS = ["--estimator", "unlimited", "--gc-every", "50"]


def _ids(folder: Path) -> set[int]:
    return {int(n) for n in os.listdir(folder) if n.isdigit()} if folder.is_dir() else set()


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.spark
@pytest.mark.slow  # a CLI process of its own (one JVM start), as tests/test_stream_kill.py
def test_ctrl_c_inside_a_batch_is_one_line_and_the_checkpoint_continues(
        spark: Any, tmp_path: Path) -> None:
    rows = amo_trace(5, 1000, crashes=False, conns=40)
    source = tmp_path / "in"
    source.mkdir()
    # three micro-batches (the query is frozen as soon as batch 1's offsets are logged,
    # and the signal sent then), then a file with a bad row
    parts = [rows[:200], rows[200:800], rows[800:]]
    for index, part in enumerate(parts):
        pq.write_table(pa.Table.from_pylist(part, schema=TYPES),
                       source / f"{index:03d}-part.parquet")
    bad = {"run": "r1", "seq": 10**6, "type": "msg", "receiver": "s1", "conn": "c1",
           "ts": "x", "at": 10**6}
    (source / "003-bad.jsonl").write_text(json.dumps(bad) + "\n")
    expected = replay(tmp_path, rows, ARGS)
    ck, sink = tmp_path / "ck", tmp_path / "sink"
    command = [sys.executable, "-m", "timebound.cli", "stream", "atmostonce",
               "--source", str(source), "--checkpoint", str(ck), "--sink", str(sink),
               "--max-files-per-trigger", "1", "--master", "local[2]",
               "--conf", "spark.sql.shuffle.partitions=2", *ARGS]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str) -> subprocess.Popen[bytes]:
        with open(tmp_path / f"{name}.out", "wb") as out, \
                open(tmp_path / f"{name}.err", "wb") as err:
            proc = subprocess.Popen(command, stdout=out, stderr=err, env=env,
                                    start_new_session=True)
        procs.append(proc)
        return proc

    try:
        first = start("first")
        end = time.monotonic() + DEADLINE
        while not (0 in _ids(ck / "commits") and 1 in _ids(ck / "offsets")):
            assert first.poll() is None, (tmp_path / "first.err").read_text()[-2000:]
            assert time.monotonic() < end, "timed out waiting for batch 1"
            time.sleep(0.01)
        # frozen first (JVM and workers with it), so that the signal is pending inside
        # batch 1 however fast the batch runs; then Ctrl-C and resume
        os.killpg(first.pid, signal.SIGSTOP)
        assert 1 not in _ids(ck / "commits"), "batch 1 finished before the signal"
        os.killpg(first.pid, signal.SIGINT)
        os.killpg(first.pid, signal.SIGCONT)
        assert first.wait(timeout=DEADLINE) == 130
        assert 1 not in _ids(ck / "commits")
    finally:
        for proc in procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()

    first_err = _lines(tmp_path / "first.err")
    assert len(first_err) == 1, first_err[:20]
    assert first_err[0].startswith("timebound: interrupted (SIGINT) inside micro-batch 1: "
                                   "not committed"), first_err
    shown = (tmp_path / "first.out").read_text()
    assert "Python worker" not in shown and "log4j" not in shown
    assert "log4j" in (ck / "timebound-spark.log").read_text()  # Spark's output: kept, not shown

    out = io.StringIO()
    with pytest.raises(TraceError) as caught:
        stream_atmostonce(str(source), str(ck), str(sink), options(ARGS), max_files=1,
                          spark=spark, conf=SHUFFLE, out=out)
    assert str(caught.value) == "003-bad.jsonl:1: field 'ts': expected an integer, got 'x'"
    assert "batch 1:" in out.getvalue()
    assert _ids(ck / "commits") == {0, 1, 2}

    verdicts = sorted(read_table(sink / "verdicts"), key=lambda r: r["seq"])
    assert [tuple(r[k] for k in KEY) for r in verdicts] == \
        [tuple(r.get(k) for k in KEY) for r in expected]  # each row once, the replay's
    accepted = Counter((r["seq"], r["conn"], r["ts"]) for r in read_table(sink / "accepted"))
    assert set(accepted.values()) == {1}
    assert len(accepted) == sum(r["verdict"] == "accepted" for r in expected)
    assert not [n for t in ("verdicts", "accepted") for n in os.listdir(sink / t)
                if n.startswith("_tmp")]


def test_a_signal_inside_a_batch_exits_128_plus_its_number(
        capsys: pytest.CaptureFixture[str]) -> None:
    class Result:
        summary = Summary(batches=2, rows_in=9, counts={}, stopped_by="SIGTERM",
                          unfinished=[3])

    assert _finish(Result()) == 143
    captured = capsys.readouterr()
    assert captured.err == ("timebound: terminated (SIGTERM) inside micro-batch 3: not "
                            "committed, restart with the same command to run it again\n")
    assert captured.out == ""
    Result.summary = Summary(batches=2, rows_in=9, counts={}, stopped_by="SIGTERM")
    assert _finish(Result()) == 0  # between batches: a clean stop
    assert "done (stopped on SIGTERM)" in capsys.readouterr().out


def test_a_failure_spark_finds_is_one_line() -> None:
    class SparkFailure(Exception):
        pass

    text = ("[STATE_STORE_PROVIDER_MISMATCH] The state of operator 0 was written by "
            "another provider.\n=== Streaming Query ===\nIdentifier: [id = 1]\n"
            + "\tat org.apache.spark.Foo(Foo.scala:1)\n" * 500)
    error = QueryFailed(SparkFailure(text), "/ck/timebound-spark.log")
    assert str(error) == ("the streaming query failed: [STATE_STORE_PROVIDER_MISMATCH] The "
                          "state of operator 0 was written by another provider. (Spark's "
                          "log: /ck/timebound-spark.log; --verbose shows it here)")
    assert "\n" not in str(QueryFailed(SparkFailure("x" * 5000), None))


def test_a_python_failure_inside_spark_names_its_exception() -> None:
    text = ("[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided "
            "function in foreach batch sink. Reason: An exception was raised by the Python "
            "Proxy. Return Message: Traceback (most recent call last):\n"
            '  File "/x/_atmostonce.py", line 9, in decide\n    data = decode(saved[0])\n'
            "KeyError: 'node'\n\tat org.apache.spark.Foo(Foo.scala:1)\n")
    assert str(QueryFailed(RuntimeError(text), None)) == (
        "the streaming query failed: [FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred "
        "in the user provided function in foreach batch sink. Reason: An exception was "
        "raised by the Python Proxy. Return Message: KeyError: 'node'")
