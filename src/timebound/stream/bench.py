"""``timebound bench stream``: the library's streaming ``at_most_once`` against Spark's
built-in ``withWatermark(...).dropDuplicatesWithinWatermark(...)``, on the path a data
engineer takes: Spark's own file source, the user's own column names, the user's sink.

Per (connections, batch rows) cell one generated stream (``bench_data.generate_user``) of payment-like
rows under a flat schema of the user's (``SCHEMA``: ``region, account, sent_ms,
received_ms, amount, note``; 4 regions, an account always in one region), written as one
Parquet file per micro-batch in ``received_ms`` order (the files' modification times
in that order, which is the order Spark's file source takes them in). About 3% of the
messages arrive late (2-3 micro-batches after they were sent, later than the
watermark delay); 10% of them are resent, half the copies quickly (within half the
watermark delay), half 2-3 micro-batches after their original (later than the
watermark delay and than the built-in's state eviction). A copy is a later arrival of
an already seen (``account``, ``sent_ms``); a message's first arrival is the genuine
row.

Every side reads the stream with
``spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(folder)``,
writes each micro-batch with the same ``foreachBatch`` Parquet writer, and keeps its
state in the same RocksDB state store:

- ``ours``: ``timebound.spark.at_most_once(df, conn="account", ts="sent_ms",
  at="received_ms", receiver="region", rho=W, gc_every=W)`` (the public call, so it
  measures whichever streaming engine the library has); its sink gets every row with
  its verdict, a row is kept when its verdict is ``accepted``;
- ``wm-recv``: ``df.withWatermark(timestamp_millis(received_ms), "W milliseconds")
  .dropDuplicatesWithinWatermark(["account", "sent_ms"])``: the watermark on the
  arrival time (nothing is dropped as late; the state is evicted W after arrival);
- ``wm-sent``: the same with the watermark on the sender's time ``sent_ms`` (a copy
  later than the watermark is dropped as late, and so is a genuine late row);
- ``floor``: the user's rows through Spark's Python stateful operator and back
  unchanged (``applyInPandasWithState``, one state value per key, the engine
  ``at_most_once`` runs on a stream): what any Python stateful operator pays on this
  path, deciding nothing (it keeps every copy). It is keyed as ours is (the region and
  class 0, a long: ``at_most_once`` with ``classes=1``), so the keys land on the same
  tasks on both sides (with 4 keys on 2 tasks, a key's hash decides whether a task
  holds 2 or 3 of them); ours' rows/s over the floor's (the ``ratio`` line) is then
  what ours' own work costs.

W (``WATERMARK_TICKS``, 1 tick = 1 ms) is the lateness every side tolerates: the
built-in's watermark delay and our ``rho``.

Before the first cell every side runs once, untimed, on a small stream (the first
stateful query of a session starts its Python workers; not with ``--smoke``). Each
repeat runs the sides one after the other (ours, floor, wm-recv, wm-sent; the next
repeat the other way round), each on a fresh checkpoint, so load changes on a busy
machine hit every side alike; the table shows the median run of each side (by wall time). Columns:

- ``rows/s``: input rows / median wall time of the query (session already up, trigger
  ``availableNow`` until the source is drained); ``x wm-recv`` / ``x wm-sent``: that
  rows/s over each built-in variant's;
- ``p50 ms`` / ``p99 ms``: the micro-batch durations (query progress
  ``durationMs.triggerExecution``) of the batches that read rows;
- ``state rows`` / ``peak``: ``stateOperators.numRowsTotal`` after the last micro-batch
  that read rows and its largest value over the run; ``state MB`` / ``peak``: the same for
  ``memoryUsedBytes``;
- ``let through``: copies kept, i.e. rows kept beyond one per distinct (``account``,
  ``sent_ms``) -- at-most-once violations; ours must show 0;
- ``genuine lost``: first arrivals not kept (ours: verdict not ``accepted``; the
  built-in: not in its output) -- the price of a bound on lateness (ours and
  ``wm-sent``) and, for ours, of SCMP's per-connection rule: a message arriving after a
  later-sent one of its account is refused as older (the stream line counts those).

Under the table, per cell: the ratio of ours' state rows to each built-in variant's
(end, peak) and of ours' rows/s to the floor's, and the stream: rows, micro-batches,
messages, genuine rows later than W, genuine rows after a later-sent one of their
account, copies, copies later than W.

The ``merge`` line runs ``timebound.spark.causal_merge(df, merger="replica",
msg="event", proc="writer", at="arrived", r="r", c="c", kn="kn", epsilon=4, delta=10,
timers="none")`` on generated arrivals read by the same file source (4 writers stamped
by ``CausalProcess``, arriving within -epsilon..delta of their send; ``timers="none"``:
an ``availableNow`` query ends with its timers pending, so only arrivals move the
clock) and shows rows/s and the largest delivery delay in ticks (a deliver row's
``time`` minus its ``r + c``) against Lemma 4.2's bound ``delta + 3*epsilon``.

Ranges are checked before Spark starts; every generated file, checkpoint and sink lives
in one temporary folder removed on every exit path (Ctrl-C included).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from timebound._safety import Terminated
from timebound.errors import UsageError
from timebound.stream.bench_data import (
    MERGE_DELTA,
    MERGE_EPSILON,
    MERGE_SCHEMA,
    RECEIVERS,
    generate_arrivals,
    generate_user,
)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

#: The user's flat schema (their names, not our trace columns) and their copy key.
SCHEMA = ("region string, account string, sent_ms long, received_ms long, amount long, "
          "note string")
KEY = ("account", "sent_ms")
WATERMARK_TICKS = 2_000  # W: the built-in's delay and our rho; late rows come later
SMOKE_WATERMARK_TICKS = 200

ROWS_RANGE = (1_000, 100_000_000)
CONNECTIONS_RANGE = (1, 10_000_000)
BATCH_ROWS_RANGE = (100, 10_000_000)
REPEATS_RANGE = (1, 20)
MAX_BATCHES = 10_000  # rows / batch rows: one Parquet file per micro-batch

#: ``--smoke``: a few thousand rows, 1 repeat, in 3 micro-batches: the fewest in which
#: the built-in lets a copy through (it evicts a key's state at the end of the
#: micro-batch after the one whose watermark passed it, so a copy must come two
#: micro-batches after its original).
SMOKE_ROWS = 3_000
SMOKE_CONNECTIONS = (100,)
SMOKE_BATCH_ROWS = (1_000,)
WARM_UP_ROWS = 2_000

MERGE_ROWS = 20_000  # arrivals, two micro-batches (smoke: SMOKE_MERGE_ROWS in one)
SMOKE_MERGE_ROWS = 1_000

#: The sides, in the order the even repeats run them; the built-in's watermark column.
SIDES = ("ours", "floor", "wm-recv", "wm-sent")
WATERMARK_ON = {"wm-recv": "received_ms", "wm-sent": "sent_ms"}
BUILTINS = tuple(WATERMARK_ON)


class Stopped(BaseException):
    """A signal asked the bench to stop (``args[0]``: its name, when known); raised at
    a safe point -- between Spark calls, after the running query was stopped."""


# -- ranges ----------------------------------------------------------------------------

def counts(option: str, text: str) -> list[int]:
    """A comma list of integers (``--connections``, ``--batch-rows``)."""
    try:
        values = [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise UsageError(option, f"expected a comma list of integers, got {text!r}") from None
    if not values:
        raise UsageError(option, "give at least one value")
    return values


def check_ranges(rows: int, connections: Sequence[int], batch_rows: Sequence[int],
                 repeats: int) -> None:
    checks = [("--rows", rows, ROWS_RANGE), ("--repeats", repeats, REPEATS_RANGE),
              *[("--connections", c, CONNECTIONS_RANGE) for c in connections],
              *[("--batch-rows", b, BATCH_ROWS_RANGE) for b in batch_rows]]
    for option, value, (low, high) in checks:
        if not low <= value <= high:
            raise UsageError(option, f"must be in [{low:,}, {high:,}], got {value:,}")
    for b in batch_rows:
        if b > rows:
            raise UsageError("--batch-rows", f"{b:,} is more than --rows {rows:,}")
        if -(-rows // b) > MAX_BATCHES:
            raise UsageError("--batch-rows", f"{b:,} makes {-(-rows // b):,} micro-batches "
                                             f"of --rows {rows:,}; at most {MAX_BATCHES:,}")


# -- the queries -----------------------------------------------------------------------

def read_stream(spark: SparkSession, folder: str, schema: str = SCHEMA) -> DataFrame:
    """Spark's own file source over ``folder``: one Parquet file per micro-batch."""
    return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(folder)


