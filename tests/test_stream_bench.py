"""benchmarks/bench_stream.py at its smoke size, on the shared Spark session: ours lets
no resent copy through and holds fewer state rows than dropDuplicatesWithinWatermark.
(tests/test_benchmarks_smoke.py also runs the script itself with ``--smoke``.)"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_stream.py"


@pytest.mark.spark
@pytest.mark.slow
def test_bench_stream_smoke(spark: Any) -> None:
    spec = importlib.util.spec_from_file_location("bench_stream", SCRIPT)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    try:
        results = bench.run(spark, 3_000, [100], 6, bench.SMOKE_WATERMARK_TICKS)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", previous)
    (result,) = results
    ours, builtin = result["ours"], result["builtin"]
    assert ours["let_through"] == 0
    assert ours["out_rows"] <= result["rows"] - result["copies"]
    assert builtin["peak_state_rows"] > ours["peak_state_rows"]
    assert ours["peak_table"] <= 100  # at most one table entry per connection
    assert "ratio" in bench.report(results)
