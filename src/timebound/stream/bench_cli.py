"""``timebound bench stream``'s command line (the table is ``timebound.stream.bench``'s).

Building the parser imports no pyspark; the handler imports the benchmark.
"""

from __future__ import annotations

import argparse
from typing import Any

_STREAM_HELP = """\
Our streaming at-most-once (timebound.stream: applyInPandasWithState, decided
column-wise, RocksDB) against
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


def add_bench_stream_parser(which: Any) -> None:
    """``bench stream`` in the ``timebound bench`` group (``which``: its subparsers)."""
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
    from timebound.stream.bench import run

    return int(run(args))
