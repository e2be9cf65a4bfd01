"""What the metrics definitions (``metrics``) and their sort-free at-most-once form
(``_fast_metrics``) share: the series' resolution and the long shape of the metrics
table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

#: Points per time series (per run).
BUCKETS = 60


def long_form(wide: DataFrame, protocol: str) -> DataFrame:
    """``run`` + one column per measure -> the metrics shape (nulls dropped)."""
    measures = [c for c in wide.columns if c != "run"]
    if not measures:
        return wide.select("run").limit(0).select(*shape(protocol))
    # measure names hold dots, which unpivot would read as struct fields: go by index
    cast = wide.select("run", *[F.col(f"`{m}`").cast("double").alias(f"_m{i}")
                                for i, m in enumerate(measures)])
    long = cast.unpivot(["run"], [f"_m{i}" for i in range(len(measures))], "_k", "value")
    names = F.create_map(*[F.lit(x) for i, m in enumerate(measures) for x in (f"_m{i}", m)])
    return long.where(F.col("value").isNotNull()).select(
        "run", F.lit(protocol).alias("protocol"), F.element_at(names, F.col("_k"))
        .alias("measure"), "value", F.lit(None).cast("long").alias("t"))


def shape(protocol: str) -> list[Column]:
    return [F.col("run"), F.lit(protocol).alias("protocol"), F.lit("").alias("measure"),
            F.lit(0.0).alias("value"), F.lit(None).cast("long").alias("t")]
