"""Shared test configuration.

Hypothesis profiles, chosen by ``HYPOTHESIS_PROFILE``:
- ``dev`` (default): few examples, for quick local runs;
- ``ci``: a fixed, derandomized number of examples (what ``.ci/run`` uses);
- ``thorough``: many examples, for a long local hunt (random, the only one that is).
- ``mutation``: ``scripts/mutate.py``'s (deterministic, 100 examples, no shrinking).

``dev`` and ``ci`` are deterministic (``derandomize=True``: the same examples on every
run) and keep no example database (``database=None``), so a test never fails only
sometimes and a failure saved once is not replayed forever.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

from tests import jvm_archive

settings.register_profile("dev", max_examples=40, deadline=None, derandomize=True,
                          database=None)
# ci: 100 examples, Hypothesis's own default and the count under which scripts/mutate.py
# (profile ``mutation``) measures which broken rules the properties catch. Measured on
# 2 cores (2026-12-04, same checkout): the whole suite 614.7 s and 1,115 s of CPU at
# 150 examples, 565.5 s and 1,013 s at 100.
settings.register_profile(
    "ci",
    max_examples=100,
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("thorough", max_examples=2000, deadline=None, database=None)
# scripts/mutate.py: deterministic, and a failure is reported as found (no shrinking:
# a mutant only needs to fail, not to fail minimally).
settings.register_profile(
    "mutation", max_examples=100, deadline=None, derandomize=True, database=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


# -- the JVMs the suite starts: short-lived, so compiled for a quick start ---------------

#: Every JVM the tests start (the shared session's, and each ``timebound`` or benchmark
#: subprocess's: they inherit the environment) runs with the client compiler alone and
#: the serial collector. A JVM that lives for seconds otherwise spends most of its CPU
#: compiling Spark's start-up code with the optimising compiler and running parallel GC
#: threads: CPU the two cores need for the other worker's tests. Measured: a Spark
#: benchmark's smoke run took 28 s of CPU instead of 44, and the whole suite 765 s
#: instead of 961 on 2 cores. The code the JVM runs is the same. Spark's launcher adds
#: ``SPARK_SUBMIT_OPTS`` to the JVM's command line; a value already set is kept.
#: Each JVM also maps the classes Spark loads from a class-data archive
#: (tests/jvm_archive.py), when scripts/setup.sh has built it.
JVM_TEST_OPTIONS = jvm_archive.JVM_TEST_OPTIONS
_archive = jvm_archive.archive_path(JVM_TEST_OPTIONS)
#: what the suite sets (the workers inherit it from the controller)
SUITE_JVM_OPTIONS = JVM_TEST_OPTIONS + (
    f" -XX:SharedArchiveFile={_archive} {jvm_archive.QUIET}"
    if _archive is not None and _archive.exists() else "")
os.environ.setdefault("SPARK_SUBMIT_OPTS", SUITE_JVM_OPTIONS)


# -- the shared local Spark session (pipeline, report and demo tests) -----------------

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for every ``@pytest.mark.spark`` test: local[2], UI off,
    4 shuffle partitions."""
    from timebound.pipeline.session import build_session

    session = build_session("local[2]", {"spark.sql.shuffle.partitions": "4",
                                         "spark.default.parallelism": "4"},
                            app_name="timebound-tests")
    yield session
    session.stop()


# -- one line when the report's screenshot tests were skipped for want of Chromium ---

#: the skip reason of every test that needs headless Chromium (tests/test_report_*.py)
NO_CHROMIUM = "Chromium is not installed"


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ARG001
    """Say in one line that the screenshot tests did not run, and how to get them."""
    skipped = [r for r in terminalreporter.stats.get("skipped", [])
               if NO_CHROMIUM in str(getattr(r, "longrepr", ""))]
    if skipped:
        terminalreporter.write_line(
            f"screenshot tests: {len(skipped)} skipped, {NO_CHROMIUM} (scripts/setup.sh "
            "installs it with apt where it can; or apt-get install chromium)")


# -- parallel runs (pytest -n 2, as scripts/test.sh runs the suite) ----------------------

#: The xdist group of every test that uses the shared Spark session: ``--dist loadgroup``
#: runs them all on one worker, so the suite still starts one local session (and one
#: JVM for them), while the other worker takes the tests that need none.
SPARK_SESSION_GROUP = "spark-session"


# first: xdist's own hook (on each worker) reads the groups to suffix the node ids the
# scheduler groups by, so the markers must be on the items before it runs
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):  # noqa: ARG001
    """The Spark session's tests in one group; the tests of a module that share a
    module- or class-scoped fixture in a group per module, so the fixture's work (a
    JVM start, simulator runs) is done once, not once per worker."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group(SPARK_SESSION_GROUP))
            continue
        info = getattr(item, "_fixtureinfo", None)
        defs = info.name2fixturedefs.values() if info is not None else ()
        if any(d[-1].scope in ("module", "class", "package") for d in defs if d):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    # the order (scripts/test.sh keeps it: --no-loadscope-reorder): the Spark session's
    # group, then the tests that mostly wait (their worker's core goes to the Spark
    # session's, instead of both workers waiting at the end), then the slow tests, so
    # that none starts last, then the rest
    items.sort(key=_rank)


def _rank(item) -> int:
    group = item.get_closest_marker("xdist_group")
    if group is not None and group.args[:1] == (SPARK_SESSION_GROUP,):
        return 0
    if item.get_closest_marker("waits"):
        return 1
    return 2 if item.get_closest_marker("slow") else 3


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    """On a worker of ``--dist loadgroup``: every grouped test's node id carries its group
    (xdist's suffix), or the groups are silently ignored -- two Spark sessions, module
    fixtures built twice. pytest 9.2 broke that with pytest-xdist 3.8 (pyproject pins)."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    lost = [item.nodeid for item in session.items
            if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
    if lost:
        raise pytest.UsageError(
            f"--dist loadgroup does not group the tests here (e.g. {lost[0]}): this "
            "pytest and pytest-xdist do not work together; install pyproject's versions")