def ours(spark: SparkSession, folder: str, watermark: int) -> DataFrame:
    """The library call, under the user's column names (rho: the lateness tolerated)."""
    from timebound.spark import at_most_once

    return at_most_once(read_stream(spark, folder), conn="account", ts="sent_ms",
                        at="received_ms", receiver="region", rho=watermark,
                        gc_every=watermark)


def watermarked(spark: SparkSession, folder: str, column: str, watermark: int
                ) -> DataFrame:
    """``withWatermark`` on ``column`` (ms) + ``dropDuplicatesWithinWatermark``."""
    from pyspark.sql import functions as F

    return read_stream(spark, folder) \
        .withColumn("event_time", F.timestamp_millis(F.col(column))) \
        .withWatermark("event_time", f"{watermark} milliseconds") \
        .dropDuplicatesWithinWatermark(list(KEY))


def floor(spark: SparkSession, folder: str) -> DataFrame:
    """The user's rows through the stream engine's Spark operator, unchanged (module
    docstring; ``timebound.spark.traces.stream_floor``)."""
    from timebound.spark.traces import stream_floor

    return stream_floor(read_stream(spark, folder), "region")


def query_of(spark: SparkSession, side: str, folder: str, watermark: int) -> DataFrame:
    if side == "ours":
        return ours(spark, folder, watermark)
    if side == "floor":
        return floor(spark, folder)
    return watermarked(spark, folder, WATERMARK_ON[side], watermark)




