"""The pipeline's ``metrics`` table, computed with Spark SQL from the decision tables.

Columns: run, protocol, measure, value (double), t (int64; null unless the row is one
point of a time series, then the start of its bucket of ``at``). One function per
decision table; each returns a DataFrame of that shape. Every measure declared in
``timebound.measures`` (the at-most-once run-wide ones, ``late_rate``, the stability
counts, sums, ratios and latency statistics) is built from its declaration
(``_measure_columns``); a ratio over zero is null, and a null measure has no row.
Measures:

- atmostonce: ``messages``, ``verdict.<v>``, ``lost`` / ``originals`` / ``lost_rate``
  / ``lost_per_accepted`` (the adaptive paper's L/A), where the dataset has ground
  truth (``original``) -- defined once in ``timebound.contract`` and computed the same
  way by the simulator: ``lost`` = original rows refused ``stale`` or ``early``,
  ``originals`` = original rows not ``down``; ``table_mean`` (mean table size
  seen by messages), ``at_most_once_violations`` (copies of one (receiver, conn, ts)
  accepted more than once: must be 0),
  ``lifetime_p50/p99`` (at - ts), ``estimate_final`` (largest estimate in force on a
  receiver's last message), ``table_size_max``; series ``table_size`` (the tables'
  sizes on their last row in the bucket, summed over the receivers) and ``estimate``
  (the largest estimate in force on those rows). ``estimate_final``,
  ``at_most_once_violations`` and the series are declared too (``LAST_BY``,
  ``REPEATED``).
- causal: ``events``, ``events.<type>``, ``c_max``, ``c_mean``.
- merge: ``action.<a>``, ``late_rate``, ``buffering_p50/p90/p99/max/mean`` (deliver
  time - first arrival).
- slotted: ``delivered.<kind>``, ``discarded.<kind>``, ``discard.<reason>``,
  ``delay_mean/p50/p99.<kind>`` (rows), ``buffer_p50/p99/max``.
- stability: ``sent``, ``stable``, ``acks``, ``ack_bytes``, ``ack_bytes_per_ack``,
  ``recv.delivered/ignored``, ``latency_mean/p50/p99/max`` (ticks from a message's
  send to the row that made it stable).
"""

from __future__ import annotations

from functools import reduce
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from timebound.measures import aggregate
from timebound.pipeline import _fast_metrics, _measure_columns
from timebound.spark.traces import BUCKETS as BUCKETS
from timebound.spark.traces import long_form as _long
from timebound.spark.traces.schemas import METRICS

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession



def _counts(df: DataFrame, column: str, prefix: str, protocol: str) -> DataFrame:
    return df.where(F.col(column).isNotNull()).groupBy("run", column).count().select(
        "run", F.lit(protocol).alias("protocol"),
        F.concat(F.lit(prefix), F.col(column)).alias("measure"),
        F.col("count").cast("double").alias("value"), F.lit(None).cast("long").alias("t"))


def _pct(column: str, p: float) -> Column:
    return F.percentile(F.col(column), F.lit(p))


def atmostonce(d: DataFrame) -> list[DataFrame]:
    p = "atmostonce"
    msgs = d.where(F.col("type") == "msg")
    lifetimes = msgs.withColumn("lifetime", F.col("at") - F.col("ts"))
    wide = _measure_columns.wide(lifetimes, p, _measure_columns.ATMOSTONCE_WIDE)
    twice = _measure_columns.repeated(msgs, aggregate(p, "at_most_once_violations"),
                                      ("run",))
    final = _measure_columns.last_by(msgs, [aggregate(p, "estimate_final")], ("run",))
    span = msgs.groupBy("run").agg(F.min("at").alias("_lo"), F.max("at").alias("_hi"))
    width = F.greatest(F.lit(1), F.ceil((F.col("_hi") - F.col("_lo") + 1) / BUCKETS))
    bucketed = msgs.join(F.broadcast(span), "run").withColumn(
        "t", F.col("_lo") + F.floor((F.col("at") - F.col("_lo")) / width) * width)
    names = _measure_columns.ATMOSTONCE_SERIES
    sizes = _measure_columns.last_by(bucketed, [aggregate(p, m) for m in names], ("run", "t"))
    series = sizes.unpivot(["run", "t"], list(names), "measure", "value") \
        .select("run", F.lit(p).alias("protocol"), "measure",
                F.col("value").cast("double").alias("value"), F.col("t").cast("long"))
    return [_long(wide, p), _long(final, p), _long(twice, p),
            _counts(msgs, "verdict", "verdict.", p), series]


