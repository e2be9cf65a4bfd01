"""``timebound bench``: the side-by-side tables of ``timebound.pipeline.bench``
(``bench pipeline``) and ``timebound.stream.bench`` (``bench stream``).

``timebound bench pipeline [--rows N] [--connections 1000,100000] [--repeats R]
[--classes K] [--master URL] [--conf k=v ...]`` generates the traces in a temporary
folder (removed on every exit path), times our at-most-once operator and
``dropDuplicates(["receiver","conn","ts"])`` on them (both to the ``noop`` sink) and
prints ours, built-in, their ratio and which decision path ran, so anyone can check the
claim on their own cluster.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from timebound.errors import UsageError
from timebound.pipeline.bench import (
    CLASSES_RANGE,
    CONNECTIONS_RANGE,
    REPEATS_RANGE,
    ROWS_RANGE,
    check_ranges,
)


def _counts(text: str) -> list[int]:
    try:
        return [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise UsageError("--connections", f"expected a comma list of integers, got {text!r}")\
            from None


def add_bench_parser(commands: Any) -> None:
    bench = commands.add_parser(
        "bench", help="benchmarks a user can run on their own machine or cluster",
        description="Benchmarks that print a comparison table.")
    which = bench.add_subparsers(dest="bench", metavar="BENCHMARK", required=True)
    pipe = which.add_parser(
        "pipeline",
        help="our Spark at-most-once operator vs dropDuplicates, rows/s side by side",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    pipe.add_argument("--rows", type=int, default=2_000_000, metavar="N",
                      help=f"message rows per trace (default 2,000,000; "
                           f"{ROWS_RANGE[0]:,}..{ROWS_RANGE[1]:,})")
    pipe.add_argument("--connections", default="1000,100000", metavar="A,B",
                      help=f"connection counts, one trace each (default 1000,100000; "
                           f"each {CONNECTIONS_RANGE[0]}..{CONNECTIONS_RANGE[1]:,})")
    pipe.add_argument("--repeats", type=int, default=3, metavar="R",
                      help=f"timed runs per side, median shown (default 3; "
                           f"{REPEATS_RANGE[0]}..{REPEATS_RANGE[1]})")
    pipe.add_argument("--classes", type=int, default=8, metavar="K",
                      help=f"hash classes per receiver (default 8; "
                           f"{CLASSES_RANGE[0]}..{CLASSES_RANGE[1]})")
    pipe.add_argument("--master", default="local[2]", metavar="URL",
                      help="Spark master (default local[2])")
    pipe.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                      help="Spark setting, repeatable")
    pipe.set_defaults(handler=run_bench_pipeline)
    _add_stream(which)


#: ``bench stream``'s range limits, mirrored from ``timebound.stream.bench`` for the help
#: text (this module belongs to ``pipeline``, which may not import ``stream``; the
#: handler loads it by name, as ``timebound.cli`` loads the commands).
_STREAM_HELP = """\
Our streaming at-most-once (timebound.stream, transformWithState, RocksDB) against
withWatermark(...).dropDuplicatesWithinWatermark(["receiver","conn","ts"]) on the same
generated streams, same trace-file source (one file per micro-batch), same foreachBatch
Parquet sink, same RocksDB state store; each repeat runs both sides, alternately, on fresh
checkpoints, after one untimed warm-up run of each side (the first stateful query of a
session starts its Python workers; no warm-up with --smoke); the table shows each side's
median run. Progress lines go to stderr.

One table row per side per (connections, batch rows) cell:
  rows/s        input rows / wall time of the query (session already up), median of R
  p50 ms        median micro-batch duration (query progress durationMs.triggerExecution)
                over the micro-batches that read rows
  p99 ms        99th percentile of the same
  state rows    stateOperators.numRowsTotal after the last micro-batch that read rows;
                peak: the most over the run
  state MB      stateOperators.memoryUsedBytes, the same way
  let through   resent copies let through: rows output as new beyond one per distinct
                (receiver, conn, ts) -- at-most-once violations (ours: 0)
  ratio line    ours / built-in for rows/s and state rows (end, peak)
  stream line   the generated stream: rows, micro-batches, resent copies, copies later
                than the built-in's watermark delay
The merge line: timebound.stream.stream_merge on generated arrivals (4 publishers, one
merger): rows/s and the largest delivery delay in ticks (a deliver row's time minus its
message's r + c) against Lemma 4.2's bound delta + 3*epsilon.

Every generated file, checkpoint and sink lives in one temporary folder, removed on every
exit path (Ctrl-C included).
"""


def _add_stream(which: Any) -> None:
    stream = which.add_parser(
        "stream",
        help="our streaming at-most-once vs dropDuplicatesWithinWatermark, side by side",
        description=_STREAM_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    stream.add_argument("--rows", type=int, default=400_000, metavar="N",
                        help="message rows per generated stream (default 400,000; "
                             "1,000..100,000,000)")
    stream.add_argument("--connections", default="1000,100000", metavar="A,B",
                        help="connection counts, one stream each (default 1000,100000; "
                             "each 1..10,000,000)")
    stream.add_argument("--batch-rows", default="10000,100000", metavar="A,B",
                        help="rows per micro-batch, one stream each (default "
                             "10000,100000; each 100..10,000,000 and at most --rows)")
    stream.add_argument("--repeats", type=int, default=3, metavar="R",
                        help="runs per side, alternating, median shown (default 3; 1..20)")
    stream.add_argument("--master", default="local[2]", metavar="URL",
                        help="Spark master (default local[2])")
    stream.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="Spark setting, repeatable")
    stream.add_argument("--smoke", action="store_true",
                        help="tiny sizes: 3,000 rows, 100 connections, 3 micro-batches, "
                             "1 repeat, 1,000 merge arrivals, 1 shuffle partition unless --conf "
                             "sets it (the other sizes are ignored)")
    stream.set_defaults(handler=run_bench_stream)


def run_bench_stream(args: argparse.Namespace) -> int:
    handler = importlib.import_module("timebound.stream.bench").run
    return int(handler(args))


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
