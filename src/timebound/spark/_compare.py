"""``compare``: what at-most-once and Spark's watermark deduplication each do to the
caller's own arrivals, side by side (docs/spark.md, "Which one, on your data").

Every method runs on Spark over the same rows: ``at_most_once`` with a fixed lifetime
(SCMP Fig. 2-1) at each ``rho`` and ``reorder_window``; the adaptive paper's lifetime
estimators (Chaudhuri, Coan, Welch: Fig. 2, unlimited horizon, and Fig. 3, limited
horizon), which learn the lifetime from the arrivals' own delays; and Spark's own
``withWatermark(...).dropDuplicatesWithinWatermark(...)`` replayed as a stream in
arrival order (Spark's Parquet file source, one file per micro-batch, files dated in
arrival order and read one per trigger), the watermark on the arrival time and on the
sender's time. The counts come from the rows each method kept, against the truth
computed here from the same rows: a message is one identity (``msg``, else ``conn``
and ``ts``; per receiver), its first arrival is genuine, every later one a copy.

The arrivals are gathered on the driver once (their role columns only), checked,
ranked in arrival order and written to a private temporary folder, removed on every
exit path; every method reads that folder.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from timebound.contract import MESSAGE_MINIMUMS
from timebound.errors import SchemaError, UsageError
from timebound.spark._check import TABLE, columns
from timebound.sparkutil import ROCKSDB

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

#: The methods, in the table's order.
METHODS = ("at_most_once", "adaptive_unlimited", "adaptive_limited",
           "watermark_on_arrival", "watermark_on_send")
#: The table's columns.
COLUMNS = ("method", "setting", "reorder_window", "kept", "copies_let_through",
           "genuine_lost", "state_max", "rho_final", "seconds")
#: The delay percentiles the default settings are taken at (the maximum is the third).
PERCENTILES = (50, 99)
#: The operator's default reorder window (the default ``reorder_windows``).
REORDER_WINDOW = 8
#: The limited horizon's settings: lifetimes per GC period S (at most this many, a
#: tenth of the rows if fewer: GC runs about 10 times), spikes ignored per period H
#: (1% of S), and the lost/accepted target 1/P.
LIMITED_WINDOW = 1_000
LIMITED_P = 100
#: Micro-batches of the watermark's replay (default): one per ``BATCH_ROWS`` rows,
#: at least ``MIN_BATCHES`` (so the watermark moves) and at most ``MAX_BATCHES``.
MIN_BATCHES = 4
MAX_BATCHES = 40
BATCH_ROWS = 500
#: Spark's timestamps hold about this many milliseconds from the epoch: the span of
#: ticks the watermark's event time can take (1 tick = 1 ms).
MAX_SPAN = 250_000_000_000_000
#: The watermark's state is spread over one partition per this many rows, at most the
#: session's default parallelism (the queries' ``spark.sql.shuffle.partitions``).
PARTITION_ROWS = 50_000
#: Points kept of each series in ``attrs`` (the delays, the adaptive estimates).
SAMPLE = 2_000
_SCHEMA = "row long, receiver string, conn string, ts long, at long, ident long"
_FILE_TIME = 1_600_000_000  # the first file's modification time (s); one more per file


@dataclass(frozen=True)
class Arrivals:
    """The rows in arrival order (``row``: the rank), and the truth about them."""

    receiver: np.ndarray[Any, Any]  # receiver codes
    at: np.ndarray[Any, Any]
    ts: np.ndarray[Any, Any]
    ident: np.ndarray[Any, Any]  # message codes, 0..messages-1
    messages: int
    table: pa.Table  # the working columns, ``_SCHEMA``

    @property
    def rows(self) -> int:
        return len(self.at)

    @property
    def copies(self) -> int:
        return self.rows - self.messages


def _names(value: object, keyword: str, optional: bool) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise UsageError(keyword, "expected a column name (a string)"
                         + (" or None" if optional else "") + f", got {value!r}")
    return value


def _ticks(value: object, keyword: str) -> tuple[int, ...] | None:
    """A keyword's settings: None (the default) or a non-empty list of ticks >= 1."""
    if value is None:
        return None
    items = [value] if isinstance(value, int) else value
    if not isinstance(items, Sequence) or isinstance(items, str) or not items:
        raise UsageError(keyword, f"expected a non-empty list of integers, got {value!r}")
    for item in items:
        if isinstance(item, bool) or not isinstance(item, int) or item < 1:
            raise UsageError(keyword, f"every value must be an integer >= 1, got {item!r}")
    return tuple(sorted(set(items)))


