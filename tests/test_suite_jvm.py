"""The suite's JVMs run with ``tests/conftest.py``'s ``JVM_TEST_OPTIONS`` (the client
compiler alone, the serial collector): Spark's launcher must still pass
``SPARK_SUBMIT_OPTS`` to the JVM, or the suite quietly takes a fifth longer again. The
JVM's command line is read from ``/proc``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import JVM_TEST_OPTIONS

pytestmark = pytest.mark.spark


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


def test_the_shared_sessions_jvm_runs_with_the_suites_options(spark) -> None:
    if os.environ.get("SPARK_SUBMIT_OPTS", JVM_TEST_OPTIONS) != JVM_TEST_OPTIONS:
        pytest.skip("SPARK_SUBMIT_OPTS was set before the suite started")
    assert spark.range(1).count() == 1  # the session (and its JVM) is up
    given = _session_jvm_arguments()
    assert set(JVM_TEST_OPTIONS.split()) <= set(given), given
