"""``causal_merge`` on a streaming DataFrame: each merger's arrivals to its
deterministic order as they come, with Spark's timers (causal merge paper, section 4:
a message is delivered when its merger's clock passes ``r + c + delta + epsilon``).

Keyed by the ``merger`` column, ``transformWithStateInPandas`` (RocksDB) runs
``timebound stream merge``'s engine (``timebound.spark.traces``' ``MergeProcessor``:
one ``Merger`` of the core per key through the replay's ``MergeAdapter``, the timers,
one state value per key); this module only adapts the caller's rows to it. Spark hands
a key's rows of a micro-batch as pandas frames: the role columns, the row hash and the
caller's whole row (a struct column, each row a dict). ``CallerMergeProcessor`` puts
them in the batch operator's decision order with one stable Arrow sort (``at``, then
``order``, then ``TIES`` -- ``proc``, ``msg``, ``r``, ``c``, as ``_merge`` breaks ties
--, nulls first, ids as strings, then the row hash), and each arrival row comes out
once, when its fate is known: a ``late`` or ``duplicate`` arrival at once, a buffered
one when it is delivered -- its row waits in the key's state until then (one entry
per buffered message: state bounded by the merger's buffer). ``position`` is the row's
place in its merger's output, as in the batch operator; ``late_arrival`` marks a row
whose ``at`` was behind its merger's clock (taken at the clock). The output frame is
built column by column; the JVM unpacks the row struct into the caller's columns.

The caller's columns go through Python and back as they are, with one exception
pandas would otherwise lose: a NaN in a top-level float or double column comes back
NaN, not null (a flag per such column, ``NAN``, computed by the JVM, carried in the
row and applied by the JVM); a NaN nested in a struct, array or map comes back null.

``timers="processing"`` (default) moves a merger's clock with the wall clock between
arrivals (``tick``: the wall-clock length of one ``at`` tick), so a buffered message
is delivered once its deadline has passed even when no new arrival comes;
``"none"``: only arrivals move it, and the rows are the batch operator's minus those
still buffered. Event-time timers are not offered (the processor's docstring says why).

Restart safety (``_lock``): the options, ``timers`` and ``tick``, the role columns
with their types and the engine (``ENGINE``, ``columnar``) are locked into the query's
checkpoint at its first start; a restart that differs is refused before an arrival or
a timer is handled -- so is a checkpoint of the retired ``row`` engine
(``transformWithState``), whose lock names it: start on a new checkpoint. The lock
token is the first column of the operator's input, where the query's plan text names
it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, DoubleType, FloatType, StructField, StructType

from timebound.adapters.merge import MergeOptions
from timebound.durations import parse_duration
from timebound.errors import SchemaError, TimeboundError, TraceError, UsageError
from timebound.spark import _lock
from timebound.spark._check import PREFIX, TABLE, _hashable, col
from timebound.spark._groups import Role
from timebound.spark._merge import _ties, added_fields
from timebound.spark._stream import use_rocksdb
from timebound.spark.traces import (
    FILE_COLUMN,
    LINE_COLUMN,
    MERGE_ENGINE,
    TIME_MODES,
    TIMERS,
    Arrival,
    MergeProcessor,
    Produced,
    prefer_exact_integers,
)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

#: The caller's row, carried whole; the row hash (last tie-break); the merger key.
ROW, TIE, KEY = PREFIX + "row", PREFIX + "tie", PREFIX + "merger"
#: A top-level float or double column's NaN flag, carried in the row (``NAN`` + index).
NAN = PREFIX + "nan_"
#: The engine a merge stream runs, locked into its checkpoint (a checkpoint of the
#: retired ``row`` engine, ``transformWithState``, is refused: the lock differs).
ENGINE = MERGE_ENGINE


def timer_options(timers: object, tick: object) -> tuple[str, int]:
    """``timers`` and ``tick`` (in microseconds), checked before any Spark job."""
    if timers not in TIMERS:
        raise UsageError("timers", f"expected one of {', '.join(map(repr, TIMERS))}, "
                                   f"got {timers!r}")
    return str(timers), parse_duration(tick, "tick")


class _Names(dict[str, str]):
    """A row whose every field holds its own name: what ``_ties`` reads, named."""

    def get(self, key: str, default: Any = None) -> str:
        return key


#: The batch operator's tie-breaks after ``at`` and ``order`` (``_ties``), by role.
TIES: tuple[str, ...] = tuple(_ties(_Names()))


class CallerMergeProcessor(MergeProcessor):
    """``MergeProcessor`` over the caller's rows (module docstring)."""

    carries = True

    def __init__(self, options: MergeOptions, roles: tuple[Role, ...], timers: str,
                 tick_us: int, token: str) -> None:
        super().__init__(options, timers, tick_us)
        #: replay field -> kind, in the order of the working columns
        self.fields = {role.keyword: role.kind for role in roles
                       if role.column is not None and role.keyword not in ("merger", "order")}
        self.columns = {role.keyword: role.column for role in roles
                        if role.column is not None}
        self.order = "order" in self.columns
        self.token = token
        self.checked = False

    def merger_name(self, key: tuple[Any, ...]) -> str:
        return str(key[0])

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any
                        ) -> Iterator[Any]:
        self._restart_checked()
        yield from super().handleInputRows(key, rows, timerValues)

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any
                           ) -> Iterator[Any]:
        self._restart_checked()
        yield from super().handleExpiredTimer(key, timerValues, expiredTimerInfo)

    def _restart_checked(self) -> None:
        """The checkpoint's lock agrees (``_lock``), before anything is decided."""
        if not self.checked:
            _lock.in_task(self.token)
            self.checked = True

    def arrivals(self, key: tuple[Any, ...], frame: Any) -> list[Arrival]:
        """The frame's rows in the batch operator's decision order: ``at``, ``order``,
        ``proc``, ``msg``, ``r``, ``c`` (nulls first; ids as strings), the row hash --
        one stable Arrow sort. Columns by position (``merge`` selects them)."""
        start = 2  # the lock token, the merger key
        values = {}
        for i, (field, kind) in enumerate(self.fields.items()):
            array = pa.array(_objects(frame.iloc[:, start + i]), from_pandas=True)
            if kind == "id" and not pa.types.is_string(array.type) \
                    and not pa.types.is_null(array.type):
                array = pc.cast(array, pa.string())
            values[field] = array
        start += len(self.fields)
        if self.order:
            values["order"] = pa.array(_objects(frame.iloc[:, start]), from_pandas=True)
            start += 1
        tie = pa.array(_objects(frame.iloc[:, start]), from_pandas=True)
        rows = frame.iloc[:, start + 1].tolist()
        keys = {name: values[name] for name in ("at", "order", *TIES) if name in values}
        keys[TIE] = tie
        order = pc.sort_indices(pa.table(keys), sort_keys=[(k, "ascending") for k in keys],
                                null_placement="at_start").to_pylist()
        data = pa.table({f: values[f] for f in self.fields}).take(order).to_pylist()
        out: list[Arrival] = []
        for index, (fields, i) in enumerate(zip(data, order, strict=True)):
            fed = {k: v for k, v in fields.items() if v is not None}
            fed.update({FILE_COLUMN: TABLE, LINE_COLUMN: index + 1})
            out.append((fed, rows[i]))
        return out

    def output(self, key: tuple[Any, ...], rows: list[Produced]) -> Any:
        import pandas as pd

        return pd.DataFrame({
            ROW: [carried for _, carried, _, _ in rows],
            "action": [produced["action"] for produced, _, _, _ in rows],
            "time": pd.array([produced["time"] for produced, _, _, _ in rows],
                             dtype="int64"),
            "position": pd.array([position for _, _, _, position in rows], dtype="int64"),
            "late_arrival": [bool(late) for _, _, late, _ in rows]})

    def refused(self, exc: TraceError) -> TimeboundError:
        return SchemaError(TABLE, self.columns.get(exc.field, exc.field), exc.reason)


