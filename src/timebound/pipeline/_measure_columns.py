"""Spark SQL columns of the declared measures (``timebound.measures``): the pipeline's
SQL for a measure is built from its declaration, never written by hand.

- ``aggregate_column``: a measure's partial over a group's rows (a ``COUNT``'s
  ``where`` as a ``CASE WHEN``, null without any ``known`` value; ``SUM`` in doubles,
  as ``avg`` sums; ``MAX``; Spark's exact ``percentile``);
- ``merge_column``: partials of several groups (a column of partials) -> one;
- ``finish_column``: a ratio's ``try_divide`` of its two parts (null over zero: the
  one convention, ``timebound.measures``);
- ``wide``: ``run`` + one column per named measure of a table, each from its
  declaration (the shape ``long_form`` takes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from timebound.measures import Aggregate, Clause, Kind, aggregate

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame


#: The run-wide at-most-once measures of the pipeline, in the order of the table.
ATMOSTONCE_WIDE = ("messages", "originals", "lost", "lifetime_p50", "lifetime_p99",
                   "table_size_max", "table_mean", "lost_rate", "lost_per_accepted")


def _col(name: str) -> Column:
    return F.col(f"`{name}`")


def condition(where: Sequence[Clause]) -> Column:
    """SQL of a ``where``: every clause holds (a null value never does)."""
    out = F.lit(True)
    for clause in where:
        column = _col(clause.column)
        test = column.isNotNull()
        if clause.values:
            found = column.isin(*clause.values)
            test = test & (~found if clause.negated else found)
        out = out & test
    return out


def aggregate_column(measure: Aggregate) -> Column:
    """The partial of a (not ratio) measure over the rows of a group."""
    if measure.kind is Kind.COUNT:
        if not measure.where:
            return F.count(F.lit(1))
        hit = F.when(condition(measure.where), 1)
        if measure.known is not None:
            return F.sum(hit.when(_col(measure.known).isNotNull(), 0))
        return F.sum(hit.otherwise(0))
    column = _col(measure.column or "")
    if measure.kind is Kind.SUM:
        return F.sum(column.cast("double"))
    if measure.kind is Kind.MAX:
        return F.max(column)
    if measure.kind is Kind.PERCENTILE:
        return F.percentile(column, F.lit(measure.p))
    raise ValueError(f"{measure.name}: no SQL aggregate of kind {measure.kind.value}")


def merge_column(measure: Aggregate, partial: Column) -> Column:
    """The merge of a column of a measure's partials (a count or sum: their sum)."""
    if measure.kind is Kind.MAX:
        return F.max(partial)
    if measure.kind in (Kind.COUNT, Kind.SUM):
        return F.sum(partial)
    raise ValueError(f"{measure.name}: no SQL merge of kind {measure.kind.value}")


def finish_column(measure: Aggregate, parts: Mapping[str, Column]) -> Column:
    """A measure's value from its parts' columns (``name -> Column``): a ratio's
    ``try_divide`` (null over zero), else the part itself."""
    if measure.kind is not Kind.RATIO:
        return parts[measure.name]
    numerator, denominator = (parts[name] for name in measure.of)
    if measure.times != 1.0:
        numerator = F.lit(measure.times) * numerator
    value = F.try_divide(numerator, denominator)
    return value if measure.per == 1.0 else value / F.lit(measure.per)


def parts_of(protocol: str, names: Sequence[str]) -> list[Aggregate]:
    """The aggregates (not ratios) the named measures need, in first-use order."""
    out: dict[str, Aggregate] = {}
    for name in names:
        measure = aggregate(protocol, name)
        for part in measure.parts if measure.kind is Kind.RATIO else (measure,):
            out.setdefault(part.name, part)
    return list(out.values())


def wide(df: DataFrame, protocol: str, names: Sequence[str]) -> DataFrame:
    """``run`` + one column per named measure of ``df``'s rows, grouped by run."""
    parts = parts_of(protocol, names)
    grouped = df.groupBy("run").agg(*[aggregate_column(p).alias(f"_p{i}")
                                      for i, p in enumerate(parts)])
    columns = {p.name: F.col(f"_p{i}") for i, p in enumerate(parts)}
    return grouped.select("run", *[finish_column(aggregate(protocol, name), columns)
                                   .alias(name) for name in names])
