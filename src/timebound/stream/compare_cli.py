"""``timebound compare INPUT --conn C --ts T --at A [...] --out PAGE.html``: the table
of ``timebound.spark.compare`` on a file of arrivals (Parquet, JSON Lines or CSV, by
extension), printed, and its page written (docs/spark.md, "Which one, on your data").

Building the parser imports no pyspark; the handler reads the input with Spark, runs
``compare`` (progress lines on stderr, none with ``--quiet``) and hands the table to the
page writer the command line passes in (the page is the report layer's, which this
driver does not import).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from timebound.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

PageWriter = Callable[["pd.DataFrame", str, str], str]
FORMATS = {".parquet": "parquet", ".json": "json", ".jsonl": "json", ".csv": "csv"}

_HELP = """\
Run timebound.spark.compare on the arrivals in INPUT (one row per arrival: a
connection column, the sender's timestamp and the receiver's arrival time, integer
ticks): at_most_once at each rho, the adaptive estimators (unlimited and limited
horizon) and Spark's withWatermark(...).dropDuplicatesWithinWatermark(...) replayed as
a stream in arrival order, the watermark on the arrival and on the sender's time. Prints
the table (copies let through, genuine messages lost, state held at most, the adaptive
estimate at the end) and writes one self-contained HTML page with its figures to --out.
Settings default to the data's own delays (at - ts: 50th and 99th percentiles and the
largest). INPUT: a .parquet file or folder, .json/.jsonl (JSON Lines) or .csv (with a
header row).
"""


def _ticks(text: str) -> list[int]:
    try:
        return [int(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a comma list of integers, got {text!r}") from None


def add_compare_parser(commands: Any, write_page: PageWriter) -> None:
    """``timebound compare``; ``write_page(table, out, source)`` writes its page."""
    parser = commands.add_parser(
        "compare", help="at_most_once against Spark's watermark deduplication on your "
                        "arrivals: a table and an HTML page",
        description=_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", metavar="INPUT", help="the arrivals: .parquet (file or "
                        "folder), .json/.jsonl or .csv")
    parser.add_argument("--conn", required=True, metavar="COL", help="connection column")
    parser.add_argument("--ts", required=True, metavar="COL",
                        help="sender's timestamp column (integer ticks, >= 1)")
    parser.add_argument("--at", required=True, metavar="COL",
                        help="arrival time column (integer ticks, >= 0)")
    parser.add_argument("--msg", metavar="COL", help="message id column (default: conn "
                        "and ts name the message)")
    parser.add_argument("--receiver", metavar="COL",
                        help="one independent receiver per value of this column")
    parser.add_argument("--where", metavar="SQL", help="keep only the rows this Spark "
                        "SQL condition holds for (e.g. \"type = 'msg'\")")
    parser.add_argument("--rhos", type=_ticks, metavar="A,B", help="rho values in ticks")
    parser.add_argument("--reorder-windows", type=_ticks, metavar="A,B",
                        help="at_most_once's reorder windows (default 8)")
    parser.add_argument("--watermarks", type=_ticks, metavar="A,B",
                        help="watermark delays in ticks")
    parser.add_argument("--micro-batches", type=int, metavar="N",
                        help="micro-batches of the watermark's replay (default: one per "
                             "500 rows, 4 to 40)")
    parser.add_argument("--out", required=True, metavar="PAGE.html",
                        help="where the HTML page goes")
    parser.add_argument("--master", default="local[2]", metavar="URL",
                        help="Spark master (default local[2])")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="Spark setting, repeatable")
    parser.set_defaults(handler=lambda args: run_compare(args, write_page))


def read_input(spark: SparkSession, path: str, where: str | None) -> DataFrame:
    """INPUT as a batch DataFrame, by extension (a folder: Parquet)."""
    if not os.path.exists(path):
        raise UsageError("INPUT", f"'{path}' does not exist")
    extension = os.path.splitext(path)[1].lower()
    kind = "parquet" if os.path.isdir(path) else FORMATS.get(extension)
    if kind is None:
        raise UsageError("INPUT", f"'{path}': expected .parquet, .json, .jsonl or .csv")
    reader = spark.read
    if kind == "csv":
        reader = reader.option("header", True).option("inferSchema", True)
    df: DataFrame = getattr(reader, kind)(path)
    return df.where(where) if where else df


#: The library keyword of each option the command passes on, so a refusal names the flag.
FLAGS = {"rhos": "--rhos", "reorder_windows": "--reorder-windows",
         "watermarks": "--watermarks", "micro_batches": "--micro-batches"}


@contextlib.contextmanager
def _flag_names() -> Iterator[None]:
    """A library refusal of a keyword the command filled in names the command's flag."""
    try:
        yield
    except UsageError as exc:
        if exc.option not in FLAGS:
            raise
        raise UsageError(FLAGS[exc.option], exc.reason) from None


def run_compare(args: argparse.Namespace, write_page: PageWriter) -> int:
    """The handler: read, compare, print the table, write the page."""
    from timebound._safety import check_writable, require_extra

    require_extra("spark", "pyspark", "timebound compare")
    if not args.out.lower().endswith(".html"):
        raise UsageError("--out", f"expected a .html file, got '{args.out}'")
    check_writable(args.out, "--out")
    from timebound.sparkutil import check_master, parse_conf, stopped_after
    from timebound.stream._run import build_session

    check_master(args.master)
    conf = parse_conf(args.conf)
    quiet = bool(getattr(args, "quiet", False))

    def progress(line: str) -> None:
        if not quiet:
            print(line, file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="timebound-compare-log-") as logs:
        log = None if getattr(args, "verbose", False) else os.path.join(logs, "spark.log")
        progress(f"compare: starting Spark ({args.master})")
        spark = build_session(args.master, conf, app_name="timebound-compare", log=log)
        with stopped_after(spark):
            from timebound.spark import compare, typed_errors

            df = read_input(spark, args.input, args.where)
            with typed_errors(), _flag_names():
                table = compare(df, conn=args.conn, ts=args.ts, at=args.at, msg=args.msg,
                                receiver=args.receiver, rhos=args.rhos,
                                reorder_windows=args.reorder_windows,
                                watermarks=args.watermarks,
                                micro_batches=args.micro_batches, progress=progress)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    print(write_page(table, args.out, os.path.basename(args.input)))
    return 0
