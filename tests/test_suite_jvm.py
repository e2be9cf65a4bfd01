"""The suite's JVMs run with ``tests/conftest.py``'s ``SUITE_JVM_OPTIONS`` (the client
compiler alone, the serial collector, the class-data archive): Spark's launcher must
still pass ``SPARK_SUBMIT_OPTS`` to the JVM, or the suite quietly takes a fifth longer
again. The JVM's command line is read from ``/proc``."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from tests import jvm_archive
from tests.conftest import SUITE_JVM_OPTIONS


def _session_jvm_arguments() -> list[str]:
    """The command line of the Spark JVM this process started (PySpark's gateway)."""
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            args = [a.decode() for a in (entry / "cmdline").read_bytes().split(b"\0") if a]
        except (OSError, IndexError, ValueError):  # gone meanwhile
            continue
        if parent == me and "org.apache.spark.deploy.SparkSubmit" in args:
            return args
    pytest.fail("no Spark JVM started by this process")


@pytest.mark.spark
def test_the_shared_sessions_jvm_runs_with_the_suites_options(spark) -> None:
    if os.environ.get("SPARK_SUBMIT_OPTS") != SUITE_JVM_OPTIONS:
        pytest.skip("SPARK_SUBMIT_OPTS was set before the suite started")
    assert spark.range(1).count() == 1  # the session (and its JVM) is up
    given = _session_jvm_arguments()
    assert set(SUITE_JVM_OPTIONS.split()) <= set(given), given


def test_a_failed_archive_build_leaves_nothing_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job that fails: no archive, no partial file in ``.venv``, no scratch folder,
    and the suite goes on without it."""
    options = f"{jvm_archive.JVM_TEST_OPTIONS} -Dtimebound.test=failed-build"
    path = jvm_archive.archive_path(options)
    if path is None:
        pytest.skip("no java or no .venv")
    # the job writes in its scratch folder and starts the partial archive, then fails
    monkeypatch.setattr(jvm_archive, "_JOB", (
        "import os, sys; open(sys.argv[1] + '/x', 'w'); "
        "open(os.environ['SPARK_SUBMIT_OPTS'].split('ArchiveClassesAtExit=')[1].split()[0],"
        " 'w'); sys.exit(3)"))
    scratch = set(os.listdir(tempfile.gettempdir()))
    assert jvm_archive.build(options) is None
    assert not [n for n in os.listdir(path.parent) if n.startswith(path.name)]
    assert {n for n in set(os.listdir(tempfile.gettempdir())) - scratch
            if n.startswith("timebound-jvm-archive-")} == set()
