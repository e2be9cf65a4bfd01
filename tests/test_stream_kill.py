"""A real kill: the streaming query as a separate process, SIGKILLed (with its JVM and
Python workers: the whole process group) between and inside micro-batches, restarted
from its checkpoint.

atmostonce (killed right after a commit, then inside the sink of a later batch --
its verdicts written, its accepted messages not yet -- then run to the end):
``accepted/`` must hold every accepted message exactly once and the verdicts must
equal an uninterrupted run -- the replay of the concatenated files, which the
contract test shows an uninterrupted run equals. merge: a SIGKILL inside a batch,
then a restart as a service, stopped cleanly by SIGTERM (exit 0) once every file is
in; the order per merger must be the replay's, as in an uninterrupted run. Every
process is killed in ``finally``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.test_stream_atmostonce import KEY, amo_trace, read_table, replay, write_files
from tests.test_stream_merge import check_against_replay, merge_trace, read_order, replay_merge
from tests.test_stream_merge import write_parts as write_merge_parts

pytestmark = [pytest.mark.slow, pytest.mark.spark]

DEADLINE = 240.0  # seconds for one phase, even on a loaded machine
CONF = ["--conf", "spark.sql.shuffle.partitions=2", "--master", "local[2]"]


def conf(tmp_path: Path) -> list[str]:
    """``CONF``, and the killed JVM's scratch folders (``spark-*``, ``blockmgr-*``, the
    native libraries it unpacks) under ``tmp_path``: a SIGKILLed JVM cannot remove
    them, and they would otherwise stay in the machine's temporary folder."""
    scratch = tmp_path / "jvm-tmp"
    scratch.mkdir(exist_ok=True)
    return [*CONF, "--conf", f"spark.local.dir={scratch}",
            "--conf", f"spark.driver.extraJavaOptions=-Djava.io.tmpdir={scratch}"]


def _start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    handle = open(log, "ab")
    try:
        return subprocess.Popen([sys.executable, "-m", "timebound.cli", *args], stdout=handle,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True)
    finally:
        handle.close()


