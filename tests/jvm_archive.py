"""A class-data-sharing archive of the classes Spark's JVM loads, for the JVMs the suite
starts (tests/conftest.py adds it to ``SPARK_SUBMIT_OPTS``).

A JVM that starts Spark loads and verifies thousands of classes from jars; with a
dynamic CDS archive (``-XX:SharedArchiveFile``) it maps them from one file instead.
Measured on 2 cores, ``timebound stream atmostonce`` on the bundled example (one
micro-batch, a JVM of its own) took 25.5-28.7 s of the machine's CPU without the
archive and 18.8 s with it. The suite starts dozens of JVMs (the shared session,
every ``timebound`` and benchmark subprocess).

The archive is built once per checkout by scripts/setup.sh (``python
tests/jvm_archive.py``, about 45 s), by one JVM that runs that stream command and
dumps the classes it loaded as it exits (``-XX:ArchiveClassesAtExit``); a checkout
without it runs the suite as before. It lives in ``.venv/`` under a name
made of the Java binary, its size and time, PySpark's version and the JVM options, so
a changed JVM or Spark builds a new one. It is written under a temporary name, tried
by a JVM (a truncated archive would crash every JVM that maps it) and renamed into
place, so a JVM sees it whole or not at all. A JVM whose class path does not match
it loads its classes as usual; ``-Xlog:cds=off``
keeps it from saying so on stdout.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The options of every JVM the suite starts (tests/conftest.py says why).
JVM_TEST_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
#: what keeps a JVM that cannot use the archive quiet about it
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"

#: The job whose classes are archived (argv[1]: a scratch folder). The JVM is made to
#: exit (its stdin closed) and waited for, so that its dump is complete on return.
_JOB = r"""
import os, shutil, sys
from timebound.cli import main
from timebound.examples_cli import example_path
work = sys.argv[1]
os.mkdir(os.path.join(work, "in"))
shutil.copy(example_path("atmostonce"), os.path.join(work, "in", "part-000.jsonl"))
assert main(["stream", "atmostonce", "--source", os.path.join(work, "in"),
             "--checkpoint", os.path.join(work, "ck"), "--sink", os.path.join(work, "out"),
             "--estimator", "unlimited", "--gc-every", "50", "--resilient", "--beta", "400",
             "--latest-every", "100"]) == 0
from pyspark import SparkContext
gateway = SparkContext._gateway
if gateway is not None:
    gateway.shutdown()
    gateway.proc.stdin.close()
    gateway.proc.wait()
"""


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(java) if java and os.path.exists(java) else None


def archive_path(options: str) -> Path | None:
    """Where the archive for this JVM, PySpark and ``options`` lives (None: no Java, or
    no ``.venv`` to keep it in)."""
    java = _java()
    if java is None or not (ROOT / ".venv").is_dir():
        return None
    try:
        import pyspark
    except ImportError:
        return None
    stat = os.stat(java)
    key = f"{java}|{stat.st_size}|{stat.st_mtime_ns}|{pyspark.__version__}|{options}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return ROOT / ".venv" / f"spark-classes-{digest}.jsa"


def _loads(java: str, archive: str) -> bool:
    """A JVM starts with ``archive`` mapped (a truncated one makes it crash)."""
    done = subprocess.run([java, f"-XX:SharedArchiveFile={archive}", *QUIET.split(),
                           "-version"], capture_output=True, timeout=60, check=False)
    return done.returncode == 0


def build(options: str = JVM_TEST_OPTIONS) -> Path | None:
    """Build the archive for ``options`` unless it is there (its path; None when it
    cannot be built: the suite then runs without it, as before). The job runs in a
    process group of its own, ended on every way out (a JVM whose job failed exits,
    and writes its dump, after the job's Python process); nothing is left but the
    archive."""
    path, java = archive_path(options), _java()
    if path is None or java is None:
        print("tests: no JVM class archive (no java or no .venv)", file=sys.stderr)
        return None
    if path.exists():
        return path
    print(f"tests: building .venv/{path.name}, the classes Spark's JVM loads, for the "
          "suite's JVMs (about 45 s)", flush=True)
    work = tempfile.mkdtemp(prefix="timebound-jvm-archive-")
    partial = f"{path}.{os.getpid()}.tmp"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable,
               SPARK_SUBMIT_OPTS=f"{options} -XX:ArchiveClassesAtExit={partial} {QUIET}")
    job = subprocess.Popen([sys.executable, "-c", _JOB, work], env=env, cwd=work,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           start_new_session=True)
    try:
        output, _ = job.communicate(timeout=600)
        if job.returncode != 0 or not os.path.exists(partial) or not _loads(java, partial):
            print(f"tests: no JVM class archive (the suite runs without it):\n"
                  f"{output[-1500:]}", file=sys.stderr)
            return None
        os.replace(partial, path)
        return path
    except subprocess.TimeoutExpired:
        print("tests: no JVM class archive (its job ran over 600 s)", file=sys.stderr)
        return None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(job.pid, signal.SIGKILL)
        job.wait()
        with contextlib.suppress(OSError):
            os.unlink(partial)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    try:
        build()
    except Exception as exc:  # never fatal: scripts/setup.sh goes on without it
        print(f"tests: no JVM class archive (the suite runs without it): {exc}",
              file=sys.stderr)
