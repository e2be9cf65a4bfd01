"""Rows per second of every Spark operator (atmostonce, causal, merge, slotted, stability).

Each simulator scenario's demo dataset (``timebound.sim.DEMO_PARAMS`` times
``--scale``) is generated once; each input table present is run through its operator
(the pipeline's own option resolution) to Spark's ``noop`` sink, one warm-up (none with
``--smoke``), median of R. Prints the operator, its table's rows, seconds and rows/s.

    .venv/bin/python benchmarks/bench_operators.py [--scale 1.0] [--repeats 3]
        [--master local[2]] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from timebound.demo import scaled
from timebound.errors import UsageError
from timebound.pipeline.datasets import present_tables, read_table
from timebound.pipeline.job import OPERATORS, resolve_options
from timebound.pipeline.session import build_session
from timebound.sim import DEMO_PARAMS, SCENARIOS, run_scenario
from timebound.spark.traces import _group


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, runs in seconds")
    args = parser.parse_args()
    if args.smoke:
        args.scale, args.repeats = 0.1, 1
    spark = build_session(args.master)
    spark.conf.set("spark.sql.shuffle.partitions", str(spark.sparkContext.defaultParallelism * 4))
    print(f"demo datasets x {args.scale}, {args.master}, noop sink, median of {args.repeats}")
    print(f"{'operator':<11} {'scenario':<10} {'rows':>9} {'seconds':>8} {'rows/s':>10}")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for name in SCENARIOS:
                ds = os.path.join(tmp, name)
                try:
                    run_scenario(name, ds, seed=1, params=scaled(DEMO_PARAMS.get(name, {}),
                                                                 args.scale))
                except UsageError as exc:  # a demo size below a scenario's minimum
                    print(f"{'-':<11} {name:<10} skipped: {exc}", flush=True)
                    continue
                for table in present_tables(ds):
                    df = read_table(spark, ds, table)
                    op = OPERATORS[table]
                    with _group.translate_errors():
                        typed = _group.typed_options(op.spec, resolve_options(df, table, {}))
                        frame = op.operate(df, typed)
                        rows = df.count()
                        if not args.smoke:  # warm-up (none at the smoke size)
                            frame.write.format("noop").mode("overwrite").save()
                        samples = []
                        for _ in range(args.repeats):
                            start = time.perf_counter()
                            frame.write.format("noop").mode("overwrite").save()
                            samples.append(time.perf_counter() - start)
                    seconds = statistics.median(samples)
                    print(f"{op.spec.protocol:<11} {name:<10} {rows:>9,} {seconds:>8.2f} "
                          f"{rows / seconds:>10,.0f}", flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
