"""``timebound stream atmostonce|merge``: the streaming queries' command line.

``timebound stream atmostonce --source DIR --checkpoint DIR --sink DIR
[--trigger available-now|processing-time=1s] [--max-files-per-trigger N]
[the replay's receiver options] [--master URL] [--conf K=V ...]`` and
``timebound stream merge --source DIR --checkpoint DIR --sink DIR [--epsilon E
--delta D --variant rckn|rc] [same trigger/Spark options]``. Progress lines go to
stdout, one per micro-batch; SIGINT or SIGTERM between micro-batches stops the query
cleanly (exit 0), inside one stops it with one line (exit 130 / 143: the batch is not
committed and runs again on restart). A restart must use the options, source and sink
the checkpoint was started with (``_lock``). Spark's own output goes to
``CHECKPOINT/timebound-spark.log`` unless ``--verbose``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from typing import Any, TextIO

from timebound.adapters.atmostonce import AtMostOnceOptions
from timebound.adapters.merge import MergeOptions
from timebound.arguments import add_receiver_arguments
from timebound.contract import VARIANTS
from timebound.durations import METAVAR, duration_help, format_bytes, parse_duration
from timebound.errors import MissingExtra

#: ``--timers`` choices (``timebound.spark.traces._stream_merge.TIMERS``; pyspark is not imported
#: to build the parser).
TIMERS = ("none", "processing")

_EPILOG_AMO = """\
example (docs/stream.md):
  timebound stream atmostonce --source in/ --checkpoint ck/ --sink out/ \\
      --max-files-per-trigger 1 --estimator unlimited --gc-every 50
