"""How long ``timebound.spark.compare`` takes, and what it says, on generated arrivals.

``compare(df, conn="account", ts="sent_ms", at="received_ms")`` (a bare call: the
settings from the data's delays; ``--smoke``: one rho and one watermark) on a batch
DataFrame read by Spark's Parquet source. The data (seeded, ticks in milliseconds):
one message per millisecond of the senders' clocks over C accounts, arriving 5 ms plus
an exponential 20 ms later, 2% of them a lognormal delay instead (median 2 s, sigma
1); 5% resent 0.2-0.5 s after their first arrival, 1% resent 60-300 s after it. Prints
the data's truth (rows, messages, copies), the table and the call's wall time.

    .venv/bin/python benchmarks/bench_compare.py [--rows 1000000] [--connections 1000]
        [--master local[2]] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def generate(rows: int, connections: int, seed: int = 1) -> pa.Table:
    """The arrivals (account, sent_ms, received_ms), copies included."""
    rng = np.random.default_rng(seed)
    messages = int(rows / 1.06)
    sent = np.arange(1, messages + 1, dtype=np.int64)
    account = rng.integers(0, connections, messages)
    delay = 5 + rng.exponential(20.0, messages).astype(np.int64)
    slow = rng.random(messages) < 0.02
    delay[slow] = (2_000 * np.exp(rng.normal(0.0, 1.0, slow.sum()))).astype(np.int64)
    received = sent + delay
    quick = rng.random(messages) < 0.05
    late = rng.random(messages) < 0.01
    again = [received[quick] + rng.integers(200, 501, quick.sum()),
             received[late] + rng.integers(60_000, 300_001, late.sum())]
    return pa.table({
        "account": pa.array([f"acct-{a}" for a in
                             np.concatenate([account, account[quick], account[late]])]),
        "sent_ms": np.concatenate([sent, sent[quick], sent[late]]),
        "received_ms": np.concatenate([received, *again]),
    })


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000,
                        help="arrivals, copies included (default 1,000,000)")
    parser.add_argument("--connections", type=int, default=1_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, runs in seconds")
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.connections = 2_000, 50

    # The Python workers run this interpreter (it has pyarrow and timebound).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from timebound.spark import compare

    spark = (SparkSession.builder.master(args.master).appName("bench_compare")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("FATAL")
    try:
        with tempfile.TemporaryDirectory(prefix="bench-compare-") as tmp:
            table = generate(args.rows, args.connections)
            path = str(Path(tmp) / "arrivals.parquet")
            pq.write_table(table, path)
            df = spark.read.parquet(path)
            settings = {"rhos": [200], "watermarks": [200]} if args.smoke else {}
            started = time.perf_counter()
            out = compare(df, conn="account", ts="sent_ms", at="received_ms",
                          progress=lambda line: print(line, file=sys.stderr, flush=True),
                          **settings)  # type: ignore[arg-type]
            seconds = time.perf_counter() - started
            print(f"{out.attrs['rows']:,} rows, {out.attrs['messages']:,} messages, "
                  f"{out.attrs['copies']:,} copies on {args.connections:,} accounts; "
                  f"{args.master}, {out.attrs['micro_batches']} micro-batches")
            print(out.to_string(index=False, float_format=lambda v: f"{v:.1f}"))
            print(f"compare: {seconds:.1f} s")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
