"""``timebound bench stream``: our streaming at-most-once against Spark's built-in
``withWatermark(...).dropDuplicatesWithinWatermark(["receiver","conn","ts"])``.

Per (connections, batch rows) cell one generated ``messages`` stream (``generate``):
4 receivers, 10% resent copies, half of them 2-3 micro-batches after their original
(later than the built-in's watermark delay and than its state eviction), written as one
Parquet file per micro-batch. Both sides read it with the same source (the stream
driver's trace-file source, one file per trigger), write each micro-batch with the same
``foreachBatch`` Parquet writer, and keep their state in the same RocksDB state store:

- ours: ``timebound.stream``'s at-most-once query (``verdicts``: one SCMP receiver per
  (run, receiver, class) key in ``applyInPandasWithState``, each key's micro-batch
  decided column-wise; fixed rho ``RHO``, GC every ``RHO`` ticks, one class);
- built-in: ``event_time = at`` (1 tick = 1 ms), ``withWatermark(event_time, W)``,
  ``dropDuplicatesWithinWatermark(["receiver", "conn", "ts"])``.

Before the first cell both sides run once, untimed, on a small stream (the first
stateful query of a session starts its Python workers; not with ``--smoke``). Each
repeat runs ours then the built-in (the next repeat the other way round), each on
a fresh checkpoint, so load changes on a busy machine hit both sides alike; the table
shows the median run of each side (by wall time). Columns:

- ``rows/s``: input rows / wall time of the query (session already up, trigger
  ``availableNow`` until the source is drained);
- ``p50 ms`` / ``p99 ms``: the micro-batch durations (query progress
  ``durationMs.triggerExecution``) of the batches that read rows;
- ``state rows`` / ``peak``: ``stateOperators.numRowsTotal`` after the last micro-batch
  that read rows and its largest value over the run; ``state MB`` / ``peak``: the same for
  ``memoryUsedBytes``;
- ``let through``: resent copies let through, i.e. rows written as new beyond one per
  distinct (receiver, conn, ts) -- at-most-once violations; ours must show 0;
- ``ratio`` lines: ours / built-in for rows/s and state rows (end and peak).

The ``merge`` line runs ``timebound.stream.stream_merge`` on generated arrivals (n
publishers stamped by ``CausalProcess``, arriving within -epsilon..delta of their send)
and shows rows/s and the largest delivery delay in ticks (a deliver row's ``time``
minus its message's ``r + c``) against Lemma 4.2's bound ``delta + 3*epsilon``.

Ranges are checked before Spark starts; every generated file, checkpoint and sink lives
in one temporary folder removed on every exit path (Ctrl-C included).
"""

from __future__ import annotations

import argparse
import os
import random
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

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

RECEIVERS = 4
RESEND_SHARE = 0.10
WATERMARK_TICKS = 2_000  # the built-in's delay; half the copies come later than this
SMOKE_WATERMARK_TICKS = 200
RHO = 64  # ours: fixed lifetime and GC period, ticks

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

MERGE_PUBLISHERS = 4
MERGE_EPSILON = 4  # ticks
MERGE_DELTA = 10  # ticks
MERGE_ROWS = 20_000  # arrivals, two micro-batches (smoke: SMOKE_MERGE_ROWS in one)
SMOKE_MERGE_ROWS = 1_000

SIDES = ("ours", "builtin")


class Stopped(BaseException):
    """A signal asked the bench to stop (``args[0]``: its name, when known); raised at
    a safe point -- between Spark calls, after the running query was stopped."""


# -- the generated streams -------------------------------------------------------------

