"""``timebound bench pipeline``: batch at-most-once against ``dropDuplicates``, twice.

One generated trace per connection count (``rows`` message rows, 4 receivers, ~10%
duplicate copies of a recent (receiver, conn, ts), ``at`` increasing), written twice
from the same numbers: as the trace table (``run, seq, type, receiver, conn, ts, at,
original``) and as a user's flat Parquet file (``SCHEMA``: ``region, account, sent_ms,
received_ms, amount, note``; ``region`` = receiver, ``account`` = conn, ``sent_ms`` /
``received_ms`` = ``ts`` / ``at`` from an epoch in ms). Every side writes to Spark's
``noop`` sink; one warm-up each, then ``repeats`` timed runs of the four sides, one
after the other (the next repeat the other way round); the table shows medians:

- ``traces``: ``timebound.spark.traces.decide_messages`` on the trace table (the SCMP
  core per receiver or per (receiver, class), ``--classes K``; what ``timebound
  pipeline`` runs), plus which decision path ran, against
  ``dropDuplicates(["receiver","conn","ts"])`` on the same table;
- ``library``: the call a data engineer makes, ``timebound.spark.at_most_once(df,
  conn="account", ts="sent_ms", at="received_ms", receiver="region", rho=500,
  gc_every=100, classes=K)`` on ``df = spark.read.parquet(the user's file)``, against
  ``df.dropDuplicates(["region", "account", "sent_ms"])`` on the same ``df``.

Each timed run builds its plan too (for ours: the operator's survey of the input, one
aggregate job, is inside the time): what a user pays. The built-in sides keep no clock
and no bound on their state: the baseline an engineer would reach for.

The same code backs ``benchmarks/bench_pipeline.py``.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from timebound.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    from pyspark.sql import DataFrame, SparkSession

RECEIVERS = 4
#: The user's flat file (their names, not our trace columns).
SCHEMA = ("region string, account string, sent_ms long, received_ms long, amount long, "
          "note string")
REGIONS = ("eu-west", "eu-north", "us-east", "ap-south")
EPOCH_MS = 1_700_000_000_000
NOTES = ("invoice", "refund", "top-up", "transfer", "fee")
#: Ours' options on both paths (ticks).
RHO, GC_EVERY = 500, 100
#: Documented ranges of the options (checked before any work starts).
ROWS_RANGE = (1_000, 100_000_000)
CONNECTIONS_RANGE = (1, 10_000_000)
REPEATS_RANGE = (1, 20)
CLASSES_RANGE = (1, 1024)
#: The timed sides, in the order the even repeats run them.
SIDES = ("ours", "builtin", "library", "dropdup")


def _arrays(rows: int, conns: int, seed: int) -> dict[str, np.ndarray]:
    import numpy as np

    rng = np.random.default_rng(seed)
    at = np.cumsum(rng.integers(0, 3, rows)).astype(np.int64) + 1000
    receiver = rng.integers(0, RECEIVERS, rows)
    conn = rng.integers(0, conns, rows)
    ts = np.maximum(1, at - rng.integers(0, 400, rows)).astype(np.int64)
    dup = rng.random(rows) < 0.1  # a duplicate repeats the (receiver, conn, ts) k rows back
    src = np.maximum(0, np.arange(rows) - rng.integers(1, 50, rows))
    for arr in (receiver, conn, ts):
        arr[dup] = arr[src[dup]]
    return {"at": at, "receiver": receiver, "conn": conn, "ts": ts, "dup": dup, "src": src}


def generate(path: str, rows: int, conns: int, seed: int = 1) -> None:
    """Write ``path/messages/part-00000.parquet``: ``rows`` message rows."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    a = _arrays(rows, conns, seed)
    names = pa.array([f"s{r}" for r in range(RECEIVERS)])
    conn_names = pa.array([f"c{c}" for c in range(conns)])
    table = pa.table({
        "run": pa.array(np.full(rows, "bench", dtype=object), pa.string()),
        "seq": pa.array(np.arange(rows, dtype=np.int64)),
        "type": pa.array(np.full(rows, "msg", dtype=object), pa.string()),
        "receiver": names.take(pa.array(a["receiver"])),
        "conn": conn_names.take(pa.array(a["conn"])),
        "ts": pa.array(a["ts"]), "at": pa.array(a["at"]), "original": pa.array(~a["dup"]),
    })
    os.makedirs(os.path.join(path, "messages"), exist_ok=True)
    pq.write_table(table, os.path.join(path, "messages", "part-00000.parquet"))


