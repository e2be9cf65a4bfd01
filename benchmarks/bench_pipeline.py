"""Batch at-most-once operator vs Spark's dropDuplicates, rows per second.

One generated trace of about 2 million message rows (4 receivers, ~10% duplicate
copies, `at` increasing), once with 1,000 and once with 100,000 connections. Both sides
read the same Parquet and write to Spark's ``noop`` sink:
- ``dropDuplicates(["receiver","conn","ts"])`` (no clocks, no table bound: the
  baseline an engineer would reach for);
- ``timebound.pipeline.atmostonce.operate`` (the SCMP core per (receiver, class),
  ``--classes K`` so each receiver spreads over K tasks).

    .venv/bin/python benchmarks/bench_pipeline.py [--rows 2000000] [--repeats 3] [--classes 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from timebound.pipeline import atmostonce
from timebound.pipeline.datasets import read_table
from timebound.pipeline.session import build_session

RECEIVERS = 4


def generate(path: str, rows: int, conns: int, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    at = np.cumsum(rng.integers(0, 3, rows)).astype(np.int64) + 1000
    receiver = rng.integers(0, RECEIVERS, rows)
    conn = rng.integers(0, conns, rows)
    ts = np.maximum(1, at - rng.integers(0, 400, rows)).astype(np.int64)
    dup = rng.random(rows) < 0.1  # a duplicate repeats the (receiver, conn, ts) of k rows back
    src = np.maximum(0, np.arange(rows) - rng.integers(1, 50, rows))
    for arr in (receiver, conn, ts):
        arr[dup] = arr[src[dup]]
    table = pa.table({
        "run": pa.array(["bench"] * rows), "seq": pa.array(np.arange(rows, dtype=np.int64)),
        "type": pa.array(["msg"] * rows),
        "receiver": pa.array([f"s{r}" for r in receiver]),
        "conn": pa.array([f"c{c}" for c in conn]),
        "ts": pa.array(ts), "at": pa.array(at), "original": pa.array(~dup),
    })
    os.makedirs(os.path.join(path, "messages"), exist_ok=True)
    pq.write_table(table, os.path.join(path, "messages", "part-00000.parquet"))


def timed(action) -> float:
    t0 = time.perf_counter()
    action()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--classes", type=int, default=8)
    args = parser.parse_args()
    spark = build_session()
    spark.conf.set("spark.sql.shuffle.partitions", str(spark.sparkContext.defaultParallelism * 4))
    options = {"bench": {"estimator": "fixed", "rho": 500, "gc_every": 100, "window": None,
                         "spikes": None, "p": None, "resilient": False, "beta": None,
                         "latest_every": None, "classes": args.classes}}
    print(f"{args.rows} rows, {RECEIVERS} receivers, --classes {args.classes}, "
          f"{spark.sparkContext.defaultParallelism} cores, median of {args.repeats}")
    with tempfile.TemporaryDirectory() as tmp:
        for conns in (1_000, 100_000):
            ds = os.path.join(tmp, f"c{conns}")
            generate(ds, args.rows, conns)
            df = read_table(spark, ds, "messages")
            ours_df = atmostonce.operate(df, options)
            base_df = df.dropDuplicates(["receiver", "conn", "ts"])
            # one warm-up of each (Python workers, JIT), then the timed repeats
            for frame in (ours_df, base_df):
                frame.write.format("noop").mode("overwrite").save()
            ours = [timed(lambda f=ours_df: f.write.format("noop").mode("overwrite").save())
                    for _ in range(args.repeats)]
            base = [timed(lambda f=base_df: f.write.format("noop").mode("overwrite").save())
                    for _ in range(args.repeats)]
            r_ours = args.rows / statistics.median(ours)
            r_base = args.rows / statistics.median(base)
            print(f"connections {conns:>7}: atmostonce operator {r_ours / 1e6:.2f} M rows/s "
                  f"({statistics.median(ours):.2f} s), dropDuplicates {r_base / 1e6:.2f} "
                  f"M rows/s ({statistics.median(base):.2f} s), ratio ours/builtin "
                  f"{r_ours / r_base:.2f}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
