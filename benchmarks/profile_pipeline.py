"""Where a row's time goes in the Spark at-most-once operator (benchmarks/README.md).

Spark side (one run, each stage adds one step, each timed to the ``noop`` sink, median
of R): the Parquet scan; + the class column and explode; + the shuffle into Arrow
groups and back with an identity Python function (the cost of getting rows to Python
and back); + the Arrow sort by ``seq``; the operator's engine (repartition, JVM sort
by ``seq``, and ``mapInArrow`` with an identity function); the whole operator; ``dropDuplicates`` for
scale. Python side (in this process, on one group as a worker gets it, ``cProfile``):
the operator's group function and its top functions by own time.

    .venv/bin/python benchmarks/profile_pipeline.py [--rows 2000000] [--connections 1000]
        [--classes 8] [--repeats 3] [--smoke]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import tempfile
import time
import zlib
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import functions as F

from timebound.adapters.atmostonce import AtMostOnceAdapter, AtMostOnceOptions
from timebound.pipeline.bench import RECEIVERS, generate
from timebound.pipeline.datasets import read_table
from timebound.pipeline.session import build_session
from timebound.spark.traces import _atmostonce as atmostonce
from timebound.spark.traces import _columnar, _group
from timebound.spark.traces.schemas import DECISION_EXTRA


def _timed(frame, repeats: int) -> float:
    frame.write.format("noop").mode("overwrite").save()  # warm-up
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        frame.write.format("noop").mode("overwrite").save()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def spark_stages(spark, ds: str, rows: int, options, repeats: int) -> None:
    df = read_table(spark, ds, "messages")
    schema = _group.out_schema(df.schema, DECISION_EXTRA["messages"])
    arrow_schema = _group.arrow_schema(schema)

    def identity(_key: Any, table: Any) -> pa.Table:
        n = table.num_rows
        extra = {"verdict": pa.nulls(n, pa.string()), "rho": pa.nulls(n, pa.int64()),
                 "entries": pa.nulls(n, pa.int64())}
        return pa.Table.from_arrays([extra.get(f.name, table.column(f.name)
                                               if f.name in table.column_names else None)
                                     for f in arrow_schema], schema=arrow_schema)

    def sorted_identity(key: Any, table: Any) -> pa.Table:
        return identity(key, table.sort_by([("seq", "ascending")]))

    def stream_identity(batches: Any) -> Any:
        for batch in batches:
            yield from identity(None, pa.Table.from_batches([batch])).to_batches()

    classed = atmostonce.with_classes(df, options)
    grouped = classed.groupBy("run", "receiver", "cls")
    ordered = classed.repartition("run", "receiver", "cls") \
        .sortWithinPartitions(F.asc_nulls_last("seq"))
    stages = [
        ("Parquet scan", df),
        ("+ class column, explode", classed),
        ("+ shuffle, Arrow to Python and back", grouped.applyInArrow(identity, schema)),
        ("+ Arrow sort by seq", grouped.applyInArrow(sorted_identity, schema)),
        ("+ repartition, JVM sort by seq", ordered),
        ("+ mapInArrow identity (engine)", ordered.mapInArrow(stream_identity, schema)),
        ("whole operator (decisions)", atmostonce.operate(df, options)),
        ("dropDuplicates (built-in)", df.dropDuplicates(["receiver", "conn", "ts"])),
    ]
    print(f"Spark stages, {rows:,} rows, median of {repeats} (seconds, us per row):")
    for label, frame in stages:
        seconds = _timed(frame, repeats)
        print(f"  {label:<40} {seconds:7.2f} s {seconds / rows * 1e6:7.2f} us/row", flush=True)


def python_side(ds: str, classes: int, options) -> None:
    table = pq.read_table(os.path.join(ds, "messages"))
    table = table.filter(pa.compute.equal(table["receiver"], "s0"))
    cls = np.array([zlib.crc32(c.encode()) % classes for c in table["conn"].to_pylist()])
    table = table.filter(pa.array(cls == 0))
    n = table.num_rows
    table = table.append_column("down", pa.nulls(n, pa.int64()))
    table = table.append_column("cls", pa.array(np.zeros(n, dtype=np.int64)))
    table = table.take(pa.array(np.random.default_rng(1).permutation(n)))  # shuffled
    schema = table.schema.remove(table.schema.get_field_index("cls"))
    for name, kind in (("verdict", pa.string()), ("rho", pa.int64()),
                       ("entries", pa.int64()), ("cls", pa.int64())):
        schema = schema.append(pa.field(name, kind))

    def group() -> pa.Table:
        return _columnar.atmostonce_group(AtMostOnceAdapter(options["bench"]),
                                          "messages[run 'bench']", table, 0, classes, schema)

    group()
    start = time.perf_counter()
    group()
    seconds = time.perf_counter() - start
    print(f"Python worker, one group of {n:,} rows (receiver s0, class 0): "
          f"{seconds / n * 1e6:.2f} us/row")
    profile = cProfile.Profile()
    profile.runcall(group)
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(10)
    lines = [line for line in out.getvalue().splitlines() if line.strip()]
    print("\n".join(lines[3:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--classes", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, runs in seconds")
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.connections, args.repeats = 2_000, 100, 1
    options = {"bench": AtMostOnceOptions.from_values({
        "estimator": "fixed", "rho": 500, "gc_every": 100, "classes": args.classes})}
    with tempfile.TemporaryDirectory() as tmp:
        generate(tmp, args.rows, args.connections)
        print(f"{args.rows:,} rows, {RECEIVERS} receivers, {args.connections:,} connections, "
              f"--classes {args.classes}, {args.master}")
        python_side(tmp, args.classes, options)
        spark = build_session(args.master)
        spark.conf.set("spark.sql.shuffle.partitions",
                       str(spark.sparkContext.defaultParallelism * 4))
        try:
            spark_stages(spark, tmp, args.rows, options, args.repeats)
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
