"""Batch at-most-once operator vs Spark's dropDuplicates, rows per second.

One generated trace of about 2 million message rows (4 receivers, ~10% duplicate
copies, `at` increasing), once with 1,000 and once with 100,000 connections. Both sides
read the same Parquet and write to Spark's ``noop`` sink (timebound.pipeline.bench):
- ``dropDuplicates(["receiver","conn","ts"])`` (no clocks, no table bound: the
  baseline an engineer would reach for);
- ``timebound.spark.traces._atmostonce.operate`` (the SCMP core per (receiver, class),
  ``--classes K`` so each receiver spreads over K tasks); the table names the path.
The same table: ``timebound bench pipeline [--rows N] [--connections 1000,100000]``.

    .venv/bin/python benchmarks/bench_pipeline.py [--rows 2000000] [--repeats 3]
        [--classes 8] [--connections 1000,100000] [--master local[2]] [--smoke]
"""

from __future__ import annotations

import argparse

from timebound.pipeline.bench import compare
from timebound.pipeline.session import build_session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--classes", type=int, default=8)
    parser.add_argument("--connections", default="1000,100000")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, runs in seconds")
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.repeats, args.connections = 2_000, 1, "100"
    spark = build_session(args.master)
    spark.conf.set("spark.sql.shuffle.partitions", str(spark.sparkContext.defaultParallelism * 4))
    try:
        compare(spark, args.rows, [int(c) for c in args.connections.split(",")],
                repeats=args.repeats, classes=args.classes, warm_up=not args.smoke)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
