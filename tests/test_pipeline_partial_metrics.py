"""The at-most-once measures gathered while the operator decides (spark/traces/_partial_metrics)
equal their definition (metrics.atmostonce over the written decision table): several
runs with different options and classes, resilient crashes (down rows: null rho and
entries), duplicates, runs without ground truth; and the driver refuses partials that
do not account for every decision row."""

from __future__ import annotations

import json
import math
import os
from typing import Any

import pytest

from tests.test_pipeline_atmostonce import generated
from tests.test_pipeline_fastpath_metrics import _collect
from tests.test_pipeline_support import write_table
from timebound.adapters.atmostonce import AtMostOnceOptions
from timebound.cli import main
from timebound.pipeline import metrics
from timebound.pipeline.datasets import read_table
from timebound.spark.traces import _atmostonce as atmostonce
from timebound.spark.traces._partial_metrics import Gathered, bucket_width, merge_cell

pytestmark = pytest.mark.spark

OPTIONS = {
    "a": {"estimator": "unlimited", "gc_every": 50, "resilient": True, "beta": 400,
          "latest_every": 100, "classes": 3},
    "b": {"estimator": "fixed", "rho": 40, "gc_every": 7, "classes": 1},
    "c": {"estimator": "limited", "window": 4, "spikes": 1, "p": 2, "classes": 2},
}


def _sorted(rows: list[tuple]) -> list[tuple]:
    return sorted(((r[0], r[1], r[2], r[4], r[3]) for r in rows),
                  key=lambda x: (x[0], x[1], x[2], -1 if x[3] is None else x[3]))


def _same(want: list[tuple], got: list[tuple]) -> None:
    assert [w[:4] for w in want] == [g[:4] for g in got]
    for w, g in zip(want, got):
        assert math.isclose(w[4], g[4], rel_tol=1e-12, abs_tol=1e-12), (w, g)


def _dataset(tmp_path: Any, seed: int) -> str:
    runs = {"a": generated(seed, receivers=3, rows=700),
            "b": generated(seed + 1, rows=500, crashes=False),
            "c": [dict(r, original=None) for r in generated(seed + 2, rows=400,
                                                             crashes=False)]}
    ds = str(tmp_path / f"ds{seed}")
    write_table(ds, "messages", runs)
    return ds


@pytest.mark.parametrize("seed", [3, 11])
def test_gathered_measures_equal_the_definition(spark: Any, tmp_path: Any, seed: int) -> None:
    df = read_table(spark, _dataset(tmp_path, seed), "messages")
    options = {run: AtMostOnceOptions.from_values(v) for run, v in OPTIONS.items()}
    gather = Gathered.create(spark)
    out = str(tmp_path / "decided")
    atmostonce.operate(df, options, gather=gather).write.parquet(out)
    decided = spark.read.parquet(out)
    rows = decided.count()
    assert gather.usable(rows)
    assert len(gather.accumulator.value) == 3 * 3 + 2 * 1 + 2 * 2  # (run, receiver, cls)
    want = _collect(metrics.atmostonce(decided))
    got = _sorted(gather.rows())
    _same(want, got)
    assert any(m[2] == "at_most_once_violations" for m in got)
    assert {m[0] for m in got if m[2] == "lost_rate"} == {"a", "b"}  # c: no ground truth
    # partials that miss a row, or a group outside its run's span, are not used
    assert not gather.usable(rows + 1)
    gather.spans["a"] = (gather.spans["a"][0] + 1, gather.spans["a"][1])
    assert not gather.usable(rows)


def test_a_duplicate_accepted_twice_is_counted(spark: Any, tmp_path: Any) -> None:
    """A violation the core never makes: feed the gatherer a hand-made decision table."""
    import pyarrow as pa

    from timebound.spark.traces._partial_metrics import GroupGatherer

    table = pa.table({
        "run": ["r"] * 4, "seq": [1, 2, 3, 4], "type": ["msg"] * 4,
        "receiver": ["s"] * 4, "conn": ["x", "x", "y", "x"], "ts": [5, 5, 5, 6],
        "at": [10, 11, 12, 13], "original": [True, False, True, True],
        "verdict": ["accepted", "accepted", "accepted", "stale"],
        "rho": pa.array([3, 3, None, 3], pa.int64()),
        "entries": pa.array([1, 1, None, 2], pa.int64()), "cls": [0] * 4})
    g = GroupGatherer((10, 13))
    g.add(table.slice(0, 2))
    g.add(table.slice(2))  # a cell continued across batches
    part = g.finish()
    assert part.violations == 1 and part.accepted == 3 and part.rows == 4
    assert part.lo == 10 and part.hi == 13
    assert sorted(part.joint) == [(5, "accepted", 1), (6, "accepted", 1),
                                  (7, "accepted", 1), (7, "stale", 1)]
    assert bucket_width(10, 13) == 1  # a bucket per `at`
    # then the (seq, value) pairs of table_size, estimate, estimate_final
    assert part.cells[12] == [1, 1, 0, 1, None, None, 0, None, None, None]
    assert part.cells[13] == [1, 1, 1, 0, 2, 2.0, 1, (4, 2), (4, 3), (4, 3)]


