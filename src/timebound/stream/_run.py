"""Starting, watching and stopping a streaming query.

- Session: ``local[*]`` unless ``--master``; every ``--conf k=v`` passed through; UI
  off unless a ``--conf`` turns it on; the state store is RocksDB
  (``transformWithStateInPandas`` needs it) and the Python workers run this interpreter
  (``PYSPARK_PYTHON``), which has ``pandas``, ``pyarrow`` and ``protobuf``.
- Shuffle partitions: a stateful query's partitions are frozen into its checkpoint
  at the first start (a key's state lives in one partition for ever). On a fresh
  checkpoint, unless ``--conf spark.sql.shuffle.partitions=N`` says otherwise, we take
  the session's default parallelism (the cores of the cluster at first start); a
  restart keeps what the checkpoint says, whatever the ``--conf``.
- Progress: one line per micro-batch from the query's progress events: batch id,
  rows in, rows out with the count of each verdict (or action), state rows
  (``numRowsTotal``) and state bytes (``memoryUsedBytes``) of the stateful operator.
- Stop: SIGINT or SIGTERM stops the query at once (between micro-batches or by
  interrupting one; the checkpoint keeps the last committed batch, the sink writes batches whole)
  and stops Spark. The summary lists the batches planned and not committed
  (``unfinished``): the CLI exits 0 when there are none, 130 / 143 with one line when
  the signal interrupted one. ``available-now`` stops by itself once every file
  present at the start is processed.
- Failures: a worker's typed error is raised again as itself (``translate_errors``);
  any other reason Spark stops the query for is one ``QueryFailed`` line naming
  Spark's reason and the log file (``build_session(log=...)``: with a log, the JVM and
  its workers write there, not on the terminal).
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from timebound._safety import check_writable_folder
from timebound.durations import format_bytes
from timebound.errors import TimeboundError, UsageError
from timebound.sparkutil import ROCKSDB
from timebound.sparkutil import build_session as _build_session
from timebound.sparkutil import parse_conf as parse_conf  # the stream's --conf
from timebound.stream._errors import QueryFailed, translate_errors
from timebound.stream._sink import BatchSink

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

SESSION_CONF = {
    "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
}
#: Documented range of ``--max-files-per-trigger``.
MAX_FILES_RANGE = (1, 1_000_000)
_INTERVAL = re.compile(r"^processing-time=(\d+)(ms|s|m|h)$")
_UNITS = {"ms": "milliseconds", "s": "seconds", "m": "minutes", "h": "hours"}
POLL_SECONDS = 0.25
CANCEL_EVERY = 0.1  # seconds between two cancellations of a stopping query's jobs


@dataclass(frozen=True)
class Trigger:
    available_now: bool
    interval: str | None = None  # "1 seconds" for processing-time

    def apply(self, writer: Any) -> Any:
        if self.available_now:
            return writer.trigger(availableNow=True)
        return writer.trigger(processingTime=self.interval)


def parse_trigger(text: str) -> Trigger:
    """``available-now`` | ``processing-time=<N>ms|s|m|h`` (N >= 1)."""
    if text == "available-now":
        return Trigger(True)
    match = _INTERVAL.match(text)
    if match is None or int(match.group(1)) < 1:
        raise UsageError("--trigger", f"expected available-now or processing-time=<N>ms|s|m|h "
                                      f"(N >= 1), got {text!r}")
    return Trigger(False, f"{int(match.group(1))} {_UNITS[match.group(2)]}")


def check_folders(source: str, checkpoint: str, sink: str) -> tuple[str, str, str]:
    """Absolute paths; the source must be a folder; none may contain another; the
    checkpoint and the sink must be folders we can create or write in."""
    paths = [os.path.abspath(p) for p in (source, checkpoint, sink)]
    if not os.path.isdir(paths[0]):
        raise UsageError("--source", f"not a folder: {source}")
    for flag, path in zip(("--checkpoint", "--sink"), paths[1:]):
        # before Spark starts: a folder that cannot be created (or written) is refused now
        check_writable_folder(path, flag, in_place=True)
    names = ("--source", "--checkpoint", "--sink")
    for i in range(3):
        for j in range(3):
            if i != j and (paths[i] == paths[j] or paths[i].startswith(paths[j] + os.sep)):
                raise UsageError(names[i], f"must not be {'' if paths[i] == paths[j] else 'inside '}"
                                           f"{names[j]} ({paths[j]})")
    return paths[0], paths[1], paths[2]


def build_session(master: str | None, conf: dict[str, str],
                  app_name: str = "timebound-stream", *, log: str | None = None
                  ) -> SparkSession:
    """A session for one query (``sparkutil.build_session`` with ``SESSION_CONF``). With
    ``log`` (a file path), the JVM and every Python worker it starts write there instead
    of the terminal: their log lines, the worker's start-up chatter, the traces of a
    failed task and what the JVM prints when a query is stopped inside a micro-batch.
    Without it (``--verbose``) they go to our stderr."""
    spark: SparkSession = _build_session(master, conf, app_name=app_name,
                                         defaults=SESSION_CONF, log=log)
    return spark


def prepare_session(spark: SparkSession, checkpoint: str, user_conf: dict[str, str]) -> str:
    """Register the source, select RocksDB and size the shuffle partitions of a fresh
    checkpoint; returns a line describing the partitions."""
    from timebound.stream._source import TraceFiles

    spark.dataSource.register(TraceFiles)
    for key in ("spark.sql.streaming.stateStore.providerClass",
                "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"):
        spark.conf.set(key, user_conf.get(key, SESSION_CONF[key]))
    key = "spark.sql.shuffle.partitions"
    fresh = not os.path.isdir(os.path.join(checkpoint, "offsets"))
    if not fresh:
        return "shuffle partitions: as frozen in the checkpoint"
    if key in user_conf:
        partitions = int(user_conf[key])
    else:
        partitions = max(1, int(spark.sparkContext.defaultParallelism))
    spark.conf.set(key, str(partitions))
    return f"shuffle partitions: {partitions} (frozen into the new checkpoint)"


def _state(progress: Any) -> tuple[int, int]:
    rows = size = 0
    for op in progress["stateOperators"] or []:
        rows += int(op["numRowsTotal"] or 0)
        size += int(op["memoryUsedBytes"] or 0)
    return rows, size


def progress_line(progress: Any, counts: tuple[int, dict[str, int]] | None) -> str:
    rows, size = _state(progress)
    out = ""
    if counts is not None:
        total, by_value = counts
        shown = " ".join(f"{k} {v}" for k, v in sorted(by_value.items()))
        out = f", {total} out ({shown})" if shown else ", 0 out"
    return (f"batch {progress['batchId']}: {progress['numInputRows']} rows in{out}, "
            f"state {rows} rows, store memory {format_bytes(size)}")


@dataclass
class Summary:
    batches: int = 0
    rows_in: int = 0
    counts: dict[str, int] | None = None
    state_rows: int = 0
    state_bytes: int = 0
    stopped_by: str | None = None
    #: Micro-batches the checkpoint has planned and not committed when the query
    #: stopped (a signal inside a micro-batch): a restart runs them again.
    unfinished: list[int] = field(default_factory=list)


def batch_ids(checkpoint: str, folder: str) -> set[int]:
    """The micro-batch ids in ``CHECKPOINT/offsets`` (planned) or ``commits``."""
    try:
        return {int(name) for name in os.listdir(os.path.join(checkpoint, folder))
                if name.isdigit()}
    except OSError:
        return set()


def stop_query(spark: SparkSession, query: Any) -> None:
    """Stop ``query`` now, also inside a micro-batch.

    ``query.stop()`` interrupts the query's thread and waits for it to end; but an
    interrupt that lands in one of Hadoop's shell calls (it sets a local file's
    permissions while the offset or commit log is written) is swallowed there, and the
    micro-batch then runs to its end. So while ``stop()`` waits, the query's job group
    (its run id) is cancelled every ``CANCEL_EVERY`` seconds: the micro-batch's job,
    started after a swallowed interrupt, is cancelled too and the batch is not committed.
    """
    failed: list[BaseException] = []

    def stop() -> None:
        try:
            query.stop()
        except BaseException as exc:  # raised again in the caller's thread
            failed.append(exc)

    stopper = threading.Thread(target=stop, name="timebound-stop-query", daemon=True)
    stopper.start()
    group = str(query.runId)
    while stopper.is_alive():
        spark.sparkContext.cancelJobGroup(group)
        stopper.join(CANCEL_EVERY)
    if failed:
        raise failed[0]


def run_query(spark: SparkSession, output: DataFrame, sink: BatchSink, checkpoint: str,
              trigger: Trigger, *, out: TextIO | None = None,
              stop: threading.Event | None = None,
              on_batch: Callable[[Any], None] | None = None,
              log: str | None = None) -> Summary:
    """Run ``output`` into ``sink`` until it ends (available-now), fails, or a signal
    (or ``stop``) asks it to stop. A failure is one typed error: a worker's own
    (``translate_errors``) or ``QueryFailed`` naming Spark's reason and ``log``."""
    out = out or sys.stdout
    stop = stop or threading.Event()
    summary = Summary(counts={})
    received: list[str] = []

    def on_signal(signum: int, frame: Any) -> None:
        received.append(signal.Signals(signum).name)
        stop.set()

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, on_signal)
    seen = -1

    def report() -> None:
        nonlocal seen
        for progress in query.recentProgress:
            batch = int(progress["batchId"])
            if batch <= seen or (progress["numInputRows"] == 0 and not progress["stateOperators"]):
                continue
            seen = batch
            counts = sink.take_counts(batch)
            summary.batches += 1
            summary.rows_in += int(progress["numInputRows"])
            summary.state_rows, summary.state_bytes = _state(progress)
            if counts is not None and summary.counts is not None:
                for key, value in counts[1].items():
                    summary.counts[key] = summary.counts.get(key, 0) + value
            print(progress_line(progress, counts), file=out, flush=True)
            if on_batch is not None:
                on_batch(progress)

    try:
        with translate_errors():
            writer = output.writeStream.foreachBatch(sink) \
                .option("checkpointLocation", checkpoint)
            query = trigger.apply(writer).start()
            try:
                # waits on ``stop``, not in the JVM: a signal sets it and the query is
                # stopped at once, not at the end of a poll (a micro-batch may be
                # shorter than one)
                while query.isActive and not stop.is_set():
                    stop.wait(POLL_SECONDS)
                    report()
                if query.isActive:
                    stop_query(spark, query)
                query.awaitTermination(5)
                report()
            except BaseException:
                if query.isActive:
                    stop_query(spark, query)
                raise
            exc = query.exception()
            if exc is not None:
                raise exc
    except Exception as exc:
        if received:
            # A Ctrl-C reaches the whole process group: Python workers killed by it
            # fail their task, so the query may end "with an error" that is the
            # signal's doing. It stopped on the signal.
            pass
        elif isinstance(exc, TimeboundError):
            raise
        else:
            raise QueryFailed(exc, log) from exc
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if received:
        summary.stopped_by = received[0]
    if stop.is_set():
        summary.unfinished = sorted(batch_ids(checkpoint, "offsets")
                                    - batch_ids(checkpoint, "commits"))
    return summary