def check(df: DataFrame, conn: object, ts: object, at: object, msg: object,
          receiver: object) -> dict[str, str]:
    """Role -> the caller's column, each present with a type ``compare`` can use."""
    from pyspark.sql import DataFrame as Frame
    from pyspark.sql.types import IntegralType, StringType, StructType

    if not isinstance(df, Frame):
        raise UsageError("df", f"expected a pyspark DataFrame, got {type(df).__name__}")
    if df.isStreaming:
        raise UsageError("df", "compare needs a batch DataFrame of the arrivals (read "
                               "the stream's files with spark.read)")
    roles = {"conn": _names(conn, "conn", False), "ts": _names(ts, "ts", False),
             "at": _names(at, "at", False), "msg": _names(msg, "msg", True),
             "receiver": _names(receiver, "receiver", True)}
    named = {role: name for role, name in roles.items() if name is not None}
    names = df.schema.names
    for role, name in named.items():
        if name not in names:
            shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
            raise SchemaError(TABLE, name, f"missing ({role}=); the DataFrame's columns: "
                                           f"{shown or 'none'}")
    wanted = set(named.values())
    columns(StructType([f for f in df.schema.fields if f.name in wanted]), conn, ts, at,
            receiver, None)
    if "msg" in named:
        kind = df.schema[named["msg"]].dataType
        if not isinstance(kind, StringType | IntegralType):
            raise SchemaError(TABLE, named["msg"], "msg= needs a string or integer "
                                                   f"column, found {kind.simpleString()}")
    return named


def gather(df: DataFrame, named: dict[str, str]) -> Arrivals:
    """The arrivals on the driver, checked as ``at_most_once`` checks its rows, in
    arrival order (``at``, then ``ts``, ``conn``, ``receiver``), with the truth."""
    import pandas as pd
    from pyspark.sql import functions as F

    def quoted(name: str) -> Any:
        return F.col("`" + name.replace("`", "``") + "`")

    picked = [quoted(named[r]).cast("string" if r in ("conn", "msg", "receiver")
                                    else "long").alias(r) for r in named]
    frame: pd.DataFrame = df.select(*picked).toPandas()
    if frame.empty:
        raise UsageError("df", "has no rows to compare")
    for role, name in named.items():
        nulls = int(frame[role].isna().sum())
        if nulls:
            raise SchemaError(TABLE, name, f"{role} must not be null ({nulls:,} rows)")
        if role in ("conn", "receiver", "msg") and (frame[role] == "").any():
            raise SchemaError(TABLE, name, f"{role} must not be empty")
    for role, least in MESSAGE_MINIMUMS.items():
        if int(frame[role].min()) < least:
            raise SchemaError(TABLE, named[role],
                              f"{role} must be >= {least}, found {frame[role].min()}")
    if "receiver" not in frame:
        frame["receiver"] = "receiver"
    frame["ts"] = frame["ts"].astype("int64")
    frame["at"] = frame["at"].astype("int64")
    low = min(int(frame["ts"].min()), int(frame["at"].min()))
    high = max(int(frame["ts"].max()), int(frame["at"].max()))
    if high - low > MAX_SPAN:
        raise UsageError("at", f"ts and at span {high - low:,} ticks: the watermark's "
                               f"event time (1 tick = 1 ms) holds at most {MAX_SPAN:,}")
    frame = frame.sort_values(["at", "ts", "conn", "receiver"], kind="stable",
                              ignore_index=True)
    key = ["receiver", "msg"] if "msg" in frame else ["receiver", "conn", "ts"]
    ident = frame.groupby(key, sort=False).ngroup().to_numpy(dtype=np.int64)
    receivers = pd.factorize(frame["receiver"])[0].astype(np.int64)
    table = pa.table({"row": pa.array(np.arange(len(frame), dtype=np.int64)),
                      "receiver": pa.array(frame["receiver"], pa.string()),
                      "conn": pa.array(frame["conn"], pa.string()),
                      "ts": pa.array(frame["ts"], pa.int64()),
                      "at": pa.array(frame["at"], pa.int64()),
                      "ident": pa.array(ident)})
    return Arrivals(receivers, frame["at"].to_numpy(np.int64),
                    frame["ts"].to_numpy(np.int64), ident, int(ident.max()) + 1, table)