def run_query(output: DataFrame, sink: str, checkpoint: str,
              stop: threading.Event | None = None) -> tuple[float, list[Any]]:
    """Drain the source through ``output`` into ``sink`` (one Parquet folder per
    micro-batch); the wall seconds and every progress record. ``stop`` set: the query
    is stopped and ``Stopped`` raised."""
    def write(df: DataFrame, batch_id: int) -> None:
        df.write.mode("overwrite").parquet(f"{sink}/batch={batch_id}")

    started = time.perf_counter()
    query = output.writeStream.foreachBatch(write).option("checkpointLocation", checkpoint) \
        .trigger(availableNow=True).start()
    try:
        while query.isActive and not (stop is not None and stop.is_set()):
            query.awaitTermination(1)
    except BaseException:
        from timebound.stream._run import stop_query

        stop_query(output.sparkSession, query)
        raise
    if stop is not None and stop.is_set():
        from timebound.stream._run import stop_query

        stop_query(output.sparkSession, query)
        raise Stopped(None)
    elapsed = time.perf_counter() - started
    exc = query.exception()
    if exc is not None:
        raise exc
    return elapsed, list(query.recentProgress)


def state_of(progress: Sequence[Any]) -> dict[str, int]:
    """State rows and bytes after the last micro-batch that read rows (the built-in's
    closing no-data micro-batch evicts everything once the source is drained: an end
    of 0 would say nothing), and the most over the run (every micro-batch)."""
    def rows(p: Any) -> int:
        return sum(int(op["numRowsTotal"]) for op in p["stateOperators"])

    def size(p: Any) -> int:
        return sum(int(op["memoryUsedBytes"]) for op in p["stateOperators"])

    last = [p for p in progress if p["numInputRows"]][-1:]
    return {"state_rows": rows(last[0]) if last else 0,
            "state_bytes": size(last[0]) if last else 0,
            "peak_state_rows": max(map(rows, progress), default=0),
            "peak_state_bytes": max(map(size, progress), default=0)}


