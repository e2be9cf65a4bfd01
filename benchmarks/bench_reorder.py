"""What a larger ``reorder_window`` costs and buys, on the library's own call.

``timebound.spark.at_most_once`` on a batch DataFrame read by Spark's Parquet source
(one receiver, ``rho`` 30 s, ``gc_every`` 1 s, ticks in microseconds), for each window
W: the genuine messages lost (messages none of whose arrivals was accepted), the copies
let through (messages accepted twice: must be 0), the largest ``entries`` (timestamps
the receiver held) and the call's wall time to Spark's noop sink against W = 1 (median
of R, the windows taken in turn, reversed every other repeat).

The data (seeded): C connections, each sending M / C messages 50 ms apart plus an
exponential 50 ms (100 ms on average), starting anywhere in the first 900 s less its
own length; delays of 5 ms plus an exponential 2 ms, and on a fraction ``--slow`` of
the messages a lognormal delay instead (median 50 ms, sigma 1); 5% of the messages
resent 0.2-0.5 s later, 1% resent 60-600 s later (past ``rho``: those copies are
``stale`` or ``duplicate``). The line above the table says how many genuine messages
were overtaken by a later one of their connection.

    .venv/bin/python benchmarks/bench_reorder.py [--rows 1000000] [--connections 1000]
        [--slow 0.12] [--windows 1,2,4,8,16,32] [--repeats 3] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

MS = 1_000  # ticks (microseconds) per millisecond


def generate(rows: int, connections: int, slow: float, seed: int = 1) -> pa.Table:
    """The arrivals (conn, sent_us, received_us), copies included, as a table."""
    rng = np.random.default_rng(seed)
    per = max(1, rows // connections)
    gaps = 50 * MS + rng.exponential(50 * MS, size=(connections, per)).astype(np.int64)
    sent = np.cumsum(gaps, axis=1)
    span = max(1, 900_000 * MS - int(sent[:, -1].max()))
    sent = (sent + rng.integers(1, span + 1, size=(connections, 1))).ravel()
    conn = np.repeat(np.arange(connections), per)
    n = sent.size
    delay = 5 * MS + rng.exponential(2 * MS, n).astype(np.int64)
    slow_rows = rng.random(n) < slow
    delay[slow_rows] = (50 * MS * np.exp(rng.normal(0.0, 1.0, slow_rows.sum()))).astype(np.int64)
    received = sent + delay
    quick = rng.random(n) < 0.05
    late = rng.random(n) < 0.01
    again = [received[quick] + rng.integers(200 * MS, 500 * MS + 1, quick.sum()),
             received[late] + rng.integers(60_000 * MS, 600_000 * MS + 1, late.sum())]
    conns = np.concatenate([conn, conn[quick], conn[late]])
    sents = np.concatenate([sent, sent[quick], sent[late]])
    recvs = np.concatenate([received, *again])
    return pa.table({"conn": pa.array([f"c{c}" for c in conns]), "sent_us": sents,
                     "received_us": recvs})


def overtaken(table: pa.Table) -> int:
    """Genuine messages that arrived after a later-sent one of their connection."""
    frame = table.to_pandas().sort_values(["conn", "received_us", "sent_us"])
    frame = frame.drop_duplicates(["conn", "sent_us"])
    highest = frame.groupby("conn")["sent_us"].cummax()
    return int((frame["sent_us"] < highest).sum())


def outcome(out: Any) -> tuple[int, int, int]:
    """(genuine lost, copies let through, largest entries) of one call's rows."""
    from pyspark.sql import functions as F

    per_message = out.groupBy("conn", "sent_us").agg(
        F.sum((F.col("verdict") == "accepted").cast("long")).alias("accepted"),
        F.max("entries").alias("entries"))
    row = per_message.agg(F.sum((F.col("accepted") == 0).cast("long")).alias("lost"),
                          F.sum((F.col("accepted") > 1).cast("long")).alias("twice"),
                          F.max("entries").alias("entries")).first()
    return int(row["lost"]), int(row["twice"]), int(row["entries"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000,
                        help="genuine messages before copies (default 1,000,000)")
    parser.add_argument("--connections", type=int, default=1_000)
    parser.add_argument("--slow", type=float, default=0.12,
                        help="fraction of messages with the lognormal delay (default 0.12)")
    parser.add_argument("--windows", default="1,2,4,8,16,32")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, runs in seconds")
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.connections, args.windows, args.repeats = 20_000, 100, "1,8", 1
    windows = [int(w) for w in args.windows.split(",")]
    if not windows or windows[0] != 1 or min(windows) < 1:
        parser.error("--windows must start with 1 (the times are against W = 1)")

    # The Python workers run this interpreter (it has pyarrow and timebound).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from timebound.spark import at_most_once

    spark = (SparkSession.builder.master(args.master).appName("bench_reorder")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("FATAL")
    try:
        with tempfile.TemporaryDirectory(prefix="bench-reorder-") as tmp:
            table = generate(args.rows, args.connections, args.slow)
            path = str(Path(tmp) / "arrivals.parquet")
            pq.write_table(table, path)
            genuine = len({(c, s) for c, s in zip(table["conn"].to_pylist(),
                                                   table["sent_us"].to_pylist(), strict=True)})
            df = spark.read.parquet(path)
            calls = {w: at_most_once(df, conn="conn", ts="sent_us", at="received_us",
                                     rho=30_000 * MS, gc_every=1_000 * MS, reorder_window=w)
                     for w in windows}
            print(f"{table.num_rows:,} rows, {genuine:,} genuine messages on "
                  f"{args.connections:,} connections, {overtaken(table):,} overtaken by a "
                  f"later one of their connection; {args.master}, Parquet source, noop sink, "
                  f"median of {args.repeats}", flush=True)
            seen = {w: outcome(calls[w]) for w in windows}
            samples: dict[int, list[float]] = {w: [] for w in windows}
            for repeat in range(args.repeats):
                for w in windows if repeat % 2 == 0 else windows[::-1]:
                    start = time.perf_counter()
                    calls[w].write.format("noop").mode("overwrite").save()
                    samples[w].append(time.perf_counter() - start)
            base = statistics.median(samples[1])
            print(f"{'W':>3} {'genuine lost':>13} {'copies through':>15} {'peak entries':>13} "
                  f"{'seconds':>8} {'time vs W=1':>12}")
            for w in windows:
                lost, twice, entries = seen[w]
                seconds = statistics.median(samples[w])
                print(f"{w:>3} {lost:>13,} {twice:>15,} {entries:>13,} {seconds:>8.2f} "
                      f"{seconds / base:>12.2f}", flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