def _objects(column: Any) -> Any:
    """A pandas column Arrow reads with its nulls (``pd.NA`` in an object column: None)."""
    return column.where(column.notna(), None) if column.dtype == object else column


def merge(df: DataFrame, options: MergeOptions, roles: tuple[Role, ...], timers: str,
          tick_us: int) -> DataFrame:
    """Every arrival row of the stream ``df``, all its columns, plus ``action``,
    ``time``, ``position`` and ``late_arrival``, each emitted once its fate is known."""
    use_rocksdb(df)
    prefer_exact_integers(df)
    by_keyword = {role.keyword: role for role in roles if role.column is not None}
    hashed = [col(f.name) for f in df.schema.fields if _hashable(f.dataType)]
    tie = F.xxhash64(*hashed) if hashed else F.lit(0).cast("long")
    floating = [f.name for f in df.schema.fields
                if isinstance(f.dataType, FloatType | DoubleType)]
    flags = [NAN + str(i) for i in range(len(floating))]
    # pandas reads a NaN and a null alike on the way back: the JVM tells them apart
    row = F.struct(*[col(name) for name in df.columns],
                   *[F.isnan(col(name)).alias(flag) for name, flag in zip(floating, flags)]
                   ).alias(ROW)
    row_schema = StructType([*df.schema.fields,
                             *[StructField(flag, BooleanType(), True) for flag in flags]])
    working = [col(by_keyword["merger"].column).cast("string").alias(KEY)]
    # the role columns in the processor's order: its fields, then ``order``
    working += [col(role.column).alias(PREFIX + "f_" + role.keyword)
                for role in by_keyword.values() if role.keyword not in ("merger", "order")]
    if "order" in by_keyword:
        working.append(col(by_keyword["order"].column).alias(PREFIX + "f_order"))
    fields: dict[str, Any] = {**dataclasses.asdict(options), "timers": timers,
                              "tick_us": tick_us}
    for role in roles:
        fields[role.keyword] = None if role.column is None else [
            role.column, df.schema[role.column].dataType.simpleString()]
    token = _lock.register(df.sparkSession, "causal_merge", {**fields, "engine": ENGINE})
    processor = CallerMergeProcessor(options, roles, timers, tick_us, token)
    # the token first among the columns: Spark's plan text names it (``_lock``)
    keyed = df.select(F.lit(True).alias(token), *working, tie.alias(TIE), row)
    out_schema = StructType([StructField(ROW, row_schema, True), *added_fields(),
                             StructField("late_arrival", BooleanType(), True)])
    merged = keyed.groupBy(KEY).transformWithStateInPandas(
        processor, out_schema, "Append", TIME_MODES[timers])
    restored = {name: F.when(F.col(ROW).getField(flag), F.lit(float("nan")).cast(
        df.schema[name].dataType)).otherwise(F.col(ROW).getField(name))
        for name, flag in zip(floating, flags)}
    return merged.select(
        *[restored.get(name, F.col(ROW).getField(name)).alias(name) for name in df.columns],
        *[F.col(f.name) for f in added_fields()], F.col("late_arrival"))