def _kill_group(proc: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def _wait_for(proc: subprocess.Popen[bytes], condition: Callable[[], bool], what: str) -> None:
    end = time.monotonic() + DEADLINE
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(f"the query exited ({proc.returncode}) before {what}")
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _finish(proc: subprocess.Popen[bytes]) -> int:
    try:
        return proc.wait(timeout=DEADLINE)
    finally:
        _kill_group(proc)
        proc.wait()


def _committed(ck: Path) -> set[int]:
    folder = ck / "commits"
    if not folder.is_dir():
        return set()
    return {int(n) for n in os.listdir(folder) if n.isdigit()}


def _planned(ck: Path) -> set[int]:
    folder = ck / "offsets"
    if not folder.is_dir():
        return set()
    return {int(n) for n in os.listdir(folder) if n.isdigit()}


def without_read_limit(command: list[str]) -> list[str]:
    """``command`` without its ``--max-files-per-trigger N``."""
    at = command.index("--max-files-per-trigger")
    return command[:at] + command[at + 2:]


def test_kill_between_and_inside_micro_batches_atmostonce(tmp_path: Path) -> None:
    args = ["--estimator", "unlimited", "--gc-every", "16", "--resilient", "--beta", "60",
            "--latest-every", "25", "--classes", "2"]
    rows = amo_trace(11, 140, crashes=True)
    write_files(tmp_path / "in", rows, parts=7)
    expected = replay(tmp_path, rows, args)
    ck, sink = tmp_path / "ck", tmp_path / "sink"
    command = ["stream", "atmostonce", "--source", str(tmp_path / "in"), "--checkpoint", str(ck),
               "--sink", str(sink), "--max-files-per-trigger", "1", *conf(tmp_path), *args]
    log = tmp_path / "log.txt"
    kills: list[str] = []
    procs: list[subprocess.Popen[bytes]] = []
    try:
        # 1. between micro-batches: right after batch 0's commit is written
        proc = _start(command, log)
        procs.append(proc)
        _wait_for(proc, lambda: 0 in _committed(ck), "batch 0 committed")
        _kill_group(proc)
        proc.wait()
        kills.append("between")

        # 2. inside a micro-batch: verdicts of a batch written, its accepted/ not yet
        # (or, failing that, a batch planned and not committed)
        proc = _start(command, log)
        procs.append(proc)

        def inside() -> bool:
            for batch in _planned(ck) - _committed(ck):
                if (sink / "verdicts" / f"batch={batch}").exists() and \
                        not (sink / "accepted" / f"batch={batch}").exists():
                    kills.append(f"inside sink, batch {batch}")
                    return True
            return False

        _wait_for(proc, inside, "a batch half-written")
        _kill_group(proc)
        proc.wait()

        # 3. restart and run to the end: the batch planned in 2. again, then the files
        # left in one micro-batch (the read limit is not locked; a batch's rows are fed
        # in seq order, so the verdicts do not depend on how the files are batched)
        proc = _start(without_read_limit(command), log)
        procs.append(proc)
        assert _finish(proc) == 0, log.read_text()[-3000:]
    finally:
        for p in procs:
            _kill_group(p)
            p.wait()
    assert len(kills) == 2, kills
    verdicts = sorted(read_table(sink / "verdicts"), key=lambda r: r["seq"])
    assert [tuple(r[k] for k in KEY) for r in verdicts] == \
        [tuple(r.get(k) for k in KEY) for r in expected]
    accepted = Counter((r["seq"], r["receiver"], r["conn"], r["ts"])
                       for r in read_table(sink / "accepted"))
    assert set(accepted.values()) == {1}  # exactly once
    assert set(accepted) == {(r["seq"], r["receiver"], r["conn"], r["ts"]) for r in verdicts
                             if r["verdict"] == "accepted"}
    leftovers = [n for t in ("verdicts", "accepted") for n in os.listdir(sink / t)
                 if n.startswith("_tmp")]
    assert not leftovers


def test_merge_kill_restart_and_clean_stop(tmp_path: Path) -> None:
    rows = merge_trace(3)
    write_merge_parts(tmp_path / "in", rows, parts=5)
    replayed = replay_merge(tmp_path, rows, ["--epsilon", "2", "--delta", "3", "--variant", "rc"])
    ck, sink = tmp_path / "ck", tmp_path / "sink"
    base = ["stream", "merge", "--source", str(tmp_path / "in"), "--checkpoint", str(ck),
            "--sink", str(sink), "--max-files-per-trigger", "1", "--epsilon", "2",
            "--delta", "3", "--variant", "rc", *conf(tmp_path)]
    log = tmp_path / "log.txt"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        # 1. SIGKILL inside a micro-batch (planned, not committed), after one commit
        proc = _start(base, log)
        procs.append(proc)
        _wait_for(proc, lambda: any(b > 0 for b in _planned(ck) - _committed(ck)),
                  "a batch running")
        _kill_group(proc)
        proc.wait()

        # 2. restart as a service; once every file is committed, a clean SIGTERM stop
        proc = _start([*base, "--trigger", "processing-time=200ms"], log)
        procs.append(proc)
        _wait_for(proc, lambda: len(_committed(ck)) >= 5, "every file committed")
        os.kill(proc.pid, signal.SIGTERM)
        assert _finish(proc) == 0, log.read_text()[-3000:]
        assert "stopped on SIGTERM" in log.read_text()
    finally:
        for p in procs:
            _kill_group(p)
            p.wait()
    check_against_replay(read_order(sink), replayed)


def test_sigterm_to_the_process_group_of_a_stream_on_an_empty_source_stops_it_cleanly(
        tmp_path: Path) -> None:
    """``timeout``, a terminal or a supervisor sends SIGTERM to the whole group: the JVM
    must not die under the driver (it ignores SIGTERM; the driver stops the query and
    then Spark). Killed while its first (empty) micro-batch runs, the stream says so in
    one line and exits 143; had the batch committed first, it ends 0."""
    (tmp_path / "in").mkdir()
    ck = tmp_path / "ck"
    command = ["stream", "merge", "--source", str(tmp_path / "in"), "--checkpoint", str(ck),
               "--sink", str(tmp_path / "sink"), "--epsilon", "2", "--delta", "3",
               *conf(tmp_path)]
    log = tmp_path / "log.txt"
    proc = _start(command, log)
    try:
        _wait_for(proc, lambda: 0 in _planned(ck), "micro-batch 0 planned")
        _kill_group(proc, signal.SIGTERM)
        status = _finish(proc)
    finally:
        _kill_group(proc)
        proc.wait()
    text = log.read_text()
    ended = {143: "timebound: terminated (SIGTERM) inside micro-batch 0: not committed",
             0: "done (stopped on SIGTERM): "}
    assert status in ended and ended[status] in text, text[-3000:]
    assert "error" not in text.lower(), text[-3000:]
