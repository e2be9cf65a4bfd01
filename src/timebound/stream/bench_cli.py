"""``timebound bench stream``'s command line (the table is ``timebound.stream.bench``'s).

Building the parser imports no pyspark; the handler imports the benchmark.
"""

from __future__ import annotations

import argparse
from typing import Any

_STREAM_HELP = """\
The library call a data engineer makes, timebound.spark.at_most_once(df, conn="account",
ts="sent_ms", at="received_ms", receiver="region", rho=W, gc_every=W), against Spark's
built-in df.withWatermark(...).dropDuplicatesWithinWatermark(["account", "sent_ms"])
twice: the watermark on the arrival time received_ms (wm-recv) and on the sender's time
sent_ms (wm-sent); W = 2,000 ms (200 with --smoke) is the built-in's watermark delay and
our rho. A fourth side, floor, sends the same rows through Spark's Python stateful
operator (applyInPandasWithState, the engine at_most_once runs on a stream, keyed as
ours: region and class 0) and back unchanged: what any Python stateful operator pays on
this path, deciding nothing (it keeps every copy). Every side reads the same generated
stream with Spark's own file source, spark.readStream.schema("region string, account
string, sent_ms long, received_ms long, amount long, note string")
.option("maxFilesPerTrigger", 1).parquet(folder) (one Parquet file per micro-batch, in
received_ms order), writes with the same foreachBatch Parquet sink
(ours: every row with its verdict) and keeps its state in the same RocksDB state store.
The stream: 4 regions, ~3% of the messages arriving later than W, 10% resent (half the
copies within W/2, half later than W). Each repeat runs every side (ours, floor,
wm-recv, wm-sent; the next repeat the other way round) on fresh checkpoints, after one
untimed warm-up run of each side and of the merge (the first stateful query of a session
starts its Python workers; no warm-up with --smoke); the table shows each side's median
run. Progress lines go to stderr.

One table row per side per (connections, batch rows) cell:
  rows/s        input rows / wall time of the query (session already up), median of R
  x wm-recv     that rows/s over wm-recv's; x wm-sent: over wm-sent's
  p50 ms        median micro-batch duration (query progress durationMs.triggerExecution)
                over the micro-batches that read rows
  p99 ms        99th percentile of the same
  state rows    stateOperators.numRowsTotal after the last micro-batch that read rows;
                peak: the most over the run
  state MB      stateOperators.memoryUsedBytes, the same way
  let through   copies kept (a copy: a later arrival of an already seen (account,
                sent_ms)): rows kept beyond one per distinct (account, sent_ms) --
                at-most-once violations (ours: 0)
  genuine lost  first arrivals not kept (ours: verdict not accepted; the built-in: not
                in its output): rows later than W (ours, wm-sent) and, for ours, rows
                arriving after a later-sent one of their account (refused as older)
  ratio line    ours' state rows over each built-in variant's (end, peak); ours'
                rows/s over the floor's
  stream line   the generated stream: rows, micro-batches, messages, genuine rows later
                than W, genuine rows after a later-sent one of their account, resent
                copies, copies later than W
The merge line: timebound.spark.causal_merge(df, merger="replica", msg="event",
proc="writer", at="arrived", r="r", c="c", kn="kn", epsilon=4, delta=10, timers="none")
on generated arrivals (4 writers, one replica) read by the same file source: rows/s and
the largest delivery delay in ticks (a deliver row's time minus its r + c) against
Lemma 4.2's bound delta + 3*epsilon.

Every generated file, checkpoint and sink lives in one temporary folder, removed on every
exit path (Ctrl-C included).
"""


def add_bench_stream_parser(which: Any) -> None:
    """``bench stream`` in the ``timebound bench`` group (``which``: its subparsers)."""
    stream = which.add_parser(
        "stream",
        help="timebound.spark.at_most_once on a stream vs dropDuplicatesWithinWatermark "
             "(watermark on arrival and on send time), side by side",
        description=_STREAM_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    stream.add_argument("--rows", type=int, default=400_000, metavar="N",
                        help="rows (messages and their copies) per generated stream "
                             "(default 400,000; "
                             "1,000..100,000,000)")
    stream.add_argument("--connections", default="1000,100000", metavar="A,B",
                        help="connection (account) counts, one stream each (default "
                             "1000,100000; "
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
                             "W = 200 ms, 1 repeat, 1,000 merge arrivals, no warm-up, 1 "
                             "shuffle partition unless --conf sets it (the other sizes are "
                             "ignored)")
    stream.set_defaults(handler=run_bench_stream)


def run_bench_stream(args: argparse.Namespace) -> int:
    from timebound.stream.bench import run

    return int(run(args))
