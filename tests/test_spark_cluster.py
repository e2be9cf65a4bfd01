"""``timebound.spark`` on a standalone Spark cluster.

The test starts a standalone master and one worker from the pyspark package's own
``bin/spark-class`` (loopback only, ports chosen by Spark, a temporary work dir and
local dirs, an empty conf dir), runs ``at_most_once`` (batch) through a session whose
master is ``spark://127.0.0.1:PORT`` in a subprocess (tests/spark_cluster_job.py: the
shared local session of the other tests stays untouched), and checks that

- the rows, every column, equal those of the same call on ``local[2]`` (the shared
  session) and the verdicts equal ``timebound.replay``'s on the rows in decision order;
- the tasks ran in an executor JVM the worker started (its log in the worker's work
  dir), not in the driver.

The master, the worker, the executor and every process they started are stopped after,
pass or fail (``Cluster.stop``: SIGTERM to each process group, SIGKILL after a grace,
then every process seen under them is waited for). Skipped only when Java is missing.

By hand: docs/spark.md, "On a standalone cluster".
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "tests" / "spark_cluster_job.py"
#: Guards against a hang (never timed assertions): how long a daemon may take to say it
#: is up, the job to finish, and a stopped process to be gone.
START_LIMIT_S = 120.0
JOB_LIMIT_S = 400.0
STOP_GRACE_S = 20.0
#: Short-lived JVMs start faster with the client compiler only (and the serial GC).
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

KWARGS: dict[str, Any] = {"estimator": "fixed", "rho": 30, "gc_every": 20, "classes": 3,
                          "reorder_window": 1}


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def java_missing() -> bool:
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        return not (Path(java_home) / "bin" / "java").exists()
    return shutil.which("java") is None


# -- processes ---------------------------------------------------------------------------

def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, start time) of a live process, None when it is gone (or a zombie
    already waited for)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), fields[19]


def descendants(root: int) -> dict[int, str]:
    """Every live process under ``root`` (pid -> start time, to tell a reused pid)."""
    children: dict[int, list[int]] = {}
    starts: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (st := _stat(int(entry.name))) is not None:
            children.setdefault(st[0], []).append(int(entry.name))
            starts[int(entry.name)] = st[1]
    found: dict[int, str] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found[pid] = starts[pid]
            todo += children.get(pid, [])
    return found


def _alive(pid: int, start: str) -> bool:
    st = _stat(pid)
    if st is None:
        return False
    with contextlib.suppress(OSError):
        if "State:\tZ" in Path(f"/proc/{pid}/status").read_text():
            return False  # a zombie: its parent (or init) reaps it
    return st[1] == start


def _kill(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def stop(procs: list[subprocess.Popen[bytes]]) -> list[int]:
    """Stop ``procs`` (each the leader of its own session) and everything under them:
    SIGTERM to each group, SIGKILL to what is left after a grace, every leader waited
    for. Returns the pids still alive at the end (none, unless SIGKILL failed)."""
    seen: dict[int, str] = {}
    for proc in procs:
        seen.update(descendants(proc.pid))
    for proc in procs:
        _killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for proc in procs:
        seen.update(descendants(proc.pid))
        _killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    while time.monotonic() < deadline and any(_alive(p, s) for p, s in seen.items()):
        time.sleep(0.1)
    for pid, start in seen.items():  # outside the groups (Python's daemon has its own)
        if _alive(pid, start):
            _kill(pid, signal.SIGKILL)
    end = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < end and any(_alive(p, s) for p, s in seen.items()):
        time.sleep(0.1)
    return [p for p, s in seen.items() if _alive(p, s)]


class Cluster:
    """A standalone master and one worker under ``base``, loopback only."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.work = base / "work"
        for sub in ("work", "local", "conf", "logs"):
            (base / sub).mkdir(parents=True, exist_ok=True)
        self.env = dict(os.environ)
        self.env.update({
            "SPARK_HOME": str(spark_home()),
            "SPARK_CONF_DIR": str(base / "conf"),  # empty: no site defaults
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_DIRS": str(base / "local"),
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            "SPARK_DAEMON_JAVA_OPTS": FAST_JVM,
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        })
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[IO[bytes]] = []
        self.master_url = ""

    def _start(self, name: str, *args: str) -> Path:
        log = self.base / "logs" / f"{name}.log"
        out = log.open("wb")
        self.logs.append(out)
        self.procs.append(subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), *args], env=self.env,
            cwd=self.base, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True))
        return log

    def _wait_for(self, log: Path, pattern: str) -> re.Match[str]:
        proc = self.procs[-1]
        deadline, text = time.monotonic() + START_LIMIT_S, ""
        while time.monotonic() < deadline:
            text = log.read_text(errors="replace")
            if (found := re.search(pattern, text)) is not None:
                return found
            if proc.poll() is not None:
                break
            time.sleep(0.2)
        pytest.fail(f"{log.name}: no {pattern!r} (exit {proc.poll()}):\n{text[-3000:]}")

    def start(self) -> None:
        """The master, then the worker as soon as the master's URL is known (the
        worker retries its registration; the job's driver waits for the executor)."""
        master = self._start("master", "org.apache.spark.deploy.master.Master",
                             "--host", "127.0.0.1", "--port", "0", "--webui-port", "0")
        self.master_url = self._wait_for(
            master, r"Starting Spark master at (spark://127\.0\.0\.1:\d+)").group(1)
        self._start("worker", "org.apache.spark.deploy.worker.Worker", "--host",
                    "127.0.0.1", "--port", "0", "--webui-port", "0", "--cores", "2",
                    "--memory", "1g", "--work-dir", str(self.work), self.master_url)

    def run_job(self, job: dict[str, Any]) -> subprocess.Popen[bytes]:
        """tests/spark_cluster_job.py on this cluster, started now, read by ``result``."""
        path = self.base / "job.json"
        path.write_text(json.dumps(job))
        self.procs.insert(0, subprocess.Popen(
            [sys.executable, str(JOB), self.master_url, str(path), FAST_JVM], env=self.env,
            cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True))
        return self.procs[0]

    def stop(self) -> list[int]:
        left = stop(self.procs)
        for out in self.logs:
            out.close()
        return left


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    if java_missing():
        pytest.skip("Java is missing (no java on PATH, or JAVA_HOME without bin/java): "
                    "a standalone Spark master and worker need it")
    running = Cluster(tmp_path / "cluster")
    try:
        running.start()
        yield running
    finally:
        left = running.stop()
    assert not left, f"processes left running after the cluster stopped: {left}"