output: SINK/verdicts/batch=N/ (input columns + verdict, rho, entries, cls,
late_arrival, file, line) and SINK/accepted/batch=N/ (each accepted message once).
Shuffle partitions are frozen into the checkpoint at the first start: size them then
(--conf spark.sql.shuffle.partitions=N; default: the cluster's default parallelism).
"""

_EPILOG_MERGE = """\
example (docs/stream.md):
  timebound stream merge --source arrivals/ --checkpoint ck/ --sink out/ \\
      --epsilon 2 --delta 3
output: SINK/order/batch=N/ rows run, merger, seq (position in that merger's output),
msg, proc, action (deliver | late | duplicate), time.
live folder, deliveries on time without waiting for the next arrival:
  timebound stream merge --source arrivals/ --checkpoint ck/ --sink out/ \\
      --epsilon 2 --delta 3 --timers processing --tick 1ms \\
      --trigger processing-time=250ms
"""


def _common(parser: argparse.ArgumentParser) -> None:
    io = parser.add_argument_group("stream")
    io.add_argument("--source", required=True, metavar="DIR",
                    help="folder producers drop .parquet / .jsonl trace files into; taken "
                         "in name order (names starting with . or _ are ignored)")
    io.add_argument("--checkpoint", required=True, metavar="DIR",
                    help="the query's checkpoint (offsets, commits, RocksDB state); restart "
                         "with the same DIR to continue")
    io.add_argument("--sink", required=True, metavar="DIR",
                    help="output folder, written once per micro-batch")
    io.add_argument("--trigger", default="available-now",
                    metavar="available-now|processing-time=1s",
                    help="available-now (default): process every file present, then stop; "
                         "processing-time=<N>ms|s|m|h: a micro-batch every interval until "
                         "SIGINT/SIGTERM")
    io.add_argument("--max-files-per-trigger", type=int, default=None, metavar="N",
                    help="at most N files per micro-batch (1..1000000; default: all new "
                         "files)")
    spark = parser.add_argument_group("Spark (as timebound pipeline)")
    spark.add_argument("--master", default=None, metavar="URL",
                       help="Spark master: local[*] (default), spark://..., yarn, k8s://...")
    spark.add_argument("--conf", action="append", default=[], metavar="K=V",
                       help="Spark setting, passed through (repeatable)")
    # SUPPRESS: the top-level --verbose is not reset by the subcommand's default
    spark.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                       help="Spark's log, the workers' output and every trace on stderr "
                            "(default: into CHECKPOINT/timebound-spark.log)")


def add_stream_parser(commands: Any) -> None:
    stream = commands.add_parser(
        "stream",
        help="run a protocol as a Structured Streaming query over a folder of trace files",
        description=(
            "Structured Streaming on Spark: trace files dropped into --source are fed, "
            "per key, to the same cores as timebound replay (Spark's stateful pandas "
            "operators, RocksDB state). Output is written once per micro-batch into --sink; a killed query "
            "restarted with the same --checkpoint emits nothing twice. See docs/stream.md."
        ),
    )
    protocols = stream.add_subparsers(dest="stream_protocol", metavar="PROTOCOL",
                                      required=True)
    amo = protocols.add_parser(
        "atmostonce",
        help="SCMP at-most-once receivers per (run, receiver, hash class)",
        description=(
            "Streaming at-most-once ingestion: messages rows (type, receiver, conn, ts, at; "
            "optional run, seq, down, original) in; each (run, receiver, class) key is one "
            "SCMP receiver, fed in seq order within a micro-batch, timers inline. With files "
            "named in trace order and --max-files-per-trigger 1 the verdicts equal "
            "timebound replay atmostonce on the concatenated files. A row whose at is "
            "behind its receiver's clock is decided at that clock and marked late_arrival."
        ),
        epilog=_EPILOG_AMO,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(amo)
    add_receiver_arguments(amo)
    amo.set_defaults(handler=run_stream_atmostonce)
    merge = protocols.add_parser(
        "merge",
        help="causal deterministic mergers per (run, merger)",
        description=(
            "Streaming causal deterministic merge: arrivals rows (merger, msg, proc, at, r, "
            "c, kn; optional run, seq) in; each (run, merger) key is one merger whose "
            "buffer lives in the state store, its clock advanced by the arrivals' at; it "
            "delivers at the deadline r + c + D + E as timebound replay merge does. "
            "Replicated mergers fed the same messages emit the same order."
        ),
        epilog=_EPILOG_MERGE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(merge)
    opts = merge.add_argument_group("merge (as timebound replay merge)")
    opts.add_argument("--epsilon", type=int, metavar="E",
                      help="clock-difference bound epsilon, trace ticks >= 1 (required)")
    opts.add_argument("--delta", type=int, metavar="D",
                      help="message-delay bound delta, trace ticks >= 0 (required)")
    opts.add_argument("--variant", choices=VARIANTS, default="rckn",
                      help="rckn: rows carry r, c, kn (default); rc: rows carry r, c")
    opts.add_argument("--timers", choices=TIMERS, default="none",
                      help="what moves a merger's clock between arrivals: none (default: "
                           "only arrivals' at; a buffered message waits for a later "
                           "arrival, as a replay of a finished trace wants) or processing "
                           "(Spark's processing-time timers: delivered once its deadline "
                           "has passed on the wall clock, with or without new arrivals; "
                           "use with --trigger processing-time=...)")
    opts.add_argument("--tick", default="1ms", metavar=METAVAR,
                      help=duration_help("with --timers processing: the wall-clock "
                                         "length of one at tick", 1000))
    merge.set_defaults(handler=run_stream_merge)


def _finish(result: Any) -> int:
    """The summary line and the exit status: 0, or 128 + the signal's number (130
    SIGINT, 143 SIGTERM, as every timebound command) when a signal stopped the query
    inside a micro-batch -- one line on stderr, the batch left for a restart."""
    summary = result.summary
    if summary.stopped_by and summary.unfinished:
        batches = ", ".join(str(b) for b in summary.unfinished)
        print(f"timebound: {'interrupted' if summary.stopped_by == 'SIGINT' else 'terminated'}"
              f" ({summary.stopped_by}) inside micro-batch {batches}: not committed, "
              f"restart with the same command to run it again", file=sys.stderr, flush=True)
        return 128 + int(signal.Signals[summary.stopped_by])
    counts = ", ".join(f"{k} {v}" for k, v in sorted((summary.counts or {}).items()))
    stopped = f" (stopped on {summary.stopped_by})" if summary.stopped_by else ""
    print(f"done{stopped}: {summary.batches} batches, {summary.rows_in} rows in"
          + (f"; {counts}" if counts else "")
          + f"; state {summary.state_rows} rows, store memory "
            f"{format_bytes(summary.state_bytes)}", flush=True)
    return 0


def _progress_out(args: argparse.Namespace) -> contextlib.AbstractContextManager[TextIO]:
    """Where the per-batch progress lines go: stdout, or nowhere with ``--quiet`` (the
    summary line is printed either way)."""
    if getattr(args, "quiet", False):
        return open(os.devnull, "w", encoding="utf-8")
    return contextlib.nullcontext(sys.stdout)


def _require_spark(command: str) -> None:
    """pyspark, pandas and protobuf (transformWithState's wire format) are the
    ``spark`` extra: name it in one line rather than fail inside Spark."""
    import importlib.util

    for module in ("pyspark", "pandas", "google.protobuf"):
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            raise MissingExtra(command, "spark", module.split(".")[-1])


def run_stream_atmostonce(args: argparse.Namespace) -> int:
    _require_spark("timebound stream atmostonce")
    from timebound.stream import stream_atmostonce
    from timebound.stream._run import parse_conf

    options = AtMostOnceOptions.from_values(vars(args))
    conf = parse_conf(args.conf)
    with _progress_out(args) as out:
        result = stream_atmostonce(args.source, args.checkpoint, args.sink, options,
                                   trigger=args.trigger,
                                   max_files=args.max_files_per_trigger,
                                   master=args.master, conf=conf, out=out,
                                   quiet=not getattr(args, "verbose", False))
    return _finish(result)


def run_stream_merge(args: argparse.Namespace) -> int:
    _require_spark("timebound stream merge")
    from timebound.stream import stream_merge
    from timebound.stream._run import parse_conf

    options = MergeOptions.from_values(vars(args))
    tick_us = parse_duration(args.tick, "--tick")
    conf = parse_conf(args.conf)
    with _progress_out(args) as out:
        result = stream_merge(args.source, args.checkpoint, args.sink, options,
                              timers=args.timers, tick_us=tick_us, trigger=args.trigger,
                              max_files=args.max_files_per_trigger,
                              master=args.master, conf=conf, out=out,
                              quiet=not getattr(args, "verbose", False))
    return _finish(result)
