"""``timebound bench``: the benchmark commands' group and ``bench pipeline``, the
side-by-side table of ``timebound.pipeline.bench`` (``bench stream`` is
``timebound.stream.bench_cli``'s, added to the group by ``timebound.cli``).

``timebound bench pipeline [--rows N] [--connections 1000,100000] [--repeats R]
[--classes K] [--master URL] [--conf k=v ...]`` generates the traces in a temporary
folder (removed on every exit path) and times, alternating, median of R, all to the
``noop`` sink: our at-most-once operator on the trace table against
``dropDuplicates(["receiver","conn","ts"])`` on it, and the library call
``timebound.spark.at_most_once(df, conn="account", ts="sent_ms", at="received_ms",
receiver="region", ...)`` on ``spark.read.parquet`` of the same rows under a user's
column names against ``df.dropDuplicates(["region","account","sent_ms"])``; it prints
each side's rows/s, the two ratios and which decision path ran, so anyone can check the
claim on their own cluster.
"""

from __future__ import annotations

import argparse
from typing import Any

from timebound.errors import UsageError
from timebound.pipeline.bench import (
    CLASSES_RANGE,
    CONNECTIONS_RANGE,
    REPEATS_RANGE,
    ROWS_RANGE,
    check_ranges,
)

#: ``bench pipeline --help`` (plain words: a terminal shows markup as is).
_DESCRIPTION = (
    "Generate the traces in a temporary folder (removed on every exit path) and time, "
    "on each connection count, four sides, all to the noop sink, one warm-up run each, "
    "then R timed runs one after the other (the next repeat the other way round), "
    "median of R: our at-most-once operator on the trace table (timebound.spark.traces."
    "decide_messages, what timebound pipeline runs) against dropDuplicates([\"receiver\", "
    "\"conn\", \"ts\"]) on it; and the library call a data engineer makes, "
    "timebound.spark.at_most_once(df, conn=\"account\", ts=\"sent_ms\", "
    "at=\"received_ms\", receiver=\"region\", rho=500, gc_every=100, classes=K), on df = "
    "spark.read.parquet of the same rows under a user's flat schema (region, account, "
    "sent_ms, received_ms, amount, note), against df.dropDuplicates([\"region\", "
    "\"account\", \"sent_ms\"]). Each timed run builds its plan too (ours: the "
    "operator's survey of the input is inside the time). Columns: connections; ours, "
    "built-in (M rows/s) and their ratio; at_most_once, dropDuplicates (M rows/s) and "
    "their ratio; which decision path ran. So anyone can check the claim on their own "
    "cluster.")


def _counts(text: str) -> list[int]:
    try:
        return [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise UsageError("--connections", f"expected a comma list of integers, got {text!r}")\
            from None


def add_bench_parser(commands: Any) -> Any:
    bench = commands.add_parser(
        "bench", help="benchmarks a user can run on their own machine or cluster",
        description="Benchmarks that print a comparison table.")
    which = bench.add_subparsers(dest="bench", metavar="BENCHMARK", required=True)
    pipe = which.add_parser(
        "pipeline",
        help="our Spark at-most-once operator and timebound.spark.at_most_once vs "
             "dropDuplicates, rows/s side by side",
        description=_DESCRIPTION)
    pipe.add_argument("--rows", type=int, default=2_000_000, metavar="N",
                      help=f"message rows per trace (default 2,000,000; "
                           f"{ROWS_RANGE[0]:,}..{ROWS_RANGE[1]:,})")
    pipe.add_argument("--connections", default="1000,100000", metavar="A,B",
                      help=f"connection counts, one trace each (default 1000,100000; "
                           f"each {CONNECTIONS_RANGE[0]}..{CONNECTIONS_RANGE[1]:,})")
    pipe.add_argument("--repeats", type=int, default=3, metavar="R",
                      help=f"timed runs per side, alternating, median shown (default 3; "
                           f"{REPEATS_RANGE[0]}..{REPEATS_RANGE[1]})")
    pipe.add_argument("--classes", type=int, default=8, metavar="K",
                      help=f"hash classes per receiver (default 8; "
                           f"{CLASSES_RANGE[0]}..{CLASSES_RANGE[1]})")
    pipe.add_argument("--master", default="local[2]", metavar="URL",
                      help="Spark master: local[2] (default), spark://..., yarn, k8s://...")
    pipe.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                      help="Spark setting, passed through (repeatable)")
    pipe.set_defaults(handler=run_bench_pipeline)
    return which


def run_bench_pipeline(args: argparse.Namespace) -> int:
    from timebound.pipeline.bench import compare
    from timebound.pipeline.session import build_session, parse_conf, stopped_after

    connections = _counts(args.connections)
    check_ranges(args.rows, connections, args.repeats, args.classes)
    conf = parse_conf(args.conf)
    spark = build_session(args.master, conf, app_name="timebound-bench")
    if "spark.sql.shuffle.partitions" not in conf:
        spark.conf.set("spark.sql.shuffle.partitions",
                       str(spark.sparkContext.defaultParallelism * 4))
    with stopped_after(spark):
        compare(spark, args.rows, connections, repeats=args.repeats, classes=args.classes,
                report=lambda line: print(line, flush=True))
    return 0
