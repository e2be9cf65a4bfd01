"""``timebound bench pipeline``: our at-most-once operator against ``dropDuplicates``.

One generated trace per connection count (``rows`` message rows, 4 receivers, ~10%
duplicate copies of a recent (receiver, conn, ts), ``at`` increasing). Both sides read
the same Parquet and write to Spark's ``noop`` sink, one warm-up each, then
``repeats`` timed runs alternating ours / built-in; the table shows medians:

- ours: ``timebound.spark.traces.decide_messages`` (the SCMP core per receiver or
  per (receiver, class), ``--classes K``), plus which decision path ran; each timed
  run builds the operator's plan too, so its survey of the input (one aggregate job)
  is inside the time;
- built-in: ``dropDuplicates(["receiver","conn","ts"])`` (no clocks, no bound on its
  state: the baseline an engineer would reach for).

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
    from pyspark.sql import DataFrame, SparkSession

RECEIVERS = 4
#: Documented ranges of the options (checked before any work starts).
ROWS_RANGE = (1_000, 100_000_000)
CONNECTIONS_RANGE = (1, 10_000_000)
REPEATS_RANGE = (1, 20)
CLASSES_RANGE = (1, 1024)


def generate(path: str, rows: int, conns: int, seed: int = 1) -> None:
    """Write ``path/messages/part-00000.parquet``: ``rows`` message rows."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    at = np.cumsum(rng.integers(0, 3, rows)).astype(np.int64) + 1000
    receiver = rng.integers(0, RECEIVERS, rows)
    conn = rng.integers(0, conns, rows)
    ts = np.maximum(1, at - rng.integers(0, 400, rows)).astype(np.int64)
    dup = rng.random(rows) < 0.1  # a duplicate repeats the (receiver, conn, ts) k rows back
    src = np.maximum(0, np.arange(rows) - rng.integers(1, 50, rows))
    for arr in (receiver, conn, ts):
        arr[dup] = arr[src[dup]]
    names = pa.array([f"s{r}" for r in range(RECEIVERS)])
    conn_names = pa.array([f"c{c}" for c in range(conns)])
    table = pa.table({
        "run": pa.array(np.full(rows, "bench", dtype=object), pa.string()),
        "seq": pa.array(np.arange(rows, dtype=np.int64)),
        "type": pa.array(np.full(rows, "msg", dtype=object), pa.string()),
        "receiver": names.take(pa.array(receiver)),
        "conn": conn_names.take(pa.array(conn)),
        "ts": pa.array(ts), "at": pa.array(at), "original": pa.array(~dup),
    })
    os.makedirs(os.path.join(path, "messages"), exist_ok=True)
    pq.write_table(table, os.path.join(path, "messages", "part-00000.parquet"))


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


def compare(spark: SparkSession, rows: int, connections: Sequence[int], *, repeats: int = 3,
            classes: int = 8, report: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Time both sides at each connection count; report the table; return its rows."""
    from timebound.adapters.atmostonce import AtMostOnceOptions
    from timebound.columnar import path as decisions_path
    from timebound.pipeline.datasets import read_table
    from timebound.spark.traces import ENGINE, decide_messages

    check_ranges(rows, connections, repeats, classes)
    path = f"{decisions_path()}; {ENGINE}"
    options = {"bench": AtMostOnceOptions.from_values({
        "estimator": "fixed", "rho": 500, "gc_every": 100, "classes": classes})}
    report(f"{rows:,} rows, {RECEIVERS} receivers, --classes {classes}, "
           f"{spark.sparkContext.master}, noop sink, median of {repeats}")
    report(f"{'connections':>11} {'ours M rows/s':>14} {'built-in M rows/s':>18} "
           f"{'ratio':>6}  path")
    results = []
    with tempfile.TemporaryDirectory(prefix="timebound-bench-") as tmp:
        for conns in connections:
            dataset = os.path.join(tmp, f"c{conns}")
            generate(dataset, rows, conns)
            df = read_table(spark, dataset, "messages")
            # the operator's plan is built inside the timed run: its survey of the
            # input (one aggregate job) is part of what a user pays
            def ours_run(df: DataFrame = df) -> None:
                _noop(decide_messages(df, options))()
            base_run = _noop(df.dropDuplicates(["receiver", "conn", "ts"]))
            ours_run()  # warm-up: Python workers, JIT
            base_run()
            ours: list[float] = []
            base: list[float] = []
            for _ in range(repeats):  # alternate, so load changes hit both sides alike
                ours.append(_timed(ours_run))
                base.append(_timed(base_run))
            r_ours = rows / statistics.median(ours)
            r_base = rows / statistics.median(base)
            row = {"connections": conns, "ours": r_ours, "builtin": r_base,
                   "ratio": r_ours / r_base, "path": path,
                   "ours_s": ours, "builtin_s": base}
            results.append(row)
            report(f"{conns:>11,} {r_ours / 1e6:>14.3f} {r_base / 1e6:>18.3f} "
                   f"{r_ours / r_base:>6.2f}  {path}")
    return results
