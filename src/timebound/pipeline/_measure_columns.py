"""Spark SQL columns of the declared measures (``timebound.measures``): the pipeline's
SQL for a measure is built from its declaration, never written by hand.

- ``aggregate_column``: a measure's partial over a group's rows (a ``COUNT``'s
  ``where`` as a ``CASE WHEN``, null without any ``known`` value; ``SUM`` in doubles,
  as ``avg`` sums; ``MAX``; Spark's exact ``percentile``);
- ``merge_column``: partials of several groups (a column of partials) -> one;
- ``finish_column``: a ratio's ``try_divide`` of its two parts (null over zero: the
  one convention, ``timebound.measures``);
- ``wide``: ``run`` + one column per named measure of a table, each from its
  declaration (the shape ``long_form`` takes);
- ``last_by`` / ``repeated``: the ``LAST_BY`` and ``REPEATED`` measures over a
  table's rows, grouped by given keys (the definition: a window per group ordered by
  ``by``); ``last_by_partial`` / ``last_by_merge`` / ``last_by_finish``: the same
  from per-cell partials with hash aggregates (``max_by``, no sort).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.window import Window

from timebound.measures import Aggregate, Clause, Kind, aggregate

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame


#: The run-wide at-most-once measures of the pipeline, in the order of the table.
ATMOSTONCE_WIDE = ("messages", "originals", "lost", "lifetime_p50", "lifetime_p99",
                   "table_size_max", "table_mean", "lost_rate", "lost_per_accepted")
#: The at-most-once series (declared ``LAST_BY`` measures of one row choice).
ATMOSTONCE_SERIES = ("table_size", "estimate")


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


def _shared(measures: Sequence[Aggregate]) -> tuple[tuple[str, ...], str, str]:
    """The (within, by, among) every given ``LAST_BY`` measure shares."""
    found = {(m.within, m.by, m.among or m.column or "") for m in measures}
    if len(found) != 1 or any(m.kind is not Kind.LAST_BY for m in measures):
        raise ValueError(f"not LAST_BY measures of one row choice: {found}")
    return found.pop()


def _across(measure: Aggregate, column: Column) -> Column:
    return F.sum(column) if measure.across is Kind.SUM else F.max(column)


def last_by(df: DataFrame, measures: Sequence[Aggregate], keys: Sequence[str]) -> DataFrame:
    """``keys`` + one column per ``LAST_BY`` measure (sharing their row choice): each
    group's last row by ``by`` among the rows with ``among``, combined by ``across``."""
    within, by, among = _shared(measures)
    last = Window.partitionBy(*keys, *within).orderBy(_col(by).desc())
    return df.where(_col(among).isNotNull() & _col(by).isNotNull()) \
        .withColumn("_n", F.row_number().over(last)).where(F.col("_n") == 1) \
        .groupBy(*keys).agg(*[_across(m, _col(m.column or "")).alias(m.name)
                              for m in measures])


def last_by_partial(measures: Sequence[Aggregate], name: str) -> list[Column]:
    """A cell's partial of ``LAST_BY`` measures sharing their row choice (the cell's
    rows are of one group): ``name`` (the largest ``by`` among the rows with
    ``among``) and one column per measure (its ``column`` on that row)."""
    _, by, among = _shared(measures)
    order = F.when(_col(among).isNotNull(), _col(by))
    return [F.max(order).alias(name),
            *[F.max_by(_col(m.column or ""), order).alias(m.name) for m in measures]]


def last_by_merge(measures: Sequence[Aggregate], name: str) -> list[Column]:
    """Cells' partials (``last_by_partial``) of one group -> the group's."""
    return [F.max(F.col(name)).alias(name),
            *[F.max_by(F.col(m.name), F.col(name)).alias(m.name) for m in measures]]


def last_by_finish(cells: DataFrame, measures: Sequence[Aggregate], name: str,
                   keys: Sequence[str]) -> DataFrame:
    """Groups' partials (one per group and ``keys``) -> ``keys`` + each measure."""
    return cells.where(F.col(name).isNotNull()).groupBy(*keys).agg(
        *[_across(m, F.col(m.name)).alias(m.name) for m in measures])


def repeated(df: DataFrame, measure: Aggregate, keys: Sequence[str]) -> DataFrame:
    """``keys`` + the ``REPEATED`` measure: the keys (``within``) of its rows that
    occur more than once (no row for ``keys`` without any of its rows)."""
    return df.where(condition(measure.where)).groupBy(*keys, *measure.within).count() \
        .groupBy(*keys).agg(F.sum(F.when(F.col("count") > 1, 1).otherwise(0))
                            .alias(measure.name))
