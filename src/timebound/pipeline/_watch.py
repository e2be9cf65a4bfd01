"""Progress inside one Spark action: the tasks of the running jobs, with an ETA.

A pipeline table is decided by one action (its decision table is written), which can
run for minutes on a large dataset; the progress lines between tables say nothing in
the meantime. ``watching(spark, say, every)`` is a context manager around such an
action: while its body runs, a daemon thread reads Spark's status tracker every
``every`` seconds (the active jobs, their stages, each stage's tasks) and, whenever
the count of tasks has moved, says ``tasks D/T (P%) ETA ...``:

- ``T`` counts the tasks of the stages Spark has started; a stage not started yet is
  counted once it starts, so while stages remain the ETA (the time so far applied to
  the tasks left, ``eta_after``) is a lower bound;
- no ETA before the first task completes (no rate yet); nothing is said before Spark
  starts a stage, nor after the body ends (the thread is stopped and joined first);
- the thread never raises: once the session is stopped (Ctrl-C), its reads fail and
  it ends quietly.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from timebound.durations import format_eta

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

#: Seconds between two reads of the status tracker (``--quiet`` reads none).
EVERY = 5.0


def eta_after(done: float, left: float, elapsed: float) -> str:
    """`` ETA 1m20s``: the time ``elapsed`` for ``done`` (work done so far), applied to
    the ``left`` still to do; ``""`` when nothing is left or measured."""
    if done <= 0 or left <= 0 or elapsed <= 0:
        return ""
    return f" ETA {format_eta(elapsed * left / done)}"


def running_tasks(tracker: Any) -> tuple[int, int]:
    """(completed, total) tasks of the stages of every active job Spark has started."""
    done = total = 0
    for job in tracker.getActiveJobsIds():
        info = tracker.getJobInfo(job)
        if info is None:
            continue
        for stage_id in info.stageIds:
            stage = tracker.getStageInfo(stage_id)
            if stage is not None:
                done += int(stage.numCompletedTasks)
                total += int(stage.numTasks)
    return done, total


def tasks_line(done: int, total: int, elapsed: float) -> str:
    """``tasks 8/20 (40%) ETA 12s``."""
    percent = 100 * done // total if total else 0
    return f"tasks {done:,}/{total:,} ({percent}%){eta_after(done, total - done, elapsed)}"


@contextmanager
def watching(spark: SparkSession, say: Callable[[str], None],
             every: float = EVERY) -> Iterator[None]:
    """Say the body's task progress every ``every`` seconds while it runs (module
    docstring); ``every`` <= 0 says nothing."""
    if every <= 0:
        yield
        return
    tracker = spark.sparkContext.statusTracker()
    stop = threading.Event()
    started = time.perf_counter()

    def watch() -> None:
        said = (0, 0)
        while not stop.wait(every):
            try:
                done, total = running_tasks(tracker)
            except Exception:  # the session is gone (stopped on a signal): end quietly
                return
            if total and (done, total) != said and not stop.is_set():
                said = (done, total)
                say(tasks_line(done, total, time.perf_counter() - started))

    thread = threading.Thread(target=watch, name="timebound-watch-tasks", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=every + 5)
