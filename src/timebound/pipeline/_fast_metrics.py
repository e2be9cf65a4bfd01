"""The at-most-once measures of ``metrics.atmostonce`` with hash aggregates only.

``metrics.atmostonce`` is the definition (kept, and tested equal to this on generated
decision tables: tests/test_pipeline_fastpath_metrics.py). It sorts the whole table
twice (two windows ``row_number() over (... order by seq desc)``) and runs exact
percentiles over every row. Here the same numbers come from:

- one aggregate per cell (run, receiver, cls, time bucket ``t``): the partial of every
  declared run-wide measure, and of the ``LAST_BY`` ones (``estimate_final``, the
  series) the *last* row's values by ``seq`` with ``max_by`` (seq is unique within a
  run, so "last" is the same row the windows pick); the run-wide measures, the final
  estimate and the series are their declared merges of the cells (a few thousand
  rows);
- the lifetime percentiles from a histogram ``(run, at - ts) -> count`` (summed from
  one ``(run, at - ts, verdict) -> count`` table, which gives the verdict counts too), with
  ``percentile(value, p, frequency)`` (exact; the same interpolation);
- the at-most-once violations (``REPEATED``) exactly as the definition.

The per-run span of ``at``, the cells and the (lifetime, verdict) counts are each
read by several measures; the optimizer would prune each reader's copy differently and
Spark would scan and shuffle once per reader, so each is materialized once
(``localCheckpoint``: small tables, kept in the block store until unreachable).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from timebound.measures import Kind, aggregate
from timebound.pipeline._measure_columns import ATMOSTONCE_SERIES as SERIES
from timebound.pipeline._measure_columns import ATMOSTONCE_WIDE as AMO_WIDE
from timebound.pipeline._measure_columns import (
    aggregate_column,
    finish_column,
    last_by_finish,
    last_by_merge,
    last_by_partial,
    merge_column,
    parts_of,
    repeated,
)
from timebound.spark.traces import BUCKETS, long_form

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame


def atmostonce(d: DataFrame) -> list[DataFrame]:
    p = "atmostonce"
    msgs = d.where(F.col("type") == "msg")
    # materialized once: read by several measures (see the module's docstring)
    span = msgs.groupBy("run").agg(F.min("at").alias("_lo"), F.max("at").alias("_hi")) \
        .localCheckpoint()
    width = F.greatest(F.lit(1), F.ceil((F.col("_hi") - F.col("_lo") + 1) / BUCKETS))
    bucketed = msgs.join(F.broadcast(span), "run").withColumn(
        "t", F.col("_lo") + F.floor((F.col("at") - F.col("_lo")) / width) * width)
    series = [aggregate(p, m) for m in SERIES]
    final_m = [aggregate(p, "estimate_final")]
    # each cell holds the partial of every declared run-wide measure (but the
    # percentiles: from the histogram below), merged per run, then finished
    parts = [m for m in parts_of(p, AMO_WIDE) if m.kind is not Kind.PERCENTILE]
    cells = bucketed.groupBy("run", "receiver", "cls", "t").agg(
        *[aggregate_column(m).alias(f"_p{i}") for i, m in enumerate(parts)],
        *last_by_partial(series, "_series_by"),
        *last_by_partial(final_m, "_final_by"),
    ).localCheckpoint()
    # one scan for the lifetime histogram and the verdict counts (both sums of this)
    joint = msgs.groupBy("run", (F.col("at") - F.col("ts")).alias("lifetime"), "verdict") \
        .count().localCheckpoint()
    hist = joint.groupBy("run", "lifetime").agg(F.sum("count").alias("count"))
    verdicts = joint.where(F.col("verdict").isNotNull()).groupBy("run", "verdict").agg(
        F.sum("count").alias("count")).select(
        "run", F.lit(p).alias("protocol"),
        F.concat(F.lit("verdict."), F.col("verdict")).alias("measure"),
        F.col("count").cast("double").alias("value"), F.lit(None).cast("long").alias("t"))
    pct = hist.groupBy("run").agg(*[
        F.percentile(F.col("lifetime"), F.lit(aggregate(p, name).p), F.col("count"))
        .alias(name) for name in ("lifetime_p50", "lifetime_p99")])
    merged = cells.groupBy("run").agg(
        *[merge_column(m, F.col(f"_p{i}")).alias(f"_p{i}") for i, m in enumerate(parts)]
    ).join(pct, "run", "left")
    columns = {m.name: F.col(f"_p{i}") for i, m in enumerate(parts)}
    columns.update({name: F.col(name) for name in ("lifetime_p50", "lifetime_p99")})
    wide = merged.select("run", *[finish_column(aggregate(p, name), columns).alias(name)
                                  for name in AMO_WIDE])
    # a cell is one group's rows in one bucket: the series' group partials as they are
    groups = cells.groupBy("run", *final_m[0].within).agg(
        *last_by_merge(final_m, "_final_by"))
    final = last_by_finish(groups, final_m, "_final_by", ("run",))
    twice = repeated(msgs, aggregate(p, "at_most_once_violations"), ("run",))
    sizes = last_by_finish(cells, series, "_series_by", ("run", "t"))
    rows = sizes.unpivot(["run", "t"], list(SERIES), "measure", "value") \
        .select("run", F.lit(p).alias("protocol"), "measure",
                F.col("value").cast("double").alias("value"), F.col("t").cast("long"))
    return [long_form(wide, p), long_form(final, p),
            long_form(twice, p), verdicts,
            rows]
