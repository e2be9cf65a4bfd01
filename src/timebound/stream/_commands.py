"""The two streaming commands as functions (the CLI and the tests call these).

Everything the user can get wrong is checked before Spark starts: the protocol
options (by the shared adapters' option objects, so a bad one reads as in the
replay), the trigger, ``--max-files-per-trigger`` (1..1,000,000), ``--conf`` items,
the folders, and that a restarted query keeps the protocol, options, source and sink
its checkpoint was started with (``_lock``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from timebound._safety import check_int
from timebound.adapters.atmostonce import AtMostOnceOptions
from timebound.adapters.merge import MergeOptions
from timebound.contract import REFUSED_BY_DRIVERS
from timebound.durations import format_duration
from timebound.errors import UsageError
from timebound.spark.traces import source_schema
from timebound.sparkutil import stopped_after
from timebound.stream._lock import lock_query, option_values
from timebound.stream._run import (
    MAX_FILES_RANGE,
    Summary,
    build_session,
    check_folders,
    parse_trigger,
    prepare_session,
    run_query,
)
from timebound.stream._sink import BatchSink, Derived
from timebound.stream._source import NAME

#: Where a quiet query's Spark output goes, inside its checkpoint.
SPARK_LOG = "timebound-spark.log"

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession



@dataclass
class StreamResult:
    summary: Summary
    partitions: str


def check_max_files(value: int | None) -> int | None:
    return None if value is None else check_int(value, "--max-files-per-trigger",
                                                *MAX_FILES_RANGE)


def _source(spark: SparkSession, table: str, folder: str, max_files: int | None
            ) -> DataFrame:
    reader = spark.readStream.format(NAME).schema(source_schema(table)).option("path", folder)
    refused = REFUSED_BY_DRIVERS.get(table, ())
    if refused:
        reader = reader.option("refuseColumns", ",".join(refused))
    if max_files is not None:
        reader = reader.option("maxFilesPerTrigger", str(max_files))
    return reader.load()


def _run(table: str, build: Callable[[DataFrame, str | None], DataFrame], source: str,
         checkpoint: str, sink: str, *,
         trigger: str, max_files: int | None, master: str | None, conf: dict[str, str],
         spark: SparkSession | None, out: TextIO | None, stop: threading.Event | None,
         main: str, derived: list[Derived], count_column: str, protocol: str,
         options: AtMostOnceOptions | MergeOptions, quiet: bool,
         locked: dict[str, object] | None = None, engine: str | None = None
         ) -> StreamResult:
    parsed = parse_trigger(trigger)
    check_max_files(max_files)
    source, checkpoint, sink = check_folders(source, checkpoint, sink)
    engine = lock_query(checkpoint, protocol, {**option_values(options), **(locked or {})},
                        source, sink, engine)
    log = os.path.join(checkpoint, SPARK_LOG) if quiet and spark is None else None
    session = spark if spark is not None else build_session(master, conf, log=log)
    with stopped_after(session, owned=spark is None):
        partitions = prepare_session(session, checkpoint, conf)
        if out is not None:
            print(partitions, file=out, flush=True)
        output = build(_source(session, table, source, max_files), engine)
        batch_sink = BatchSink(session, sink, main, derived, count_column)
        summary = run_query(session, output, batch_sink, checkpoint, parsed, out=out,
                            stop=stop, log=log)
        return StreamResult(summary, partitions)


def stream_atmostonce(source: str, checkpoint: str, sink: str, options: AtMostOnceOptions,
                      *, trigger: str = "available-now", max_files: int | None = None,
                      master: str | None = None, conf: dict[str, str] | None = None,
                      spark: SparkSession | None = None, out: TextIO | None = None,
                      stop: threading.Event | None = None, quiet: bool = False
                      ) -> StreamResult:
    """Run ``timebound stream atmostonce`` (see the package docstring). ``quiet``: the
    session this call starts writes Spark's log to ``CHECKPOINT/timebound-spark.log``
    instead of stderr."""
    from timebound.spark import trace_verdicts as verdicts
    from timebound.spark.traces import GROUPED
    from timebound.spark.traces import stream_accepted as accepted

    return _run("messages", lambda df, _: verdicts(df, options), source,
                checkpoint, sink, engine=GROUPED,
                trigger=trigger, max_files=max_files, master=master, conf=conf or {},
                spark=spark, out=out, stop=stop, main="verdicts",
                derived=[("accepted", accepted)], count_column="verdict",
                protocol="atmostonce", options=options, quiet=quiet)


def stream_merge(source: str, checkpoint: str, sink: str, options: MergeOptions, *,
                 timers: str = "none", tick_us: int = 1000,
                 trigger: str = "available-now", max_files: int | None = None,
                 master: str | None = None, conf: dict[str, str] | None = None,
                 spark: SparkSession | None = None, out: TextIO | None = None,
                 stop: threading.Event | None = None, quiet: bool = False) -> StreamResult:
    """Run ``timebound stream merge`` (see the package docstring and ``quiet`` of
    ``stream_atmostonce``). ``timers``: ``none`` or ``processing`` (``_merge``), with
    ``tick_us`` the wall-clock length of one ``at`` tick."""
    from timebound.spark.traces import MERGE_ENGINE, TIMERS
    from timebound.spark.traces import stream_merge_order as merge_order

    if timers not in TIMERS:
        raise UsageError("--timers", f"expected one of {', '.join(TIMERS)}, got {timers!r}")
    locked: dict[str, object] = {}
    if timers != "none":  # a checkpoint from before --timers existed ran with none
        locked = {"--timers": timers, "--tick": format_duration(tick_us)}
    return _run("arrivals", lambda df, _: merge_order(df, options, timers, tick_us), source,
                checkpoint, sink, locked=locked, engine=MERGE_ENGINE,
                trigger=trigger, max_files=max_files, master=master, conf=conf or {},
                spark=spark, out=out, stop=stop, main="order", derived=[],
                count_column="action", protocol="merge", options=options, quiet=quiet)


__all__ = ["AtMostOnceOptions", "MergeOptions", "StreamResult", "check_max_files",
           "stream_atmostonce", "stream_merge"]