# -- the trace and the references ---------------------------------------------------------

SCHEMA = "id long, node string, user string, sent long, recv long, prio long, note string"


def trace(seed: int, n: int, nodes: int = 3, conns: int = 9) -> list[dict[str, Any]]:
    """``n`` rows under the caller's names (``user``, ``sent``, ``recv``, ``node``,
    ``prio``): many equal ``recv`` (ties broken by ``prio``), ~25% resent copies."""
    rng = random.Random(seed)
    recv = 0
    rows: list[dict[str, Any]] = []
    sent: list[tuple[str, int]] = []
    prios = rng.sample(range(10 * n), n)
    for i in range(n):
        recv += rng.choice((0, 0, 1, 2, 5))
        if sent and rng.random() < 0.25:
            user, ts = rng.choice(sent)
        else:
            user, ts = f"u{rng.randrange(conns)}é", max(1, recv - rng.randint(0, 40))
            sent.append((user, ts))
        rows.append({"id": i, "node": f"n{rng.randrange(nodes)}", "user": user,
                     "sent": ts, "recv": recv, "prio": prios[i], "note": f"row {i}"})
    return rows


def replayed(tmp: Path, rows: list[dict[str, Any]]) -> dict[int, tuple[Any, ...]]:
    """``timebound replay atmostonce`` (its API) on ``rows`` in decision order:
    id -> (verdict, rho, entries)."""
    from timebound.replay import load_commands, replay_rows

    ordered = sorted(rows, key=lambda r: (r["recv"], r["prio"], r["sent"], r["user"]))
    command = next(c for c in load_commands() if c.name == "atmostonce")
    src, dst = tmp / "trace.jsonl", tmp / "replayed.jsonl"
    src.write_text("".join(json.dumps({
        "type": "msg", "receiver": r["node"], "conn": r["user"], "ts": r["sent"],
        "at": r["recv"], "id": r["id"]}) + "\n" for r in ordered))
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    options = ["--rho", str(KWARGS["rho"]), "--gc-every", str(KWARGS["gc_every"]),
               "--classes", str(KWARGS["classes"])]
    replay_rows(command, parser.parse_args(["--input", str(src), "--output", str(dst),
                                            *options]))
    out = [json.loads(line) for line in dst.read_text().splitlines()]
    return {r["id"]: (r["verdict"], r["rho"], r["entries"]) for r in out}


# -- the test -----------------------------------------------------------------------------

@pytest.mark.spark
@pytest.mark.slow
def test_cluster_rows_equal_local_and_the_replay(cluster: Cluster, tmp_path: Path,
                                                 request: pytest.FixtureRequest) -> None:
    from timebound.spark import at_most_once

    rows = trace(28, 300)
    job = cluster.run_job({"rows": rows, "kwargs": KWARGS})
    # While the cluster works: the same call on the shared local[2] session (asked for
    # here, not as an argument, so that without Java the skip comes first), the replay.
    spark = request.getfixturevalue("spark")
    local_out = at_most_once(spark.createDataFrame(rows, SCHEMA), conn="user", ts="sent",
                             at="recv", receiver="node", order="prio", **KWARGS)
    local = [r.asDict() for r in local_out.orderBy("id").collect()]
    expected = replayed(tmp_path, rows)
    try:
        stdout, stderr = job.communicate(timeout=JOB_LIMIT_S)
    except subprocess.TimeoutExpired:
        _killpg(job.pid, signal.SIGKILL)
        stderr = job.communicate()[1]
        pytest.fail(f"the cluster job did not finish within {JOB_LIMIT_S:.0f} s:\n"
                    + stderr.decode(errors="replace")[-4000:])
    assert job.returncode == 0, stderr.decode(errors="replace")[-4000:]
    result = json.loads(stdout.decode().strip().splitlines()[-1])

    assert result["master"] == cluster.master_url
    assert result["columns"] == local_out.columns == [
        "id", "node", "user", "sent", "recv", "prio", "note", "verdict", "rho", "entries"]
    assert len(local) == len(rows)
    assert result["rows"] == local
    assert {r["id"]: (r["verdict"], r["rho"], r["entries"])
            for r in result["rows"]} == expected
    assert {"accepted", "duplicate"} <= {v for v, _, _ in expected.values()}

    # The tasks ran in an executor JVM the worker started, with Python workers of its own.
    executor_logs = list(cluster.work.glob("app-*/*/stderr"))
    assert len(executor_logs) == 1, executor_logs
    executor_log = executor_logs[0].read_text(errors="replace")
    assert "CoarseGrainedExecutorBackend" in executor_log
    assert "Starting Python task execution" in executor_log