def default_ticks(arrivals: Arrivals) -> tuple[int, ...]:
    """The default ``rhos`` and ``watermarks``: the delays ``at - ts`` of the rows at
    the 50th and 99th percentiles (the nearest delay at or above) and their maximum,
    each at least 1 tick."""
    delays = arrivals.at - arrivals.ts
    picks = [*np.percentile(delays, PERCENTILES, method="higher"), delays.max()]
    return tuple(sorted({max(1, int(v)) for v in picks}))


def counted(arrivals: Arrivals, kept: np.ndarray[Any, Any]) -> dict[str, int]:
    """Rows kept, copies among them (rows kept beyond one per message) and messages
    none of whose rows was kept."""
    delivered = np.unique(arrivals.ident[kept]).size
    return {"kept": int(kept.sum()), "copies_let_through": int(kept.sum()) - delivered,
            "genuine_lost": arrivals.messages - delivered}


def held_together(arrivals: Arrivals, entries: np.ndarray[Any, Any]) -> int:
    """The most entries the receivers held together within one tick: per receiver and
    ``at`` its largest ``entries``, carried forward to the next ``at`` it has rows at,
    summed over receivers (one receiver: the largest ``entries``)."""
    receivers = int(arrivals.receiver.max()) + 1
    if receivers == 1:
        return int(entries.max())
    order = np.lexsort((arrivals.at, arrivals.receiver))
    rec, at, ent = arrivals.receiver[order], arrivals.at[order], entries[order]
    last = np.r_[(rec[1:] != rec[:-1]) | (at[1:] != at[:-1]), True]
    starts = np.r_[True, last[:-1]]
    peak = np.maximum.reduceat(ent, np.flatnonzero(starts))
    rec, at = rec[last], at[last]
    before = np.r_[0, peak[:-1]]
    delta = peak - np.where(np.r_[True, rec[1:] != rec[:-1]], 0, before)
    by_time = np.argsort(at, kind="stable")
    at, delta = at[by_time], delta[by_time]
    total = np.cumsum(delta)
    ends = np.r_[at[1:] != at[:-1], True]
    return int(total[ends].max())


def sampled(rows: int) -> np.ndarray[Any, Any]:
    """At most ``SAMPLE`` row indices, evenly spread, first and last included."""
    return np.unique(np.linspace(0, rows - 1, min(rows, SAMPLE)).astype(np.int64))


