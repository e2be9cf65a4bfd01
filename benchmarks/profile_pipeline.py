"""Where a row's time goes in the Spark at-most-once operators (benchmarks/README.md).

The library's batch ``at_most_once`` (on a user's flat Parquet file, ``timebound.pipeline.
bench.generate_user``'s): each stage adds one step of the operator's plan, each timed to
the ``noop`` sink, median of R, sides alternating: the scan; + the shuffle on
(receiver, hash class); + the key columns to Python and back (an iterator Arrow UDF
holding its partition and deciding nothing: what any Python operator on this path
pays); + the row checks, working columns and guard (the operator's own plan,
``timebound.spark.stages.planned``, around a worker that decides nothing); the whole
operator; ``dropDuplicates``; each with ``dropDuplicates``' time over its own (the
speed bar reads 1.5x). Then the operator's worker on one partition in this process:
us per row, and the core's own loop (``drive``) among them.

The commands' path:

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
from timebound.pipeline.bench import GC_EVERY, RECEIVERS, RHO, SCHEMA, generate, generate_user
from timebound.pipeline.datasets import read_table
from timebound.pipeline.session import build_session
from timebound.spark.traces import _atmostonce as atmostonce
from timebound.spark.traces import _columnar, _group
from timebound.spark.traces.schemas import DECISION_EXTRA

#: one run of each stage before the timed ones (``--smoke``: none)
WARM_UP = True


def _timed(frame, repeats: int) -> float:
    if WARM_UP:
        frame.write.format("noop").mode("overwrite").save()
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


def library_options(classes: int) -> AtMostOnceOptions:
    """The options ``at_most_once(..., rho=RHO, gc_every=GC_EVERY, classes=classes)``
    decides with: its own defaults (read from its signature) for the others."""
    import inspect

    from timebound.spark import at_most_once
    from timebound.spark.stages import options

    given = {name: p.default for name, p in inspect.signature(at_most_once).parameters.items()
             if p.kind is p.KEYWORD_ONLY and p.default is not p.empty
             and name not in ("receiver", "order", "down")}
    return options({**given, "rho": RHO, "gc_every": GC_EVERY, "classes": classes})


def _undecided(arrays: Any) -> Any:
    """A worker that holds its partition, as the operator's does, and decides nothing."""
    from timebound.spark.stages import undecided

    for part in list(arrays):
        yield undecided(len(part[0]))


def library_stages(spark, user: str, rows: int, classes: int, repeats: int) -> None:
    import warnings

    from pyspark.sql.pandas.functions import ArrowUDFType, arrow_udf

    from timebound.spark import at_most_once
    from timebound.spark.stages import RETURNED, columns, placement, planned

    df = spark.read.schema(SCHEMA).parquet(user)
    cols = columns(df.schema, "account", "sent_ms", "received_ms", "region", None, None)
    opts = library_options(classes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        udf = arrow_udf(_undecided, returnType=RETURNED.simpleString(),
                        functionType=ArrowUDFType.SCALAR_ITER).asNondeterministic()
    shuffled = df.repartition(*placement(cols, classes))
    keys = shuffled.select("*", udf("region", "account", "sent_ms", "received_ms")
                           .alias("answer"))
    stages = {
        "Parquet scan (the user's file)": df,
        "+ shuffle on (receiver, hash class)": shuffled,
        "+ key columns to Python and back": keys.select(*df.columns, "answer.verdict"),
        "+ row checks, working columns, guard": planned(df, cols, opts, _undecided),
        "whole at_most_once (decisions)": at_most_once(
            df, conn="account", ts="sent_ms", at="received_ms", receiver="region",
            rho=RHO, gc_every=GC_EVERY, classes=classes),
        "dropDuplicates (built-in)": df.dropDuplicates(["region", "account", "sent_ms"]),
    }
    for frame in stages.values() if WARM_UP else ():  # warm-up: Python workers, JIT
        frame.write.format("noop").mode("overwrite").save()
    samples: dict[str, list[float]] = {label: [] for label in stages}
    for repeat in range(repeats):  # alternate, so load changes hit all alike
        for label in list(stages)[::1 if repeat % 2 == 0 else -1]:
            start = time.perf_counter()
            stages[label].write.format("noop").mode("overwrite").save()
            samples[label].append(time.perf_counter() - start)
    median = {label: statistics.median(times) for label, times in samples.items()}
    builtin = median["dropDuplicates (built-in)"]
    print(f"Library batch at_most_once, {rows:,} rows, --classes {classes}, median of "
          f"{repeats} (seconds, us per row, dropDuplicates' time over the stage's):")
    for label, seconds in median.items():
        print(f"  {label:<40} {seconds:7.2f} s {seconds / rows * 1e6:7.2f} us/row "
              f"{builtin / seconds:6.2f}x", flush=True)


def library_worker(user: str, classes: int) -> None:
    """The operator's worker on one partition's rows (receiver eu-west, every class),
    as Spark hands them over (batches of 100,000 rows); the core's loop by cProfile."""
    from timebound.spark.stages import Columns, worker

    table = pq.read_table(user)
    table = table.filter(pa.compute.equal(table["region"], "eu-west"))
    n = table.num_rows
    tie = pa.array(np.random.default_rng(1).integers(-2**62, 2**62, n))
    columns = [table[name].combine_chunks() for name in
               ("region", "account", "sent_ms", "received_ms")] + [tie, pa.nulls(n, pa.int8())]
    parts = [tuple(c.slice(i, 100_000) for c in columns) for i in range(0, n, 100_000)]
    decide = worker(Columns("account", "sent_ms", "received_ms", "region", None),
                    library_options(classes))

    def run() -> None:
        for _ in decide(iter(parts)):
            pass

    run()
    start = time.perf_counter()
    run()
    seconds = time.perf_counter() - start
    profile = cProfile.Profile()
    profile.runcall(run)
    stats = pstats.Stats(profile, stream=io.StringIO()).stats  # type: ignore[attr-defined]
    # compiled: a built-in method; pure Python: the function itself
    loop = sum(tottime for (_, _, name), (_, _, tottime, _, _) in stats.items()
               if name == "drive" or name.endswith("._drive.drive>"))
    print(f"Library worker, one partition of {n:,} rows (receiver eu-west, {classes} "
          f"classes): {seconds / n * 1e6:.2f} us/row; the core's loop (drive, profiled) "
          f"{loop / n * 1e6:.2f} us/row of the profiled run's "
          f"{sum(s[2] for s in stats.values()) / n * 1e6:.2f}")


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
        global WARM_UP
        args.rows, args.connections, args.repeats = 2_000, 100, 1
        WARM_UP = False
    options = {"bench": AtMostOnceOptions.from_values({
        "estimator": "fixed", "rho": 500, "gc_every": 100, "classes": args.classes})}
    with tempfile.TemporaryDirectory() as tmp:
        generate(tmp, args.rows, args.connections)
        user = os.path.join(tmp, "user")
        generate_user(user, args.rows, args.connections)
        print(f"{args.rows:,} rows, {RECEIVERS} receivers, {args.connections:,} connections, "
              f"--classes {args.classes}, {args.master}")
        python_side(tmp, args.classes, options)
        library_worker(user, args.classes)
        spark = build_session(args.master)
        spark.conf.set("spark.sql.shuffle.partitions",
                       str(spark.sparkContext.defaultParallelism * 4))
        try:
            library_stages(spark, user, args.rows, args.classes, args.repeats)
            spark_stages(spark, tmp, args.rows, options, args.repeats)
        finally:
            spark.stop()


if __name__ == "__main__":
    main()