def test_merge_cell_keeps_the_value_at_the_largest_seq() -> None:
    a = [2, None, None, 1, 5, 9.0, 2, (7, 5), (7, 30), (7, 30)]
    b = [1, 1, 0, 0, None, None, 0, None, None, (3, 20)]
    assert merge_cell(a, b) == [3, 1, 0, 1, 5, 9.0, 2, (7, 5), (7, 30), (7, 30)]
    assert merge_cell(b, a) == merge_cell(a, b)


def test_the_pipeline_gathers_its_measures(spark: Any, tmp_path: Any) -> None:
    """``timebound pipeline``'s metrics table equals the definition on its own decision
    table, and it used the gathered measures (no scan of the decision table for them)."""
    import pyarrow.parquet as pq

    ds = _dataset(tmp_path, 5)
    out = str(tmp_path / "out")
    assert main(["pipeline", ds, "--out", out, "--estimator", "unlimited",
                 "--gc-every", "50", "--resilient", "--beta", "400",
                 "--latest-every", "100", "--classes", "3"]) == 0
    with open(os.path.join(out, "summary.json")) as handle:
        summary = json.load(handle)
    assert summary["protocols"]["atmostonce"]["measures"] == "gathered while deciding"
    decided = spark.read.parquet(os.path.join(out, "messages"))
    want = _collect(metrics.atmostonce(decided))
    table = pq.read_table(os.path.join(out, "metrics")).to_pylist()
    _same(want, _sorted([tuple(r.values()) for r in table]))


def test_lifetime_counts_dense_and_sparse_equal_a_counter() -> None:
    import random
    from collections import Counter

    import numpy as np

    from timebound.spark.traces._partial_metrics import _counts

    rnd = random.Random(7)
    names = ["accepted", "stale", None]
    for spread in (10, 10**12, 2**62):  # one bincount; a sort; a lexsort (no one key)
        lifetimes = [rnd.randint(-spread, spread) // 7 * 7 for _ in range(500)]
        codes = [rnd.randrange(3) for _ in range(500)]
        want = Counter((lt, names[c]) for lt, c in zip(lifetimes, codes))
        assert _counts(np.array(lifetimes), np.array(codes), names) == want


def test_ratios_over_zero_are_null_in_both(spark: Any) -> None:
    """A run whose every original copy was refused down (originals 0) and that accepted
    nothing: lost_rate and lost_per_accepted are absent (try_divide), not an error."""
    from types import SimpleNamespace

    import pyarrow as pa

    from timebound.spark.traces._partial_metrics import GroupGatherer

    table = pa.table({
        "run": ["z"] * 3, "seq": [1, 2, 3], "type": ["msg"] * 3, "receiver": ["s"] * 3,
        "conn": ["x", "y", "x"], "ts": [5, 6, 5], "at": [10, 11, 12],
        "original": [True, True, False], "verdict": ["down", "down", "stale"],
        "rho": pa.array([None, None, 9], pa.int64()),
        "entries": pa.array([None, None, 0], pa.int64()), "cls": [0] * 3})
    g = GroupGatherer((10, 12))
    g.add(table)
    gathered = Gathered(SimpleNamespace(value={("z", "s", 0): g.finish()}),  # type: ignore[arg-type]
                        {"z": (10, 12)})
    assert gathered.usable(3)
    got = _sorted(gathered.rows())
    want = _collect(metrics.atmostonce(spark.createDataFrame(table)))
    _same(want, got)
    assert not [r for r in got if r[2] in ("lost_rate", "lost_per_accepted")]
    assert ("z", "atmostonce", "originals", None, 0.0) in got