def percentile(values: Sequence[float], share: float) -> float:
    """Nearest-rank percentile (``share`` in (0, 1]); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return float(ordered[max(0, -(-int(share * 100 * len(ordered)) // 100) - 1)])


def batch_ms(progress: Sequence[Any]) -> list[float]:
    return [float(p["durationMs"]["triggerExecution"]) for p in progress
            if p["numInputRows"]]


def outcome(spark: SparkSession, sink: str, firsts: str, where: str | None
            ) -> dict[str, int]:
    """What a side kept (``where``: ours' rows with an ``accepted`` verdict; the
    built-in's: every row it output): the rows, the copies among them (beyond one per
    (account, sent_ms)) and the genuine rows (first arrivals) it did not keep."""
    df = spark.read.parquet(sink)
    if where:
        df = df.where(where)
    kept = df.select("account", "sent_ms", "received_ms")
    total = kept.count()
    copies = total - kept.select(*KEY).distinct().count()
    lost = spark.read.parquet(firsts).join(kept, ["account", "sent_ms", "received_ms"],
                                           "left_anti").count()
    return {"kept": total, "let_through": copies, "lost": lost}


def _checked(stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise Stopped(None)


def _side(spark: SparkSession, side: str, source: str, firsts: str, base: str, run: int,
          watermark: int, rows: int, with_counts: bool,
          stop: threading.Event | None = None) -> dict[str, Any]:
    sink = os.path.join(base, f"{side}-{run}")
    checkpoint = os.path.join(base, f"ck-{side}-{run}")
    seconds, progress = run_query(query_of(spark, side, source, watermark), sink,
                                  checkpoint, stop)
    ms = batch_ms(progress)
    result: dict[str, Any] = {"seconds": seconds, "rows_per_s": rows / seconds,
                              "batches": len(ms), "p50_ms": percentile(ms, 0.5),
                              "p99_ms": percentile(ms, 0.99), **state_of(progress)}
    if with_counts:
        _checked(stop)
        result.update(outcome(spark, sink, firsts,
                              "verdict = 'accepted'" if side == "ours" else None))
    return result


def measure_cell(spark: SparkSession, workdir: str, rows: int, connections: int,
                 batch_rows: int, repeats: int, watermark: int,
                 progress: Callable[[str], None],
                 stop: threading.Event | None = None) -> dict[str, Any]:
    """Every side on one generated stream, in turn, ``repeats`` times each."""
    base = os.path.join(workdir, f"c{connections}-b{batch_rows}")
    source, firsts = os.path.join(base, "in"), os.path.join(base, "firsts.parquet")
    files = -(-rows // batch_rows)
    truth = generate_user(source, firsts, rows, connections, files, watermark)
    cell: dict[str, Any] = {"connections": connections, "batch_rows": batch_rows,
                            "files": files, "watermark": watermark, **truth}
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
    for run in range(repeats):
        order = SIDES if run % 2 == 0 else SIDES[::-1]
        for side in order:
            _checked(stop)
            result = _side(spark, side, source, firsts, base, run, watermark,
                           truth["rows"], with_counts=run == 0, stop=stop)
            runs[side].append(result)
            progress(f"bench stream: {connections:,} connections, {batch_rows:,}-row "
                     f"batches, {side} run {run + 1}/{repeats}: {result['seconds']:.1f} s, "
                     f"{result['rows_per_s']:,.0f} rows/s")
    for side in SIDES:
        chosen = sorted(runs[side], key=lambda r: r["seconds"])[(len(runs[side]) - 1) // 2]
        first = runs[side][0]
        cell[side] = {**chosen, "rows_per_s": truth["rows"] / statistics.median(
            r["seconds"] for r in runs[side]),
            "kept": first["kept"], "let_through": first["let_through"],
            "lost": first["lost"], "seconds_all": [r["seconds"] for r in runs[side]]}
    return cell


def measure_merge(spark: SparkSession, workdir: str, rows: int,
                  stop: threading.Event | None = None, name: str = "merge"
                  ) -> dict[str, Any]:
    """``timebound.spark.causal_merge`` on generated arrivals read by Spark's file
    source: rows/s and the largest delivery delay."""
    from pyspark.sql import functions as F

    from timebound.spark import causal_merge

    base = os.path.join(workdir, name)
    source, sink = os.path.join(base, "in"), os.path.join(base, "out")
    written = generate_arrivals(source, rows, files=1 if rows <= SMOKE_MERGE_ROWS else 2)
    merged = causal_merge(read_stream(spark, source, MERGE_SCHEMA), merger="replica",
                          msg="event", proc="writer", at="arrived", r="r", c="c",
                          kn="kn", epsilon=MERGE_EPSILON, delta=MERGE_DELTA,
                          timers="none")
    seconds, _ = run_query(merged, sink, os.path.join(base, "ck"), stop)
    _checked(stop)
    got = spark.read.parquet(sink).where(F.col("action") == "deliver").agg(
        F.count(F.lit(1)).alias("n"),
        F.max(F.col("time") - (F.col("r") + F.col("c"))).alias("delay")).first()
    return {"rows": written, "seconds": seconds, "rows_per_s": written / seconds,
            "delivered": int(got["n"]) if got else 0,
            "max_delay": int(got["delay"]) if got and got["delay"] is not None else None,
            "bound": MERGE_DELTA + 3 * MERGE_EPSILON}


# -- the table -------------------------------------------------------------------------

def _ratio(a: float, b: float) -> str:
    return f"{a / b:.3g}x" if b else ("-" if not a else "inf")


HEADER = (f"{'connections':>11} {'batch rows':>10} {'side':>7} {'rows/s':>9} "
          f"{'x wm-recv':>9} {'x wm-sent':>9} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'state rows':>10} {'peak':>8} {'state MB':>8} {'peak':>7} "
          f"{'let through':>11} {'genuine lost':>12}")


def legend(watermark: int) -> list[str]:
    """What each side runs."""
    return [
        f"ours     timebound.spark.at_most_once(df, conn=\"account\", ts=\"sent_ms\", "
        f"at=\"received_ms\", receiver=\"region\", rho={watermark}, gc_every={watermark})",
        f"wm-recv  df.withWatermark(timestamp_millis(received_ms), \"{watermark} "
        f"milliseconds\").dropDuplicatesWithinWatermark([\"account\", \"sent_ms\"])",
        "wm-sent  the same with the watermark on timestamp_millis(sent_ms)",
        "floor    df.groupBy(\"region\", lit(0L)).applyInPandasWithState(rows back "
        "unchanged, one state value per key; keyed as ours): Spark's Python stateful path "
        "alone, deciding nothing"]


def table(cells: Sequence[dict[str, Any]], merge: dict[str, Any] | None) -> list[str]:
    lines = [HEADER]
    for c in cells:
        for side in SIDES:
            s = c[side]
            lines.append(
                f"{c['connections']:>11,} {c['batch_rows']:>10,} {side:>7} "
                f"{s['rows_per_s']:>9,.0f} "
                f"{_ratio(s['rows_per_s'], c['wm-recv']['rows_per_s']):>9} "
                f"{_ratio(s['rows_per_s'], c['wm-sent']['rows_per_s']):>9} "
                f"{s['p50_ms']:>8,.0f} {s['p99_ms']:>8,.0f} "
                f"{s['state_rows']:>10,} {s['peak_state_rows']:>8,} "
                f"{s['state_bytes'] / 1e6:>8.2f} {s['peak_state_bytes'] / 1e6:>7.2f} "
                f"{s['let_through']:>11,} {s['lost']:>12,}")
        o = c["ours"]
        lines.append(f"{'':>11} {'':>10} {'ratio':>7} state rows ours/wm-recv "
                     + ", ours/wm-sent ".join(
                         f"{_ratio(o['state_rows'], c[b]['state_rows'])} (peak "
                         f"{_ratio(o['peak_state_rows'], c[b]['peak_state_rows'])})"
                         for b in BUILTINS)
                     + "; rows/s ours/floor "
                     + _ratio(o["rows_per_s"], c["floor"]["rows_per_s"]))
        lines.append(f"{'':>11} {'':>10} {'stream':>7} {c['rows']:,} rows in {c['files']} "
                     f"micro-batches: {c['messages']:,} messages ({c['late_genuine']:,} "
                     f"arriving later than the {c['watermark']:,}-tick watermark, "
                     f"{c['overtaken']:,} after a later-sent one of their account), "
                     f"{c['copies']:,} resent copies ({c['late_copies']:,} later than it)")
    if merge is not None:
        delay = merge["max_delay"]
        lines.append(f"merge: {merge['rows']:,} arrivals, {merge['rows_per_s']:,.0f} rows/s, "
                     f"largest delivery delay {delay if delay is not None else '-'} ticks "
                     f"(bound delta + 3*epsilon = {merge['bound']}), "
                     f"{merge['delivered']:,} delivered (timebound.spark.causal_merge, "
                     f"epsilon {MERGE_EPSILON}, delta {MERGE_DELTA}, timers none)")
    return lines


def prepare(spark: SparkSession, conf: dict[str, str]) -> None:
    """The same state store for every side (RocksDB, as ``at_most_once`` on a stream
    selects it, unless ``conf`` says otherwise) and the shuffle partitions every fresh
    checkpoint below freezes (``conf``'s, else the default parallelism)."""
    from timebound.stream._run import SESSION_CONF

    for key, value in SESSION_CONF.items():
        spark.conf.set(key, conf.get(key, value))
    key = "spark.sql.shuffle.partitions"
    spark.conf.set(key, conf.get(key, str(max(1, spark.sparkContext.defaultParallelism))))


def compare(spark: SparkSession, workdir: str, rows: int, connections: Sequence[int],
            batch_rows: Sequence[int], repeats: int, *, watermark: int = WATERMARK_TICKS,
            merge_rows: int = MERGE_ROWS, report: Callable[[str], None] = print,
            progress: Callable[[str], None] = print,
            conf: dict[str, str] | None = None,
            stop: threading.Event | None = None, warm_up: bool = True) -> dict[str, Any]:
    """Every cell, then the merge line (none for ``merge_rows=0``); reports the table;
    returns its numbers. ``conf``: the user's Spark settings (``prepare``)."""
    check_ranges(rows, connections, batch_rows, repeats)
    prepare(spark, conf or {})
    if warm_up:
        # The first stateful query of a session starts its Python workers (10-20 s
        # here); no side's first timed run should pay for that.
        progress(f"bench stream: warming up (every side once on {WARM_UP_ROWS:,} rows, "
                 f"not timed)")
        base = os.path.join(workdir, "warm-up")
        source, firsts = os.path.join(base, "in"), os.path.join(base, "firsts.parquet")
        generate_user(source, firsts, WARM_UP_ROWS, 100, 2, watermark)
        for side in SIDES:
            _side(spark, side, source, firsts, base, 0, watermark, WARM_UP_ROWS,
                  with_counts=False, stop=stop)
        if merge_rows:
            measure_merge(spark, workdir, SMOKE_MERGE_ROWS, stop, name="warm-up-merge")
    cells = [measure_cell(spark, workdir, rows, c, b, repeats, watermark, progress, stop)
             for c in connections for b in batch_rows]
    merge = None
    if merge_rows:
        progress(f"bench stream: merge, {merge_rows:,} arrivals")
        merge = measure_merge(spark, workdir, merge_rows, stop)
    report(f"{rows:,} rows per stream ({SCHEMA}), {RECEIVERS} regions, "
           f"{spark.sparkContext.master}, Spark's Parquet file source (maxFilesPerTrigger "
           f"1), RocksDB state store, foreachBatch Parquet sink, median of {repeats} "
           f"(sides alternate)")
    for line in [*legend(watermark), *table(cells, merge)]:
        report(line)
    return {"cells": cells, "merge": merge}


def run(args: argparse.Namespace) -> int:
    """The ``timebound bench stream`` handler (options: ``timebound.pipeline.bench_cli``)."""
    from timebound.sparkutil import check_master, parse_conf, stopped_after
    from timebound.stream._run import build_session

    if args.smoke:
        rows, connections, batch_rows, repeats = (SMOKE_ROWS, list(SMOKE_CONNECTIONS),
                                                  list(SMOKE_BATCH_ROWS), 1)
        watermark, merge_rows = SMOKE_WATERMARK_TICKS, SMOKE_MERGE_ROWS
    else:
        rows, repeats = args.rows, args.repeats
        connections = counts("--connections", args.connections)
        batch_rows = counts("--batch-rows", args.batch_rows)
        watermark, merge_rows = WATERMARK_TICKS, MERGE_ROWS
    check_ranges(rows, connections, batch_rows, repeats)
    check_master(args.master)
    conf = parse_conf(args.conf)
    if args.smoke:  # one Python worker per stateful stage instead of one per core
        conf.setdefault("spark.sql.shuffle.partitions", "1")

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    # Ctrl-C or SIGTERM while Spark runs: recorded, acted on at the next safe point (a
    # KeyboardInterrupt inside a Py4J call prints the JVM's traces), then the session
    # stops, the folder goes, and the CLI's own handling says "interrupted"/"terminated".
    stop = threading.Event()
    received: list[str] = []

    def on_signal(signum: int, frame: Any) -> None:
        received.append(signal.Signals(signum).name)
        stop.set()

    with tempfile.TemporaryDirectory(prefix="timebound-bench-stream-") as workdir:
        log = None if getattr(args, "verbose", False) else os.path.join(workdir, "spark.log")
        progress(f"bench stream: starting Spark ({args.master})")
        spark = build_session(args.master, conf, app_name="timebound-bench-stream", log=log)
        previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous[sig] = signal.signal(sig, on_signal)
        try:
            with stopped_after(spark):
                compare(spark, workdir, rows, connections, batch_rows, repeats,
                        watermark=watermark, merge_rows=merge_rows, conf=conf, stop=stop,
                        warm_up=not args.smoke,
                        report=lambda line: print(line, flush=True), progress=progress)
        except Stopped as stopped:
            if stopped.args and stopped.args[0]:
                received.append(str(stopped.args[0]))
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)
    if stop.is_set():
        if "SIGTERM" in received[:1]:
            raise Terminated()
        raise KeyboardInterrupt()
    return 0
