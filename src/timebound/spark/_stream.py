"""``at_most_once`` on a streaming DataFrame: the grouped, column-wise engine.

The query: the caller's rows with the working columns (``_check.prepared``: every row
checked as Spark reads it) -> ``groupBy(receiver, hash class)`` ->
``applyInPandasWithState`` (RocksDB state store), whose function (``Decider``) takes
each key's rows of a micro-batch as column slices, puts them in decision order
(``_order.frame_order``, from the one rule the batch operator sorts by too),
and decides them with ``timebound.spark.traces``' ``decide_key_rows``: the key's
receiver restored from its snapshot, the late-row rule (``clocked``: a row whose
``at`` is behind its receiver's clock is decided at that clock and marked
``late_arrival``), the core's compiled loop over the columns, the snapshot saved
back. That is ``timebound stream atmostonce``'s engine (``GroupedDecider``) over the
caller's columns: the same state, the same verdicts.

The caller's columns go through Python and back as they are (Arrow, pandas, Arrow),
with one exception pandas would otherwise lose: a NaN in a top-level float or double
column comes back NaN, not null (a flag column per such column, restored in the JVM).

Restart safety (``_lock``): the options, the role columns and their types and the
engine are locked into the query's checkpoint at its first start; a restart that
differs is refused before a row is decided. Sizing: on a session that leaves
``spark.sql.shuffle.partitions`` unset, the stateful stage gets the session's default
parallelism (``size_state``); Spark freezes the value into the checkpoint at its first
start, and a restart keeps the checkpoint's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, DoubleType, FloatType, StructField, StructType

from timebound.adapters.atmostonce import AtMostOnceOptions
from timebound.errors import TimeboundError, UsageError
from timebound.spark import _lock
from timebound.spark._check import (
    AT,
    CLS,
    CONN,
    PREFIX,
    RECEIVER,
    TS,
    Columns,
    added_schema,
    col,
    prepared,
    working_names,
)
from timebound.spark._order import frame_order
from timebound.spark.traces import (
    ROCKSDB,
    STATE_SCHEMA,
    AtMostOnceProcessor,
    decide_key_rows,
    grouping_key,
    prefer_exact_integers,
    state_value,
)
from timebound.sparkutil import marked

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

PROVIDER = "spark.sql.streaming.stateStore.providerClass"
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
#: The engine a library stream runs, locked into its checkpoint.
ENGINE = "grouped"
_CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
_DEFAULT_PROVIDER = ("org.apache.spark.sql.execution.streaming.state."
                     "HDFSBackedStateStoreProvider")
#: The source the rows are named by in an error.
SOURCE = "DataFrame"
_NAN = PREFIX + "nan_"


def use_rocksdb(df: DataFrame) -> None:
    """The stateful streams keep their state in RocksDB: select it on the session when
    the session has Spark's default; refuse any other provider the caller chose."""
    spark = df.sparkSession
    provider = spark.conf.get(PROVIDER, None) or _DEFAULT_PROVIDER
    if provider == ROCKSDB:
        return
    if provider.rsplit(".", 1)[-1] != _DEFAULT_PROVIDER.rsplit(".", 1)[-1]:
        raise UsageError(PROVIDER, f"timebound's streams keep their state in {ROCKSDB}; "
                         f"the session has {provider}")
    spark.conf.set(PROVIDER, ROCKSDB)
    spark.conf.set(_CHANGELOG, "true")


def size_state(spark: SparkSession) -> None:
    """``spark.sql.shuffle.partitions`` = the session's default parallelism, unless the
    user set it (Spark's default, 200, runs 200 state stores per micro-batch however
    few rows come). A checkpoint's frozen value wins over either at a restart."""
    if spark.conf.get(SHUFFLE_PARTITIONS, None) is None:
        spark.conf.set(SHUFFLE_PARTITIONS, str(spark.sparkContext.defaultParallelism))


def _floating(schema: StructType) -> list[str]:
    return [f.name for f in schema.fields if isinstance(f.dataType, FloatType | DoubleType)]


class Decider:
    """``applyInPandasWithState``'s function (module docstring). Its ``__name__`` is
    the operator's lock token, which Spark prints in the query's plan."""

    def __init__(self, options: AtMostOnceOptions, cols: Columns, token: str,
                 names: list[str], flags: list[str]) -> None:
        self.__name__ = token
        self.processor = AtMostOnceProcessor(options)
        self.order = working_names(cols)
        self.names = names
        self.flags = flags
        self.checked = False

    def __call__(self, key: Any, frames: Iterator[Any], state: Any) -> Iterator[Any]:
        if not self.checked:
            _lock.in_task(self.__name__)
            self.checked = True
        import pandas as pd

        parts = [frame for frame in frames if len(frame)]
        if not parts:
            return
        # (pandas' all-NA concatenation notice is filtered where the engine is defined)
        frame = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
        frame = frame_order(frame, self.order)
        name, _cls = grouping_key(key)
        self.processor.state = state_value(state)
        try:
            decided, late = decide_key_rows(
                self.processor, str(name), SOURCE,
                pa.array(frame[CONN].to_numpy(dtype=object), pa.string()),
                frame[TS].to_numpy(dtype=np.int64), frame[AT].to_numpy(dtype=np.int64))
        except TimeboundError as exc:
            raise marked(exc) from None
        out = frame[self.names].copy()
        for flag in self.flags:
            out[flag] = frame[flag].astype(bool)
        out["verdict"] = decided.verdict.to_pandas()
        out["rho"] = decided.rho.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)
        out["entries"] = decided.entries.to_pandas(
            types_mapper={pa.int64(): pd.Int64Dtype()}.get)
        out["late_arrival"] = late
        yield out


def decide(df: DataFrame, cols: Columns, options: AtMostOnceOptions,
           lock: dict[str, Any]) -> DataFrame:
    """Every row of the stream ``df``, all its columns, plus ``verdict``, ``rho``,
    ``entries`` and ``late_arrival``. ``lock``: what the checkpoint must agree with."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    spark = df.sparkSession
    use_rocksdb(df)
    size_state(spark)
    prefer_exact_integers(df)
    token = _lock.register(spark, "at_most_once", {**lock, "engine": ENGINE})
    floating = _floating(df.schema)
    out_schema = added_schema(df.schema, True)
    flags = [StructField(_NAN + str(i), BooleanType(), False) for i in range(len(floating))]
    grouped_schema = StructType(list(out_schema.fields[:len(df.columns)]) + flags
                                + list(out_schema.fields[len(df.columns):]))
    names = [flag.name for flag in flags]
    decider = Decider(options, cols, token, list(df.columns), names)
    keyed = prepared(df, cols, options.classes)
    if floating:  # pandas reads NaN and null alike: the JVM tells them apart
        keyed = keyed.select("*", *[F.isnan(col(name)).alias(flag)
                                    for name, flag in zip(floating, names)])
    decided = (keyed.groupBy(RECEIVER, CLS)
               .applyInPandasWithState(decider, grouped_schema, STATE_SCHEMA, "append",
                                       GroupStateTimeout.NoTimeout))
    if not floating:
        return decided
    restored = {name: F.when(F.col(_NAN + str(i)), F.lit(float("nan")).cast(
        df.schema[name].dataType)).otherwise(col(name)) for i, name in enumerate(floating)}
    return decided.select(*[restored[name].alias(name) if name in restored else col(name)
                            for name in out_schema.names])
