"""``causal_merge`` on a streaming DataFrame: each merger's arrivals to its
deterministic order as they come, with Spark's timers (causal merge paper, section 4:
a message is delivered when its merger's clock passes ``r + c + delta + epsilon``).

Keyed by the ``merger`` column, ``transformWithState`` (RocksDB) runs
``timebound stream merge``'s processor (``timebound.spark.traces``' ``MergeProcessor``:
one ``Merger`` of the core per key through the replay's ``MergeAdapter``, the timers,
the state); this module only adapts the caller's rows to it. A micro-batch's arrivals
of a key go in the batch operator's decision order (``at``, then ``order``, ``proc``,
``msg``, ``r``, ``c``, the row hash) and each arrival row comes out once, when its fate
is known: a ``late`` or ``duplicate`` arrival at once, a buffered one when it is
delivered -- its row waits in the key's ``MapState`` until then (one entry per
buffered message: state bounded by the merger's buffer). ``position`` is the row's
place in its merger's output, as in the batch operator; ``late_arrival`` marks a row
whose ``at`` was behind its merger's clock (taken at the clock).

``timers="processing"`` (default) moves a merger's clock with the wall clock between
arrivals (``tick``: the wall-clock length of one ``at`` tick), so a buffered message
is delivered once its deadline has passed even when no new arrival comes;
``"none"``: only arrivals move it, and the rows are the batch operator's minus those
still buffered. Event-time timers are not offered (the processor's docstring says why).

Restart safety (``_lock``): the options, ``timers`` and ``tick``, the role columns
with their types and the engine are locked into the query's checkpoint at its first
start; a restart that differs is refused before an arrival or a timer is handled.
The lock token is the first column of the operator's input, where the query's plan
text names it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, StructField, StructType

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
    TIME_MODES,
    TIMERS,
    Arrival,
    MergeProcessor,
)

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

#: The caller's row, carried whole; the row hash (last tie-break); the merger key.
ROW, TIE, KEY = PREFIX + "row", PREFIX + "tie", PREFIX + "merger"
#: The engine a merge stream runs, locked into its checkpoint.
ENGINE = "row"


def timer_options(timers: object, tick: object) -> tuple[str, int]:
    """``timers`` and ``tick`` (in microseconds), checked before any Spark job."""
    if timers not in TIMERS:
        raise UsageError("timers", f"expected one of {', '.join(map(repr, TIMERS))}, "
                                   f"got {timers!r}")
    return str(timers), parse_duration(tick, "tick")


def output_schema(schema: StructType) -> StructType:
    return StructType([*schema.fields, *added_fields(),
                       StructField("late_arrival", BooleanType(), True)])


def _id(value: Any) -> Any:
    return value if value is None or isinstance(value, str) else str(value)


def _nulls_first(value: Any) -> tuple[bool, Any]:
    return (value is not None, value)


class CallerMergeProcessor(MergeProcessor):
    """``MergeProcessor`` over the caller's rows (module docstring)."""

    def __init__(self, options: MergeOptions, roles: tuple[Role, ...], timers: str,
                 tick_us: int, row_schema: StructType, token: str) -> None:
        super().__init__(options, timers, tick_us)
        #: replay field -> (working column, kind); the caller's column (for errors)
        self.fields = {role.keyword: (PREFIX + "f_" + role.keyword, role.kind)
                       for role in roles if role.column is not None
                       and role.keyword not in ("merger", "order")}
        self.columns = {role.keyword: role.column for role in roles
                        if role.column is not None}
        self.order = "order" in self.columns
        self.pending_schema = StructType([StructField("row", row_schema, True),
                                          StructField("late", BooleanType(), True)])
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

    def arrivals(self, key: tuple[Any, ...], rows: list[Any]) -> list[Arrival]:
        decoded = []
        for row in rows:
            data = {field: (_id(row[column]) if kind == "id" else row[column])
                    for field, (column, kind) in self.fields.items()}
            order = row[PREFIX + "f_order"] if self.order else None
            sort_key = (_nulls_first(data["at"]), _nulls_first(order),
                        *map(_nulls_first, _ties(data)), row[TIE])
            decoded.append((sort_key, data, row[ROW]))
        decoded.sort(key=lambda item: item[0])
        out: list[Arrival] = []
        for index, (_, data, caller) in enumerate(decoded):
            fed = {k: v for k, v in data.items() if v is not None}
            fed.update({FILE_COLUMN: TABLE, LINE_COLUMN: index + 1})
            out.append((fed, caller))
        return out

    def output(self, key: tuple[Any, ...], produced: dict[str, Any], carried: Any,
               late: bool, position: int) -> dict[str, Any]:
        data = carried.asDict() if hasattr(carried, "asDict") else dict(carried)
        data.update(action=produced["action"], time=produced["time"], position=position,
                    late_arrival=late)
        return data

    def refused(self, exc: TraceError) -> TimeboundError:
        return SchemaError(TABLE, self.columns.get(exc.field, exc.field), exc.reason)


def merge(df: DataFrame, options: MergeOptions, roles: tuple[Role, ...], timers: str,
          tick_us: int) -> DataFrame:
    """Every arrival row of the stream ``df``, all its columns, plus ``action``,
    ``time``, ``position`` and ``late_arrival``, each emitted once its fate is known."""
    use_rocksdb(df)
    by_keyword = {role.keyword: role for role in roles if role.column is not None}
    hashed = [col(f.name) for f in df.schema.fields if _hashable(f.dataType)]
    tie = F.xxhash64(*hashed) if hashed else F.lit(0).cast("long")
    row = F.struct(*[col(name) for name in df.columns]).alias(ROW)
    working = [col(by_keyword["merger"].column).cast("string").alias(KEY)]
    working += [col(role.column).alias(PREFIX + "f_" + role.keyword)
                for role in by_keyword.values() if role.keyword != "merger"]
    fields: dict[str, Any] = {**dataclasses.asdict(options), "timers": timers,
                              "tick_us": tick_us}
    for role in roles:
        fields[role.keyword] = None if role.column is None else [
            role.column, df.schema[role.column].dataType.simpleString()]
    token = _lock.register(df.sparkSession, "causal_merge", {**fields, "engine": ENGINE})
    processor = CallerMergeProcessor(options, roles, timers, tick_us, df.schema, token)
    # the token first among the columns: Spark's plan text names it (``_lock``)
    keyed = df.select(F.lit(True).alias(token), *working, tie.alias(TIE), row)
    return keyed.groupBy(KEY).transformWithState(processor, output_schema(df.schema),
                                                 "Append", TIME_MODES[timers])
