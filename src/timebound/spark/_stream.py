"""``at_most_once`` on a streaming DataFrame: ``timebound stream``'s processor.

Keyed by (receiver, hash class), ``transformWithState`` (``timeMode="None"``, RocksDB
state store) runs ``traces``' ``AtMostOnceProcessor`` (``timebound stream``'s row engine): for each key in a
micro-batch it restores the key's receiver from its snapshot, feeds the key's rows to
the shared row adapter (the replay's), stores the snapshot back, and answers one
verdict per row -- a row whose ``at`` is behind its receiver's clock (a late row) is
decided at that clock and marked ``late_arrival``. This module only adapts the
caller's rows to it: the caller's columns travel beside the working ones as one struct,
each key's rows of the micro-batch are put in decision order (``_check.sort_order``,
the batch operator's order, in Python) and numbered, and each verdict row is joined
back to its caller's row by that number (the processor's ``line``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from timebound.adapters.atmostonce import AtMostOnceOptions
from timebound.errors import TimeboundError, UsageError
from timebound.spark._check import (
    AT,
    CLS,
    CONN,
    PREFIX,
    RECEIVER,
    TIE,
    TS,
    Columns,
    added_schema,
    col,
    prepared,
)
from timebound.spark.traces._rows import (
    FILE_COLUMN,
    LINE_COLUMN,
    ROCKSDB,
    OutRow,
    grouping_key,
)
from timebound.spark.traces._stream_atmostonce import AtMostOnceProcessor
from timebound.sparkutil import marked

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

#: The caller's row, carried whole through the stateful operator.
ROW = PREFIX + "row"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"
_CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
_DEFAULT_PROVIDER = ("org.apache.spark.sql.execution.streaming.state."
                     "HDFSBackedStateStoreProvider")


def use_rocksdb(df: DataFrame) -> None:
    """``transformWithState`` needs the RocksDB state store: select it on the session
    when the session has Spark's default; refuse any other provider the caller chose."""
    spark = df.sparkSession
    provider = spark.conf.get(PROVIDER, None) or _DEFAULT_PROVIDER
    if provider == ROCKSDB:
        return
    if provider.rsplit(".", 1)[-1] != _DEFAULT_PROVIDER.rsplit(".", 1)[-1]:
        raise UsageError(PROVIDER, f"at_most_once on a stream runs transformWithState, "
                         f"which needs {ROCKSDB}; the session has {provider}")
    spark.conf.set(PROVIDER, ROCKSDB)
    spark.conf.set(_CHANGELOG, "true")


def _nulls_first(value: Any) -> tuple[bool, Any]:
    return (value is not None, value)


class Processor(AtMostOnceProcessor):
    """``AtMostOnceProcessor`` over the caller's rows (module docstring)."""

    def __init__(self, options: AtMostOnceOptions, order: str | None) -> None:
        super().__init__(options)
        self.order = order

    def _key(self, row: dict[str, Any]) -> tuple[Any, ...]:
        order = None if self.order is None else row[ROW][self.order]
        return (row[AT], _nulls_first(order), row[TS], row[CONN], row[TIE])

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any
                        ) -> Iterator[Any]:
        name, cls = grouping_key(key)
        held = sorted((row.asDict() for row in rows), key=self._key)
        fed = [{"run": None, "seq": i, "type": "msg", "receiver": name, "conn": row[CONN],
                "ts": row[TS], "at": row[AT], "down": None, FILE_COLUMN: "",
                LINE_COLUMN: i} for i, row in enumerate(held)]
        try:
            outputs = self.decide((None, name, cls), fed)
        except TimeboundError as exc:
            raise marked(exc) from None
        for out in outputs:
            row = dict(held[int(out["line"])][ROW])
            row.update(verdict=out["verdict"], rho=out["rho"], entries=out["entries"],
                       late_arrival=out["late_arrival"])
            yield OutRow(row)


def decide(df: DataFrame, cols: Columns, options: AtMostOnceOptions) -> DataFrame:
    """Every row of the stream ``df``, all its columns, plus ``verdict``, ``rho``,
    ``entries`` and ``late_arrival``."""
    use_rocksdb(df)
    row = F.struct(*[col(name) for name in df.columns]).alias(ROW)
    keyed = prepared(df, cols, options.classes).select(
        F.col(RECEIVER), F.col(CLS), F.col(CONN), F.col(TS), F.col(AT), F.col(TIE), row)
    return keyed.groupBy(RECEIVER, CLS).transformWithState(
        Processor(options, cols.order), added_schema(df.schema, True), "Append", "None")
