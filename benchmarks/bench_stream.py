"""Streaming at-most-once vs ``withWatermark(...).dropDuplicatesWithinWatermark``.

The generator, the two queries and the measurements live in ``timebound.stream.bench``
(``timebound bench stream``, whose ``--help`` explains every column); this script keeps
the older command line: one micro-batch size given by ``--files`` (rows / files rows
per micro-batch), one run per side, and ``--json`` to keep the numbers.

    .venv/bin/python benchmarks/bench_stream.py [--rows 200000] [--files 20]
        [--connections 1000,100000] [--repeats 1] [--master local[2]] [--json OUT]
        [--smoke]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from typing import Any

from timebound.stream.bench import (
    SMOKE_BATCH_ROWS,
    SMOKE_CONNECTIONS,
    SMOKE_ROWS,
    SMOKE_WATERMARK_TICKS,
    WATERMARK_TICKS,
    compare,
    generate,
    table,
)

__all__ = ["SMOKE_WATERMARK_TICKS", "generate", "main", "report", "run"]


def run(spark: Any, rows: int, connections: list[int], files: int,
        watermark: int = WATERMARK_TICKS, repeats: int = 1, warm_up: bool = False
        ) -> list[dict[str, Any]]:
    """Both sides at each connection count, ``rows / files`` rows per micro-batch (no
    merge line; ``warm_up``: one untimed run of each side first); prints the table;
    returns one result per connection count."""
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    with tempfile.TemporaryDirectory(prefix="bench-stream-") as workdir:
        results = compare(spark, workdir, rows, connections, [-(-rows // files)], repeats,
                          watermark=watermark, merge_rows=0, warm_up=warm_up,
                          conf={"spark.sql.shuffle.partitions": partitions},
                          progress=lambda line: print(line, file=sys.stderr, flush=True))
    cells: list[dict[str, Any]] = results["cells"]
    return cells


def report(results: list[dict[str, Any]]) -> str:
    """The table of ``run``'s results."""
    return "\n".join(table(results, None))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--connections", default="1000,100000")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--json", default=None, metavar="OUT", help="also write the results")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (Spark start dominates)")
    args = parser.parse_args()
    watermark = WATERMARK_TICKS
    connections = [int(c) for c in args.connections.split(",")]
    if args.smoke:
        args.rows, connections = SMOKE_ROWS, list(SMOKE_CONNECTIONS)
        args.files = -(-SMOKE_ROWS // SMOKE_BATCH_ROWS[0])
        watermark = SMOKE_WATERMARK_TICKS
    from timebound.stream._run import build_session

    spark = build_session(args.master, {"spark.sql.shuffle.partitions": "2"},
                          app_name="bench-stream")
    try:
        results = run(spark, args.rows, connections, args.files, watermark, args.repeats,
                      warm_up=not args.smoke)
    finally:
        spark.stop()
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
