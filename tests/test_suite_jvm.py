"""The suite's JVMs run with ``tests/conftest.py``'s ``JVM_TEST_OPTIONS`` (the client
compiler alone, the serial collector): Spark's launcher must still pass
``SPARK_SUBMIT_OPTS`` to the JVM, or the suite quietly takes a fifth longer again."""

from __future__ import annotations

import os

import pytest

from tests.conftest import JVM_TEST_OPTIONS

pytestmark = pytest.mark.spark


def test_the_shared_sessions_jvm_runs_with_the_suites_options(spark) -> None:
    if os.environ.get("SPARK_SUBMIT_OPTS", JVM_TEST_OPTIONS) != JVM_TEST_OPTIONS:
        pytest.skip("SPARK_SUBMIT_OPTS was set before the suite started")
    jvm = spark.sparkContext._jvm
    given = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
                 .getInputArguments())
    assert set(JVM_TEST_OPTIONS.split()) <= set(given), given