def causal(d: DataFrame) -> list[DataFrame]:
    p = "causal"
    wide = d.groupBy("run").agg(F.count("*").alias("events"), F.max("c").alias("c_max"),
                                F.avg("c").alias("c_mean"))
    return [_long(wide, p), _counts(d, "type", "events.", p)]


def merge(d: DataFrame) -> list[DataFrame]:
    p = "merge"
    delivered = d.where(F.col("action") == "deliver") \
        .withColumn("buffering", F.col("time") - F.col("at"))
    wide = _measure_columns.wide(d, p, ("late_rate",))
    buffering = delivered.groupBy("run").agg(
        _pct("buffering", 0.5).alias("buffering_p50"),
        _pct("buffering", 0.9).alias("buffering_p90"),
        _pct("buffering", 0.99).alias("buffering_p99"),
        F.max("buffering").alias("buffering_max"),
        F.avg("buffering").alias("buffering_mean"))
    return [_long(wide, p), _long(buffering, p), _counts(d, "action", "action.", p)]


def slotted(d: DataFrame) -> list[DataFrame]:
    p = "slotted"
    delivered = d.where(F.col("action") == "deliver") \
        .withColumn("delay", F.col("step") - F.col("arrived"))
    kinds = delivered.groupBy("run", "kind").agg(
        F.avg("delay").alias("delay_mean"), _pct("delay", 0.5).alias("delay_p50"),
        _pct("delay", 0.99).alias("delay_p99"))
    per_kind = kinds.unpivot(["run", "kind"], ["delay_mean", "delay_p50", "delay_p99"],
                             "m", "value").select(
        "run", F.lit(p).alias("protocol"),
        F.concat(F.col("m"), F.lit("."), F.col("kind")).alias("measure"),
        F.col("value").cast("double"), F.lit(None).cast("long").alias("t"))
    buffer = d.groupBy("run").agg(_pct("buffered", 0.5).alias("buffer_p50"),
                                  _pct("buffered", 0.99).alias("buffer_p99"),
                                  F.max("buffered").alias("buffer_max"))
    return [per_kind, _long(buffer, p),
            _counts(delivered, "kind", "delivered.", p),
            _counts(d.where(F.col("action") == "discard"), "kind", "discarded.", p),
            _counts(d, "reason", "discard.", p)]


def stability(d: DataFrame) -> list[DataFrame]:
    p = "stability"
    sends = d.where(F.col("type") == "send").select(
        "run", "node", "ts", F.col("at").alias("sent_at"))
    made_stable = d.where(F.col("stable").isNotNull()).select(
        "run", "node", F.col("at").alias("stable_at"), F.explode("stable").alias("ts"))
    latency = made_stable.join(sends, ["run", "node", "ts"]) \
        .withColumn("latency", F.col("stable_at") - F.col("sent_at"))
    lat = _measure_columns.wide(latency, p, ("stable", "latency_mean", "latency_p50",
                                              "latency_p99", "latency_max"))
    wide = _measure_columns.wide(d, p, ("sent", "acks", "ack_bytes", "recv.delivered",
                                        "recv.ignored", "ack_bytes_per_ack"))
    return [_long(wide, p), _long(lat, p)]


#: Each table's measures as defined here.
DEFINITIONS = {"messages": atmostonce, "events": causal, "arrivals": merge,
               "channel": slotted, "acks": stability}
#: What the pipeline runs: the definitions, but the at-most-once measures without
#: sorts (``_fast_metrics``, tested equal to ``atmostonce`` above).
BY_TABLE = {**DEFINITIONS, "messages": _fast_metrics.atmostonce}


def metrics(spark: SparkSession, decisions: dict[str, DataFrame]) -> DataFrame:
    """The metrics table of every decision table given (``table -> DataFrame``)."""
    parts = [part for table, df in decisions.items() for part in BY_TABLE[table](df)]
    empty = spark.createDataFrame([], METRICS)
    frames = [part.select(*METRICS.names) for part in parts]
    return reduce(lambda a, b: a.unionByName(b), frames, empty)
