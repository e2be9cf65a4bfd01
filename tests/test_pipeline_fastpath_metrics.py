"""The hash-aggregate at-most-once measures (pipeline/_fast_metrics.py) equal their
definition (metrics.atmostonce, windows and exact percentiles) on generated decision
tables: several runs, down rows (null rho/entries), crash rows, copies accepted twice,
missing ground truth, ties in ``at``."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from timebound.pipeline import _fast_metrics, metrics

pytestmark = pytest.mark.spark

COLUMNS = "run string, seq long, type string, receiver string, conn string, ts long, " \
          "at long, original boolean, verdict string, rho long, entries long, cls long"


def decisions(seed: int) -> list[tuple]:
    rnd = random.Random(seed)
    rows: list[tuple] = []
    for run in ("a", "b", "c")[: rnd.randint(1, 3)]:
        now = rnd.randint(0, 50)
        for seq in range(rnd.randint(1, 400)):
            now += rnd.choice((0, 0, 1, 3, 20))
            receiver = rnd.choice(("s1", "s2"))
            if rnd.random() < 0.03:
                rows.append((run, seq, "crash", receiver, None, None, now, None, None,
                             None, None, rnd.randint(0, 2)))
                continue
            conn = f"c{rnd.randint(0, 9)}"
            verdict = rnd.choice(("accepted", "accepted", "duplicate", "stale", "early",
                                  "down"))
            down = verdict == "down"
            original = None if run == "c" else rnd.random() < 0.8
            rows.append((run, seq, "msg", receiver, conn, rnd.randint(1, 30) * 3,
                         now, original, verdict, None if down else rnd.randint(1, 64),
                         None if down else rnd.randint(0, 40), rnd.randint(0, 2)))
    return rows


def _collect(frames: list[Any]) -> list[tuple]:
    out = []
    for frame in frames:
        for r in frame.select("run", "protocol", "measure", "value", "t").collect():
            out.append((r["run"], r["protocol"], r["measure"], r["t"], r["value"]))
    return sorted(out, key=lambda x: (x[0], x[1], x[2], -1 if x[3] is None else x[3]))


def test_fast_measures_equal_the_definition(spark: Any) -> None:
    rows = [(f"{seed}{r[0]}", *r[1:]) for seed in range(4) for r in decisions(seed)]
    df = spark.createDataFrame(rows, COLUMNS)
    want = _collect(metrics.atmostonce(df))
    got = _collect(_fast_metrics.atmostonce(df))
    assert [w[:4] for w in want] == [g[:4] for g in got]
    for w, g in zip(want, got):
        assert math.isclose(w[4], g[4], rel_tol=1e-12, abs_tol=1e-12), (w, g)


def test_the_pipeline_uses_the_fast_measures() -> None:
    assert metrics.BY_TABLE["messages"] is _fast_metrics.atmostonce