def generate(folder: str, rows: int, connections: int, files: int, watermark: int,
             seed: int = 1) -> dict[str, int]:
    """The ``messages`` stream as ``files`` Parquet files named in ``at`` order;
    returns its rows, resent copies and copies later than the watermark."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(seed)
    originals = int(rows / (1 + RESEND_SHARE))
    # Late copies come 2-3 files (micro-batches) after their original: later than
    # the watermark delay by at least a micro-batch, so the built-in has dropped the
    # original's state by then (it evicts at the end of a micro-batch).
    span = max(1, originals // files)
    late_low = max(watermark + watermark // 4, 2 * span)
    out: list[tuple[int, str, str, int, bool]] = []
    late_copies = 0
    for i in range(originals):
        conn = rng.randrange(connections)
        ts = i + 1  # the sender's clock: one tick per message on the whole
        at = ts + rng.randint(1, 20)
        name = f"c{conn}"
        receiver = f"s{conn % RECEIVERS}"
        out.append((at, receiver, name, ts, True))
        if rng.random() < RESEND_SHARE:
            if rng.random() < 0.5:
                gap = rng.randint(10, watermark // 2)
            else:
                gap = rng.randint(late_low, late_low + span)
                late_copies += 1
            out.append((at + gap, receiver, name, ts, False))
    out.sort()
    os.makedirs(folder, exist_ok=True)
    size = -(-len(out) // files)
    schema = pa.schema([("run", pa.string()), ("seq", pa.int64()), ("type", pa.string()),
                        ("receiver", pa.string()), ("conn", pa.string()),
                        ("ts", pa.int64()), ("at", pa.int64()), ("original", pa.bool_())])
    for index in range(files):
        chunk = out[index * size:(index + 1) * size]
        table = pa.table({
            "run": ["bench"] * len(chunk),
            "seq": list(range(index * size, index * size + len(chunk))),
            "type": ["msg"] * len(chunk),
            "receiver": [c[1] for c in chunk], "conn": [c[2] for c in chunk],
            "ts": [c[3] for c in chunk], "at": [c[0] for c in chunk],
            "original": [c[4] for c in chunk],
        }, schema=schema)
        pq.write_table(table, os.path.join(folder, f"{index:05d}.parquet"))
    return {"rows": len(out), "copies": len(out) - originals, "late_copies": late_copies}


def generate_arrivals(folder: str, rows: int, files: int = 2, seed: int = 2) -> int:
    """An ``arrivals`` stream for one merger: ``rows`` messages of MERGE_PUBLISHERS
    publishers (rckn stamps), each arriving within -epsilon..delta of its send; returns
    the rows written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from timebound.core.causal import CausalProcess

    rng = random.Random(seed)
    n = MERGE_PUBLISHERS
    procs = [CausalProcess(MERGE_EPSILON, n) for _ in range(n)]
    offsets = [rng.randint(0, MERGE_EPSILON) for _ in range(n)]
    last = [0] * n
    out: list[tuple[int, int, str, str, int, int, list[int]]] = []
    for tick in range(1, rows + 1):
        j = rng.randrange(n)
        rt = max(tick + offsets[j], last[j] + 1)
        last[j] = rt
        stamp = procs[j].send(now=rt)
        at = max(1, rt + rng.randint(-MERGE_EPSILON, MERGE_DELTA))
        out.append((at, tick, f"m{tick}", f"p{j}", stamp.r, stamp.c, list(stamp.kn)))
    out.sort()
    os.makedirs(folder, exist_ok=True)
    size = -(-len(out) // files)
    for index in range(files):
        chunk = out[index * size:(index + 1) * size]
        pq.write_table(pa.table({
            "run": ["bench"] * len(chunk),
            "seq": list(range(index * size, index * size + len(chunk))),
            "merger": ["M1"] * len(chunk), "msg": [c[2] for c in chunk],
            "proc": [c[3] for c in chunk], "at": [c[0] for c in chunk],
            "r": [c[4] for c in chunk], "c": [c[5] for c in chunk],
            "kn": [c[6] for c in chunk],
        }), os.path.join(folder, f"{index:05d}.parquet"))
    return len(out)


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


# -- the two queries -------------------------------------------------------------------

def messages(spark: SparkSession, folder: str) -> DataFrame:
    """The stream driver's trace-file source over ``folder``, one file per trigger."""
    from timebound.stream._commands import _source

    return _source(spark, "messages", folder, 1)


def ours(spark: SparkSession, folder: str) -> DataFrame:
    from timebound.adapters.atmostonce import AtMostOnceOptions
    from timebound.core.atmostonce import ReceiverConfig
    from timebound.spark.traces import stream_verdicts as verdicts

    options = AtMostOnceOptions(ReceiverConfig("fixed", rho=RHO, gc_every=RHO), 1)
    return verdicts(messages(spark, folder), options)


def builtin(spark: SparkSession, folder: str, watermark: int) -> DataFrame:
    from pyspark.sql import functions as F

    return messages(spark, folder) \
        .withColumn("event_time", F.timestamp_millis(F.col("at"))) \
        .withWatermark("event_time", f"{watermark} milliseconds") \
        .dropDuplicatesWithinWatermark(["receiver", "conn", "ts"])


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


def let_through(spark: SparkSession, sink: str, where: str | None) -> tuple[int, int]:
    """Rows written as new, and how many of them repeat a (receiver, conn, ts)."""
    df = spark.read.parquet(sink)
    if where:
        df = df.where(where)
    total = df.count()
    return total, total - df.select("receiver", "conn", "ts").distinct().count()


def _checked(stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise Stopped(None)


def _side(spark: SparkSession, side: str, source: str, base: str, run: int,
          watermark: int, rows: int, with_counts: bool,
          stop: threading.Event | None = None) -> dict[str, Any]:
    sink = os.path.join(base, f"{side}-{run}")
    checkpoint = os.path.join(base, f"ck-{side}-{run}")
    output = ours(spark, source) if side == "ours" else builtin(spark, source, watermark)
    seconds, progress = run_query(output, sink, checkpoint, stop)
    ms = batch_ms(progress)
    result: dict[str, Any] = {"seconds": seconds, "rows_per_s": rows / seconds,
                              "batches": len(ms), "p50_ms": percentile(ms, 0.5),
                              "p99_ms": percentile(ms, 0.99), **state_of(progress)}
    if with_counts:
        _checked(stop)
        result["out_rows"], result["let_through"] = let_through(
            spark, sink, "verdict = 'accepted'" if side == "ours" else None)
        if side == "ours":  # the largest connection table any receiver held
            top = spark.read.parquet(sink).agg({"entries": "max"}).first()
            result["peak_table"] = top[0] if top is not None else None
    return result


def measure_cell(spark: SparkSession, workdir: str, rows: int, connections: int,
                 batch_rows: int, repeats: int, watermark: int,
                 progress: Callable[[str], None],
                 stop: threading.Event | None = None) -> dict[str, Any]:
    """Both sides on one generated stream, alternately, ``repeats`` times each."""
    base = os.path.join(workdir, f"c{connections}-b{batch_rows}")
    source = os.path.join(base, "in")
    files = -(-rows // batch_rows)
    truth = generate(source, rows, connections, files, watermark)
    cell: dict[str, Any] = {"connections": connections, "batch_rows": batch_rows,
                            "files": files, "watermark": watermark, **truth}
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
    for run in range(repeats):
        order = SIDES if run % 2 == 0 else SIDES[::-1]
        for side in order:
            _checked(stop)
            result = _side(spark, side, source, base, run, watermark, truth["rows"],
                           with_counts=run == 0, stop=stop)
            runs[side].append(result)
            progress(f"bench stream: {connections:,} connections, {batch_rows:,}-row "
                     f"batches, {side} run {run + 1}/{repeats}: {result['seconds']:.1f} s, "
                     f"{result['rows_per_s']:,.0f} rows/s")
    for side in SIDES:
        chosen = sorted(runs[side], key=lambda r: r["seconds"])[(len(runs[side]) - 1) // 2]
        cell[side] = {**chosen, "rows_per_s": truth["rows"] / statistics.median(
            r["seconds"] for r in runs[side]), "let_through": runs[side][0]["let_through"],
            "out_rows": runs[side][0]["out_rows"],
            **({"peak_table": runs[side][0]["peak_table"]} if side == "ours" else {}),
            "seconds_all": [r["seconds"] for r in runs[side]]}
    return cell


def measure_merge(spark: SparkSession, workdir: str, rows: int,
                  conf: dict[str, str] | None = None,
                  stop: threading.Event | None = None) -> dict[str, Any]:
    """``stream_merge`` on generated arrivals: rows/s and the largest delivery delay."""
    from pyspark.sql import functions as F

    from timebound.adapters.merge import MergeOptions
    from timebound.stream import stream_merge

    base = os.path.join(workdir, "merge")
    source, sink = os.path.join(base, "in"), os.path.join(base, "out")
    written = generate_arrivals(source, rows, files=1 if rows <= SMOKE_MERGE_ROWS else 2)
    options = MergeOptions(MERGE_EPSILON, MERGE_DELTA, "rckn")
    started = time.perf_counter()
    result = stream_merge(source, os.path.join(base, "ck"), sink, options, spark=spark,
                          quiet=True, max_files=1, conf=conf, out=sys.stderr, stop=stop)
    seconds = time.perf_counter() - started
    if stop is not None and stop.is_set():  # its own handlers saw the signal
        raise Stopped(result.summary.stopped_by)
    arrivals = spark.read.parquet(source).select("msg", (F.col("r") + F.col("c")).alias("rc"))
    delivered = spark.read.parquet(os.path.join(sink, "order")) \
        .where(F.col("action") == "deliver").join(arrivals, "msg")
    got = delivered.agg(F.count(F.lit(1)).alias("n"),
                        F.max(F.col("time") - F.col("rc")).alias("delay")).first()
    return {"rows": written, "seconds": seconds, "rows_per_s": written / seconds,
            "delivered": int(got["n"]) if got else 0,
            "max_delay": int(got["delay"]) if got and got["delay"] is not None else None,
            "bound": MERGE_DELTA + 3 * MERGE_EPSILON}


# -- the table -------------------------------------------------------------------------

def _ratio(a: float, b: float) -> str:
    return f"{a / b:.3g}x" if b else ("-" if not a else "inf")


HEADER = (f"{'connections':>11} {'batch rows':>10} {'side':>8} {'rows/s':>9} "
          f"{'p50 ms':>8} {'p99 ms':>8} {'state rows':>10} {'peak':>8} "
          f"{'state MB':>9} {'peak':>8} {'let through':>11}")


def table(cells: Sequence[dict[str, Any]], merge: dict[str, Any] | None) -> list[str]:
    lines = [HEADER]
    for c in cells:
        for side in SIDES:
            s = c[side]
            lines.append(
                f"{c['connections']:>11,} {c['batch_rows']:>10,} {side:>8} "
                f"{s['rows_per_s']:>9,.0f} {s['p50_ms']:>8,.0f} {s['p99_ms']:>8,.0f} "
                f"{s['state_rows']:>10,} {s['peak_state_rows']:>8,} "
                f"{s['state_bytes'] / 1e6:>9.2f} {s['peak_state_bytes'] / 1e6:>8.2f} "
                f"{s['let_through']:>11,}")
        o, b = c["ours"], c["builtin"]
        lines.append(f"{'':>11} {'':>10} {'ratio':>8} rows/s "
                     f"{_ratio(o['rows_per_s'], b['rows_per_s'])}, state rows "
                     f"{_ratio(o['state_rows'], b['state_rows'])} (peak "
                     f"{_ratio(o['peak_state_rows'], b['peak_state_rows'])}), ours/built-in")
        lines.append(f"{'':>11} {'':>10} {'stream':>8} {c['rows']:,} rows in {c['files']} "
                     f"micro-batches, {c['copies']:,} resent copies, {c['late_copies']:,} "
                     f"later than the {c['watermark']:,}-tick watermark")
    if merge is not None:
        delay = merge["max_delay"]
        lines.append(f"merge: {merge['rows']:,} arrivals, {merge['rows_per_s']:,.0f} rows/s, "
                     f"largest delivery delay {delay if delay is not None else '-'} ticks "
                     f"(bound delta + 3*epsilon = {merge['bound']}), "
                     f"{merge['delivered']:,} delivered")
    return lines


def compare(spark: SparkSession, workdir: str, rows: int, connections: Sequence[int],
            batch_rows: Sequence[int], repeats: int, *, watermark: int = WATERMARK_TICKS,
            merge_rows: int = MERGE_ROWS, report: Callable[[str], None] = print,
            progress: Callable[[str], None] = print,
            conf: dict[str, str] | None = None,
            stop: threading.Event | None = None, warm_up: bool = True) -> dict[str, Any]:
    """Every cell, then the merge line (none for ``merge_rows=0``); reports the table;
    returns its numbers.
    ``conf``: the user's Spark settings (RocksDB and the shuffle partitions as the
    stream driver sets them unless given there)."""
    from timebound.stream._run import prepare_session

    check_ranges(rows, connections, batch_rows, repeats)
    # registers the source, selects RocksDB, sets the shuffle partitions every fresh
    # checkpoint below freezes (the directory need not exist)
    prepare_session(spark, os.path.join(workdir, "no-checkpoint"), conf or {})
    if warm_up:
        # The first stateful query of a session starts its Python workers (10-20 s
        # here); neither side's first timed run should pay for that.
        progress("bench stream: warming up (both sides once on 2,000 rows, not timed)")
        base = os.path.join(workdir, "warm-up")
        generate(os.path.join(base, "in"), 2_000, 100, 2, watermark)
        for side in SIDES:
            _side(spark, side, os.path.join(base, "in"), base, 0, watermark, 2_000,
                  with_counts=False, stop=stop)
    cells = [measure_cell(spark, workdir, rows, c, b, repeats, watermark, progress, stop)
             for c in connections for b in batch_rows]
    merge = None
    if merge_rows:
        progress(f"bench stream: merge, {merge_rows:,} arrivals")
        merge = measure_merge(spark, workdir, merge_rows, conf, stop)
    report(f"{rows:,} message rows per stream, {RECEIVERS} receivers, "
           f"{spark.sparkContext.master}, RocksDB state store, foreachBatch Parquet sink, "
           f"median of {repeats} (sides alternate)")
    for line in table(cells, merge):
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