@contextmanager
def _conf(spark: SparkSession, values: dict[str, str]) -> Iterator[None]:
    """The session's settings ``values`` for the duration, as they were after."""
    before: dict[str, str | None] = {key: spark.conf.get(key, None) for key in values}
    for key, value in values.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def write_files(folder: str, table: pa.Table, files: int) -> None:
    """``table`` (in arrival order) as ``files`` Parquet files of consecutive rows, as
    equal as can be, named and dated in that order (Spark's file source takes new files
    by modification time)."""
    import pyarrow.parquet as pq

    os.makedirs(folder)
    size = -(-table.num_rows // files)
    for index in range(files):
        path = os.path.join(folder, f"part-{index:05d}.parquet")
        pq.write_table(table.slice(index * size, size), path)
        os.utime(path, (_FILE_TIME + index, _FILE_TIME + index))


class _Runner:
    """The runs of one ``compare`` call over the folder of arrivals."""

    def __init__(self, spark: SparkSession, folder: str, arrivals: Arrivals) -> None:
        self.spark, self.folder, self.arrivals = spark, folder, arrivals
        self.inbox = os.path.join(folder, "arrivals")
        #: method -> the adaptive estimate on a sample of the rows (``at``, ``rho``).
        self.estimates: dict[str, dict[str, list[int]]] = {}
        self.runs = 0

    def batch(self, method: str, setting: int | None, window: int,
              options: dict[str, Any]) -> dict[str, Any]:
        """``at_most_once`` on the arrivals: what it accepted, its peak state and its
        final estimate."""
        from timebound.spark import _batch
        from timebound.spark._check import options as checked
        from timebound.sparkutil import translate_errors

        started = time.perf_counter()
        df = self.spark.read.schema(_SCHEMA).parquet(self.inbox)
        # at_most_once(df, conn="conn", ts="ts", at="at", receiver="receiver", ...) on a
        # batch DataFrame: its own checks, then its batch path.
        opts = checked({"estimator": "fixed", "resilient": False, "recovery_grace": 0,
                        "classes": 1, "reorder_window": window, **options})
        out = _batch.decide(df, columns(df.schema, "conn", "ts", "at", "receiver", None),
                            opts)
        with translate_errors():
            got = out.select("row", "verdict", "rho", "entries").toArrow()
        rank = np.argsort(got.column("row").to_numpy())
        kept = (got.column("verdict").to_numpy(zero_copy_only=False) == "accepted")[rank]
        rho = got.column("rho").to_numpy()[rank]
        entries = got.column("entries").to_numpy()[rank]
        rho_final = None
        if method != "at_most_once":
            receiver = self.arrivals.receiver
            last = np.zeros(int(receiver.max()) + 1, dtype=np.int64)
            np.maximum.at(last, receiver, np.arange(len(receiver)))
            rho_final = int(rho[last].max())
            shown = sampled(len(rho))
            self.estimates[method] = {"at": self.arrivals.at[shown].tolist(),
                                      "rho": rho[shown].tolist()}
        return {"method": method, "setting": setting, "reorder_window": window,
                **counted(self.arrivals, kept),
                "state_max": held_together(self.arrivals, entries),
                "rho_final": rho_final, "seconds": time.perf_counter() - started}

    def watermark(self, method: str, column: str, delay: int, base: int) -> dict[str, Any]:
        """Spark's ``dropDuplicatesWithinWatermark`` on the arrivals replayed as a stream
        (``foreachBatch`` collects the ``row`` of each row it outputs): the rows it
        output and the most state rows it held after a micro-batch."""
        from pyspark.sql import functions as F

        self.runs += 1
        kept = np.zeros(self.arrivals.rows, dtype=bool)

        def collect(batch: DataFrame, batch_id: int) -> None:
            rows = batch.toArrow().column("row").to_numpy()
            kept[rows] = True

        started = time.perf_counter()
        stream = self.spark.readStream.schema(_SCHEMA).option("maxFilesPerTrigger", 1) \
            .parquet(self.inbox)
        deduplicated = stream \
            .withColumn("event_time", F.timestamp_millis(F.col(column) - F.lit(base))) \
            .withWatermark("event_time", f"{delay} milliseconds") \
            .dropDuplicatesWithinWatermark(["ident"]).select("row")
        query = deduplicated.writeStream.foreachBatch(collect) \
            .option("checkpointLocation", os.path.join(self.folder, f"checkpoint-{self.runs}")) \
            .trigger(availableNow=True).start()
        try:
            query.awaitTermination()
        finally:
            if query.isActive:
                query.stop()
        progress = list(query.recentProgress)
        seconds = time.perf_counter() - started
        state = max((sum(int(op["numRowsTotal"]) for op in p["stateOperators"])
                     for p in progress), default=0)
        return {"method": method, "setting": delay, "reorder_window": None,
                **counted(self.arrivals, kept), "state_max": state, "rho_final": None,
                "seconds": seconds}


def compare(df: DataFrame, *, conn: str, ts: str, at: str, msg: str | None = None,
            receiver: str | None = None, rhos: Sequence[int] | None = None,
            reorder_windows: Sequence[int] | None = None,
            watermarks: Sequence[int] | None = None, micro_batches: int | None = None,
            progress: Callable[[str], None] | None = None) -> pd.DataFrame:
    """The table of ``timebound.spark.compare`` (its docstring says what it holds)."""
    import pandas as pd

    if micro_batches is not None and (isinstance(micro_batches, bool) or not isinstance(
            micro_batches, int) or micro_batches < 1):
        raise UsageError("micro_batches", f"expected an integer >= 1, got {micro_batches!r}")
    if progress is not None and not callable(progress):
        raise UsageError("progress", f"expected a function of one string, got {progress!r}")
    chosen = {"rhos": _ticks(rhos, "rhos"), "watermarks": _ticks(watermarks, "watermarks"),
              "reorder_windows": _ticks(reorder_windows, "reorder_windows")}
    named = check(df, conn, ts, at, msg, receiver)
    say = progress or (lambda line: None)
    say("compare: reading the arrivals")
    arrivals = gather(df, named)
    defaults = default_ticks(arrivals)
    rho_list = chosen["rhos"] or defaults
    wm_list = chosen["watermarks"] or defaults
    windows = chosen["reorder_windows"] or (REORDER_WINDOW,)
    files = min(arrivals.rows, micro_batches or max(MIN_BATCHES, min(
        MAX_BATCHES, arrivals.rows // BATCH_ROWS)))
    delays = arrivals.at - arrivals.ts
    gc_adaptive = max(1, math.ceil(int(np.percentile(delays, 99, method="higher")) / 4))
    # Event time 0 is Spark's first watermark, and a row at the watermark is late.
    lifetimes = max(1, min(LIMITED_WINDOW, arrivals.rows // 10))
    limited = {"window": lifetimes, "spikes": lifetimes // 100, "p": LIMITED_P}
    base = min(int(arrivals.ts.min()), int(arrivals.at.min())) - 1
    spark = df.sparkSession
    total = len(rho_list) * len(windows) + 2 * len(windows) + 2 * len(wm_list)
    rows: list[dict[str, Any]] = []

    def step(what: str) -> None:
        say(f"compare: {len(rows) + 1}/{total} {what}")

    folder = tempfile.mkdtemp(prefix="timebound-compare-")
    try:
        write_files(os.path.join(folder, "arrivals"), arrivals.table, files)
        runner = _Runner(spark, folder, arrivals)
        for window in windows:
            for rho in rho_list:
                step(f"at_most_once rho {rho:,}, reorder_window {window}")
                rows.append(runner.batch("at_most_once", rho, window, {
                    "rho": rho, "gc_every": max(1, math.ceil(rho / 4))}))
            step(f"adaptive unlimited horizon, reorder_window {window}")
            rows.append(runner.batch("adaptive_unlimited", None, window, {
                "estimator": "unlimited", "gc_every": gc_adaptive}))
            step(f"adaptive limited horizon, reorder_window {window}")
            rows.append(runner.batch("adaptive_limited", None, window, {
                "estimator": "limited", **limited}))
        parallel = str(max(1, min(spark.sparkContext.defaultParallelism,
                                  arrivals.rows // PARTITION_ROWS)))
        with _conf(spark, {"spark.sql.shuffle.partitions": parallel,
                           "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
                           "spark.sql.streaming.noDataMicroBatches.enabled": "false",
                           "spark.sql.streaming.numRecentProgressUpdates":
                               str(max(100, 4 * files + 10))}):
            for method, column in (("watermark_on_arrival", "at"),
                                   ("watermark_on_send", "ts")):
                for delay in wm_list:
                    step(f"{method} {delay:,} ticks ({files} micro-batches)")
                    rows.append(runner.watermark(method, column, delay, base))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    shown = sampled(arrivals.rows)
    for name in ("setting", "reorder_window", "rho_final"):
        table[name] = table[name].astype("Int64")
    table.attrs.update({"rows": arrivals.rows, "messages": arrivals.messages,
                        "copies": arrivals.copies, "micro_batches": files,
                        "gc_every_adaptive": gc_adaptive, "limited": limited,
                        "delays": {"at": arrivals.at[shown].tolist(),
                                   "delay": delays[shown].tolist()},
                        "estimates": runner.estimates})
    return table
