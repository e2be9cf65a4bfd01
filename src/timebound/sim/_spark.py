"""Run independent simulator jobs as Spark tasks (``simulate --reproduce --spark`` and
``timebound sweep``).

Spark only distributes: each task runs one job (a seeded, single-threaded simulator
run) and returns its result; results come back in job order, so the outcome does not
depend on scheduling. A task that fails returns its error text instead of raising, and
the driver raises one ``SimulationError`` naming the job (its grid point and seed).
PySpark is imported here only, lazily: the simulator itself never needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from timebound.errors import MissingExtra, UsageError
from timebound.sparkutil import build_session, stopped_after

T = TypeVar("T")


class TaskFailed(UsageError):
    """A job failed inside a Spark task (names the job)."""


def _session(master: str | None, conf: dict[str, str], command: str
             ) -> tuple[Any, bool]:
    """The caller's active session when it gives no ``--master``/``--conf``; else one
    started by ``sparkutil.build_session`` (``local[2]`` unless ``--master``; the JVM's
    output off the terminal; a failure is one line naming the option)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise MissingExtra(command, "spark", "pyspark") from None
    active = SparkSession.getActiveSession()
    if active is not None and master is None and not conf:
        return active, False
    spark = build_session(master, conf, app_name="timebound-sweep", default_master="local[2]",
                          defaults={"timebound.logLevel": "OFF"})
    return spark, active is None


def _guarded(fn: Callable[[Any], Any]) -> Callable[[tuple[int, Any]], tuple[int, bool, Any]]:
    def task(item: tuple[int, Any]) -> tuple[int, bool, Any]:
        index, job = item
        try:
            return index, True, fn(job)
        except BaseException as exc:  # reported by the driver, naming the job
            return index, False, f"{type(exc).__name__}: {exc}"
    return task


def map_tasks(fn: Callable[[Any], T], jobs: Sequence[Any], names: Sequence[str], *,
              master: str | None = None, conf: dict[str, str] | None = None,
              progress: Callable[[str, int, int], None] | None = None,
              command: str = "timebound simulate --spark") -> list[T]:
    """``[fn(job) for job in jobs]``, one Spark task per job, in job order. ``command``
    names what needs PySpark when it is not installed."""
    spark, owned = _session(master, dict(conf or {}), command)
    with stopped_after(spark, owned):
        rdd = spark.sparkContext.parallelize(list(enumerate(jobs)), max(1, len(jobs)))
        results: list[Any] = [None] * len(jobs)
        done = 0
        for index, ok, value in rdd.map(_guarded(fn)).toLocalIterator():
            if not ok:
                raise TaskFailed(names[index], f"run failed in its Spark task: {value}")
            results[index] = value
            done += 1
            if progress:
                progress(names[index], done, len(jobs))
        return results
