"""Streaming at-most-once vs ``withWatermark(...).dropDuplicatesWithinWatermark``.

One generated stream per connection count (default about 200,000 message rows in 20
files taken one per micro-batch, 1,000 and 100,000 connections, 4 receivers, 10%
resent copies, half of them 2-3 micro-batches after the original: later than the
watermark delay and than the built-in's state eviction), read by the
same source (``timebound.stream``'s trace-file source) and written by the same
``foreachBatch`` Parquet writer, with the RocksDB state store on both sides:

- ours: ``timebound.stream``'s ``transformWithState`` processor, one SCMP receiver per
  (receiver, class) key (fixed rho, GC every rho ticks);
- built-in: ``withWatermark("event_time", W).dropDuplicatesWithinWatermark(["receiver",
  "conn","ts"])`` with ``event_time = at`` (1 tick = 1 ms).

Reported per side: rows per second (input rows / wall time of the query, session
already up), state rows (``stateOperators.numRowsTotal``) and state bytes
(``memoryUsedBytes``) after the last micro-batch and their peak over the run, and
duplicates let through
(output rows beyond one per distinct ``(receiver, conn, ts)``); for ours also the
peak connection-table size (the ``entries`` column). Ratios: ours / built-in.

    .venv/bin/python benchmarks/bench_stream.py [--rows 200000] [--files 20]
        [--connections 1000,100000] [--master local[2]] [--json OUT] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

RECEIVERS = 4
RESEND_SHARE = 0.10
WATERMARK_TICKS = 2_000  # the built-in's delay; half the copies come later than this
SMOKE_WATERMARK_TICKS = 200
RHO = 64  # ours: fixed lifetime and GC period, ticks
SCHEMA = pa.schema([("run", pa.string()), ("seq", pa.int64()), ("type", pa.string()),
                    ("receiver", pa.string()), ("conn", pa.string()), ("ts", pa.int64()),
                    ("at", pa.int64()), ("original", pa.bool_())])


def generate(folder: str, rows: int, connections: int, files: int, watermark: int,
             seed: int = 1) -> dict[str, int]:
    """The stream as ``files`` Parquet files named in ``at`` order; returns counts."""
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
    for index in range(files):
        chunk = out[index * size:(index + 1) * size]
        table = pa.table({
            "run": ["bench"] * len(chunk),
            "seq": list(range(index * size, index * size + len(chunk))),
            "type": ["msg"] * len(chunk),
            "receiver": [c[1] for c in chunk], "conn": [c[2] for c in chunk],
            "ts": [c[3] for c in chunk], "at": [c[0] for c in chunk],
            "original": [c[4] for c in chunk],
        }, schema=SCHEMA)
        pq.write_table(table, os.path.join(folder, f"{index:05d}.parquet"))
    return {"rows": len(out), "copies": len(out) - originals, "late_copies": late_copies}


def _run(spark: Any, output: Any, sink: str, checkpoint: str) -> tuple[float, list[Any]]:
    def write(df: Any, batch_id: int) -> None:
        df.write.mode("overwrite").parquet(f"{sink}/batch={batch_id}")

    started = time.perf_counter()
    query = output.writeStream.foreachBatch(write).option("checkpointLocation", checkpoint) \
        .trigger(availableNow=True).start()
    query.awaitTermination()
    elapsed = time.perf_counter() - started
    exc = query.exception()
    if exc is not None:
        raise exc
    return elapsed, [p for p in query.recentProgress if p["numInputRows"]]


def _state(progress: list[Any]) -> dict[str, int]:
    """State rows and bytes after the last micro-batch, and the most over the run."""
    rows = [sum(int(op["numRowsTotal"]) for op in p["stateOperators"]) for p in progress]
    size = [sum(int(op["memoryUsedBytes"]) for op in p["stateOperators"]) for p in progress]
    return {"state_rows": rows[-1] if rows else 0, "state_bytes": size[-1] if size else 0,
            "peak_state_rows": max(rows, default=0), "peak_state_bytes": max(size, default=0)}


def _let_through(spark: Any, sink: str, where: str | None) -> tuple[int, int]:
    df = spark.read.parquet(sink)
    if where:
        df = df.where(where)
    total = df.count()
    return total, total - df.select("receiver", "conn", "ts").distinct().count()


def measure(spark: Any, rows: int, connections: int, files: int, workdir: str,
            watermark: int = WATERMARK_TICKS) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from timebound.adapters.atmostonce import AtMostOnceOptions
    from timebound.core.atmostonce import ReceiverConfig
    from timebound.stream._atmostonce import verdicts
    from timebound.stream._commands import _source
    from timebound.stream._run import prepare_session

    base = os.path.join(workdir, f"c{connections}")
    source = os.path.join(base, "in")
    truth = generate(source, rows, connections, files, watermark)
    result: dict[str, Any] = {"connections": connections, "watermark": watermark, **truth}

    # ours
    ck = os.path.join(base, "ck-ours")
    prepare_session(spark, ck, {"spark.sql.shuffle.partitions":
                                spark.conf.get("spark.sql.shuffle.partitions") or "2"})
    options = AtMostOnceOptions(ReceiverConfig("fixed", rho=RHO, gc_every=RHO), 1)
    elapsed, progress = _run(spark, verdicts(_source(spark, "messages", source, 1), options),
                             os.path.join(base, "ours"), ck)
    out_rows, dups = _let_through(spark, os.path.join(base, "ours"), "verdict = 'accepted'")
    peak = spark.read.parquet(os.path.join(base, "ours")).agg(F.max("entries")).first()[0]
    result["ours"] = {"seconds": elapsed, "rows_per_s": truth["rows"] / elapsed,
                      **_state(progress), "out_rows": out_rows, "let_through": dups,
                      "peak_table": peak}

    # built-in
    ck = os.path.join(base, "ck-builtin")
    prepare_session(spark, ck, {"spark.sql.shuffle.partitions":
                                spark.conf.get("spark.sql.shuffle.partitions") or "2"})
    deduped = _source(spark, "messages", source, 1) \
        .withColumn("event_time", F.timestamp_millis(F.col("at"))) \
        .withWatermark("event_time", f"{watermark} milliseconds") \
        .dropDuplicatesWithinWatermark(["receiver", "conn", "ts"])
    elapsed, progress = _run(spark, deduped, os.path.join(base, "builtin"), ck)
    out_rows, dups = _let_through(spark, os.path.join(base, "builtin"), None)
    result["builtin"] = {"seconds": elapsed, "rows_per_s": truth["rows"] / elapsed,
                         **_state(progress), "out_rows": out_rows, "let_through": dups}
    return result


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.3g}x" if b else ("-" if not a else "inf")


def report(results: list[dict[str, Any]]) -> str:
    lines = [f"{'connections':>11} {'side':>8} {'rows/s':>9} {'state rows':>10} "
             f"{'(peak)':>8} {'state bytes':>12} {'(peak)':>10} {'let through':>11} "
             f"{'peak table':>10}"]
    for r in results:
        for side in ("ours", "builtin"):
            s = r[side]
            lines.append(f"{r['connections']:>11} {side:>8} {s['rows_per_s']:>9.0f} "
                         f"{s['state_rows']:>10} {s['peak_state_rows']:>8} "
                         f"{s['state_bytes']:>12} {s['peak_state_bytes']:>10} "
                         f"{s['let_through']:>11} {s.get('peak_table', ''):>10}")
        o, b = r["ours"], r["builtin"]
        lines.append(f"{'':>11} {'ratio':>8} {_ratio(o['rows_per_s'], b['rows_per_s']):>9} "
                     f"{_ratio(o['state_rows'], b['state_rows']):>10} "
                     f"{_ratio(o['peak_state_rows'], b['peak_state_rows']):>8} "
                     f"{_ratio(o['state_bytes'], b['state_bytes']):>12} "
                     f"{_ratio(o['peak_state_bytes'], b['peak_state_bytes']):>10} "
                     f"{o['let_through']:>5}/{b['let_through']:<5}")
        lines.append(f"{'':>11} stream: {r['rows']} rows, {r['copies']} resent copies, "
                     f"{r['late_copies']} later than the {r['watermark']}-tick watermark")
    return "\n".join(lines)


def run(spark: Any, rows: int, connections: list[int], files: int,
        watermark: int = WATERMARK_TICKS) -> list[dict[str, Any]]:
    workdir = tempfile.mkdtemp(prefix="bench-stream-")
    try:
        return [measure(spark, rows, c, files, workdir, watermark) for c in connections]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--connections", default="1000,100000")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--json", default=None, metavar="OUT", help="also write the results")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (Spark start dominates)")
    args = parser.parse_args()
    watermark = WATERMARK_TICKS
    if args.smoke:
        args.rows, args.files, args.connections = 3_000, 6, "100"
        watermark = SMOKE_WATERMARK_TICKS
    from timebound.stream._run import build_session

    spark = build_session(args.master, {"spark.sql.shuffle.partitions": "2"},
                          app_name="bench-stream")
    try:
        results = run(spark, args.rows, [int(c) for c in args.connections.split(",")],
                      args.files, watermark)
    finally:
        spark.stop()
    print(report(results))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