def generate_user(path: str, rows: int, conns: int, seed: int = 1) -> None:
    """Write ``path/part-00000.parquet``: ``generate``'s rows (same seed, same numbers)
    under the user's flat schema ``SCHEMA``."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    a = _arrays(rows, conns, seed)
    extra = np.random.default_rng(seed + 1)
    amount = extra.integers(1, 100_000, rows).astype(np.int64)
    amount[a["dup"]] = amount[a["src"][a["dup"]]]  # a copy repeats its original's
    table = pa.table({
        "region": pa.array(REGIONS, pa.string()).take(pa.array(a["receiver"])),
        "account": pa.array([f"acct-{c}" for c in range(conns)]).take(pa.array(a["conn"])),
        "sent_ms": pa.array(a["ts"] + EPOCH_MS), "received_ms": pa.array(a["at"] + EPOCH_MS),
        "amount": pa.array(amount),
        "note": pa.array(NOTES, pa.string()).take(pa.array(np.arange(rows) % len(NOTES))),
    })
    os.makedirs(path, exist_ok=True)
    pq.write_table(table, os.path.join(path, "part-00000.parquet"))


def _noop(frame: DataFrame) -> Callable[[], None]:
    return lambda: frame.write.format("noop").mode("overwrite").save()


def _timed(action: Callable[[], None]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def check_ranges(rows: int, connections: Sequence[int], repeats: int, classes: int) -> None:
    for option, value, (low, high) in [("--rows", rows, ROWS_RANGE),
                                       ("--repeats", repeats, REPEATS_RANGE),
                                       ("--classes", classes, CLASSES_RANGE),
                                       *[("--connections", c, CONNECTIONS_RANGE)
                                         for c in connections]]:
        if not low <= value <= high:
            raise UsageError(option, f"must be in [{low:,}, {high:,}], got {value:,}")
    if not connections:
        raise UsageError("--connections", "give at least one count")


def legend(classes: int) -> list[str]:
    """What the two pairs of sides run."""
    return [
        "traces:  ours = timebound.spark.traces.decide_messages on the trace table, "
        "built-in = dropDuplicates([\"receiver\", \"conn\", \"ts\"]) on it",
        f"library: at_most_once = timebound.spark.at_most_once(df, conn=\"account\", "
        f"ts=\"sent_ms\", at=\"received_ms\", receiver=\"region\", rho={RHO}, "
        f"gc_every={GC_EVERY}, classes={classes}), dropDuplicates = "
        f"df.dropDuplicates([\"region\", \"account\", \"sent_ms\"]); "
        f"df = spark.read.parquet(a file of {SCHEMA})"]


HEADER = (f"{'connections':>11} {'ours M rows/s':>14} {'built-in M rows/s':>18} "
          f"{'ratio':>6} {'at_most_once M rows/s':>22} {'dropDuplicates M rows/s':>24} "
          f"{'ratio':>6}  path")


def compare(spark: SparkSession, rows: int, connections: Sequence[int], *, repeats: int = 3,
            classes: int = 8, report: Callable[[str], None] = print,
            warm_up: bool = True) -> list[dict[str, Any]]:
    """Time every side at each connection count; report the table; return its rows.
    ``warm_up=False`` (a smoke run) times the sides without a run of each first."""
    from timebound.adapters.atmostonce import AtMostOnceOptions
    from timebound.columnar import path as decisions_path
    from timebound.pipeline.datasets import read_table
    from timebound.spark import at_most_once
    from timebound.spark.traces import ENGINE, decide_messages

    check_ranges(rows, connections, repeats, classes)
    path = f"{decisions_path()}; {ENGINE}"
    options = {"bench": AtMostOnceOptions.from_values({
        "estimator": "fixed", "rho": RHO, "gc_every": GC_EVERY, "classes": classes})}
    report(f"{rows:,} rows, {RECEIVERS} receivers, --classes {classes}, "
           f"{spark.sparkContext.master}, noop sink, median of {repeats} (sides alternate)")
    for line in legend(classes):
        report(line)
    report(HEADER)
    results = []
    with tempfile.TemporaryDirectory(prefix="timebound-bench-") as tmp:
        for conns in connections:
            dataset = os.path.join(tmp, f"c{conns}")
            generate(dataset, rows, conns)
            user = os.path.join(tmp, f"c{conns}-user")
            generate_user(user, rows, conns)
            df = read_table(spark, dataset, "messages")
            user_df = spark.read.schema(SCHEMA).parquet(user)

            # each plan is built inside its timed run: the operator's survey of the
            # input (one aggregate job) is part of what a user pays
            def ours_run(df: DataFrame = df) -> None:
                _noop(decide_messages(df, options))()

            def library_run(df: DataFrame = user_df) -> None:
                _noop(at_most_once(df, conn="account", ts="sent_ms", at="received_ms",
                                   receiver="region", rho=RHO, gc_every=GC_EVERY,
                                   classes=classes))()

            def dropdup_run(df: DataFrame = user_df) -> None:
                _noop(df.dropDuplicates(["region", "account", "sent_ms"]))()

            def builtin_run(df: DataFrame = df) -> None:
                _noop(df.dropDuplicates(["receiver", "conn", "ts"]))()

            runs = {"ours": ours_run, "builtin": builtin_run, "library": library_run,
                    "dropdup": dropdup_run}
            for side in SIDES if warm_up else ():  # warm-up: Python workers, JIT
                runs[side]()
            seconds: dict[str, list[float]] = {side: [] for side in SIDES}
            for repeat in range(repeats):  # alternate, so load changes hit all alike
                for side in SIDES if repeat % 2 == 0 else SIDES[::-1]:
                    seconds[side].append(_timed(runs[side]))
            rate = {side: rows / statistics.median(seconds[side]) for side in SIDES}
            row = {"connections": conns, "ours": rate["ours"], "builtin": rate["builtin"],
                   "ratio": rate["ours"] / rate["builtin"], "library": rate["library"],
                   "dropdup": rate["dropdup"],
                   "library_ratio": rate["library"] / rate["dropdup"], "path": path,
                   **{f"{side}_s": seconds[side] for side in SIDES}}
            results.append(row)
            report(f"{conns:>11,} {rate['ours'] / 1e6:>14.3f} {rate['builtin'] / 1e6:>18.3f} "
                   f"{row['ratio']:>6.2f} {rate['library'] / 1e6:>22.3f} "
                   f"{rate['dropdup'] / 1e6:>24.3f} {row['library_ratio']:>6.2f}  {path}")
    return results
