"""``at_most_once`` on a streaming DataFrame: the grouped, column-wise engine.

The query: the caller's rows with the working columns (``_check.prepared``: Spark
marks each row with the first row check it fails) -> ``groupBy(receiver, hash class)`` ->
``applyInPandasWithState`` (RocksDB state store), whose function (``Decider``) takes
each key's rows of a micro-batch as column slices, puts them in decision order
(``_order.frame_order``, from the one rule the batch operator sorts by too),
and decides them with ``timebound.spark.traces``' ``decide_rows``: the key's
receiver restored from its snapshot, the late-row rule (``clocked``: a row whose
``at`` is behind its receiver's clock is decided at that clock and marked
``late_arrival``), the core's compiled loop over the message columns, crash rows
(``down`` set) through the shared row adapter, the snapshot saved back. A key whose
rows hold one a check refused decides none: it returns that row alone with its error's
sentence, which Spark raises (``_check.failed_guard``), the key's state untouched.

``timebound stream atmostonce`` is a client of this engine (``trace_verdicts``): the
same ``decide`` and ``Decider`` over its trace rows with its own ``Plan``: keys per
``run`` too, crash rows by ``type``, ties of ``at`` by ``seq`` (rows without it after,
by file and line), no check by Spark -- every row goes through the replay's row
adapter when it is not a well-formed message, so an error names its file and line
--, only message rows back, with their class. Its checkpoints, written by the
command's own copy of this engine before (``GroupedDecider``, the same key, state and
rows), go on under it. The order changed in one case only: rows of one micro-batch
whose ``at`` goes back in ``seq`` order (the replay refuses such a trace) were taken
in ``seq`` order, late ones at the clock; they are now taken in ``at`` order.

The caller's columns go through Python and back as they are (Arrow, pandas, Arrow),
with one exception pandas would otherwise lose: a NaN in a top-level float or double
column comes back NaN, not null (a flag column per such column, restored in the JVM).
A role whose column already has the type the engine reads (a string receiver or conn,
a long ts, at or down) is read from the caller's column itself, the receiver's as the
key (``_check.reads``): no copy of it crosses the shuffle and the trip to Python
(400,000 rows in 100k-row micro-batches: 4.83 s against 5.05 s with the copies, median
of 5). The key's name is not part of its state, so a checkpoint keyed by the copy goes
on under the caller's column.

Restart safety (``_lock``): the options, the role columns and their types and the
engine are locked into the query's checkpoint at its first start; a restart that
differs is refused before a row is decided. Sizing: on a session that leaves
``spark.sql.shuffle.partitions`` unset, the stateful stage gets the session's default
parallelism (``size_state``); Spark freezes the value into the checkpoint at its first
start, and a restart keeps the checkpoint's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    FloatType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from timebound.adapters.atmostonce import AtMostOnceOptions
from timebound.errors import SchemaError, TimeboundError, TraceError, UsageError
from timebound.spark import _lock
from timebound.spark._check import (
    BAD,
    CLS,
    FAILED,
    KIND,
    PREFIX,
    WORKING,
    Check,
    Columns,
    added_schema,
    checks,
    col,
    described,
    failed_guard,
    prepared,
    reads,
    refused,
    sorted_by,
    traced,
)
from timebound.spark._order import frame_order
from timebound.spark.traces import (
    FILE_COLUMN,
    LINE_COLUMN,
    ROCKSDB,
    STATE_SCHEMA,
    STREAM_VERDICTS,
    AtMostOnceProcessor,
    StateValue,
    decide_rows,
    frames_of,
    grouping_key,
    prefer_exact_integers,
    state_value,
)
from timebound.sparkutil import carried, marked

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
_MSG = pa.scalar("msg", pa.string())


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


@dataclass(frozen=True)
class Plan:
    """What the engine reads of one stream's rows, besides the working columns.

    ``caller(cols)`` is ``at_most_once``'s: rows checked by Spark (``prepared``), a
    crash row where ``down`` is set, every row back (a crash row once), errors naming
    the caller's columns. ``timebound stream atmostonce`` gives its own: trace rows
    (``traced``: ``KIND`` their ``type``, unchecked), keys per ``run`` too, its order
    (``seq``, file, line), errors naming the file and line, only message rows back and
    the key's class beside them."""

    group: tuple[str, ...] = ()
    order: str | tuple[str, ...] | None = None
    tie: bool = True
    down: bool = False
    traced: bool = False
    provenance: tuple[str, str] | None = None
    class_column: str | None = None
    columns: dict[str, str] = field(default_factory=dict)
    checks: tuple[Check, ...] = ()
    described: tuple[str, ...] = ()
    read: dict[str, str] = field(default_factory=lambda: dict(WORKING))

    @classmethod
    def caller(cls, cols: Columns, schema: StructType, resilient: bool = False) -> Plan:
        """``at_most_once``'s plan for a stream of ``schema`` (the caller's)."""
        named = {"conn": cols.conn, "ts": cols.ts, "at": cols.at,
                 "receiver": cols.receiver or "receiver"}
        if cols.down is not None:
            named.update(down=cols.down, type=cols.down)
        return cls(order=cols.order, down=cols.down is not None, columns=named,
                   checks=checks(cols, resilient), described=described(cols),
                   read=reads(cols, schema))

    def names(self) -> dict[str, str | tuple[str, ...] | None]:
        """Role -> the column ``_order`` sorts by."""
        return sorted_by(self.read, self.order, self.tie)


class Decider:
    """``applyInPandasWithState``'s function (module docstring). Its ``__name__`` is
    the operator's lock token, which Spark prints in the query's plan."""

    def __init__(self, options: AtMostOnceOptions, plan: Plan, token: str | None,
                 names: list[str], flags: list[str]) -> None:
        self.__name__ = token or "timebound_at_most_once"
        self.token = token
        self.processor = AtMostOnceProcessor(options)
        self.plan = plan
        self.order = plan.names()
        self.names = names
        self.flags = flags
        self.checked = False

    def __call__(self, key: Any, frames: Iterator[Any], state: Any) -> Iterator[Any]:
        if not self.checked:
            if self.token is not None:
                _lock.in_task(self.token)
            self.checked = True
        # (pandas' all-NA concatenation notice is filtered where the engine is defined)
        frame = frames_of(frames)
        if frame is None:
            return
        try:
            out = self.decide_frame(grouping_key(key), frame, state_value(state))
        except TimeboundError as exc:
            raise marked(exc) from None
        if len(out):
            yield out

    def decide_frame(self, key: tuple[Any, ...], frame: Any, state: StateValue) -> Any:
        """One key's rows of a micro-batch (a pandas frame of the operator's input
        columns) decided over the key's ``state``: the output frame. Raises the
        row's ``TimeboundError`` (``__call__`` marks it for the driver)."""
        import pandas as pd

        if self.plan.checks:
            bad = frame[BAD].notna().to_numpy()
            if bad.any():
                return self._refused(frame.iloc[[int(np.argmax(bad))]])
        frame = frame_order(frame, self.order)
        name, cls = key[-2], key[-1]
        self.processor.state = state
        n = len(frame)
        read = self.plan.read
        down = pa.array(frame[read["down"]], pa.int64(), from_pandas=True) \
            if self.plan.down else pa.nulls(n, pa.int64())
        crash = down.is_valid().to_numpy(zero_copy_only=False)
        if self.plan.traced:
            kind = pa.array(frame[KIND], pa.string(), from_pandas=True)
        elif crash.any():
            kind = pa.array(np.where(crash, "crash", "msg"), pa.string())
        else:
            kind = pa.repeat(_MSG, n)
        rows = pa.table({"type": kind,
                         "conn": pa.array(frame[read["conn"]].to_numpy(dtype=object),
                                          pa.string(), from_pandas=True),
                         "ts": pa.array(frame[read["ts"]], pa.int64(), from_pandas=True),
                         "at": pa.array(frame[read["at"]], pa.int64(), from_pandas=True),
                         "down": down})
        if self.plan.provenance is not None:
            file, line = self.plan.provenance
            sources: str | list[str] = [str(f) for f in frame[file].tolist()]
            lines = np.asarray(frame[line].fillna(0), dtype=np.int64)
        else:
            sources, lines = SOURCE, np.arange(n, dtype=np.int64)
        try:
            decided, late = decide_rows(self.processor, name if isinstance(name, str)
                                        else None, rows, sources, lines)
        except TraceError as exc:
            raise self._named(exc) from None
        verdict, rho, entries = decided.verdict, decided.rho, decided.entries
        shown: np.ndarray | None
        if self.plan.traced:  # only message rows come back
            shown = decided.keep
        else:  # every row, a crash row once (its copy in class 0)
            shown = np.flatnonzero(~crash | (cls == 0)) if crash.any() else None
            if len(decided.keep) != n:
                where = np.full(n, -1, dtype=np.int64)
                where[decided.keep] = np.arange(len(decided.keep))
                if shown is not None:
                    where = where[shown]
                index = pa.array(where, mask=where < 0)
                verdict, rho, entries = (c.take(index) for c in (verdict, rho, entries))
        if shown is not None:
            frame = frame.take(shown).reset_index(drop=True)
            late = late[shown]
        out = frame[self.names].copy()
        for flag in self.flags:
            out[flag] = frame[flag].astype(bool)
        ints = {pa.int64(): pd.Int64Dtype()}.get
        out["verdict"] = verdict.to_pandas()
        out["rho"] = rho.to_pandas(types_mapper=ints)
        out["entries"] = entries.to_pandas(types_mapper=ints)
        out["late_arrival"] = late
        if self.plan.class_column is not None:
            out[self.plan.class_column] = np.full(len(out), cls, dtype=np.int64)
        if self.plan.checks:
            out[FAILED] = None
        return out

    def _refused(self, row: Any) -> Any:
        """The output of a key whose rows hold ``row``, refused by a row check: that
        row alone, with its error's sentence in ``FAILED``."""
        import pandas as pd

        row = row.reset_index(drop=True)
        check = self.plan.checks[int(row[BAD].iloc[0])]
        exc = refused(check, {name: row[name].iloc[0] for name in self.plan.described})
        out = row[self.names].copy()
        for flag in self.flags:
            out[flag] = row[flag].astype(bool)
        out["verdict"] = pd.Series([None], dtype=object)
        out["rho"] = out["entries"] = pd.array([None], dtype=pd.Int64Dtype())
        out["late_arrival"] = False
        out[FAILED] = carried(exc)
        return out

    def _named(self, exc: TraceError) -> TimeboundError:
        """A row adapter's error as the caller reads it: the trace's file and line, or
        the caller's column (``at_most_once``: a crash while its receiver is down)."""
        if self.plan.provenance is not None:
            return exc
        column = self.plan.columns.get(exc.field, exc.field)
        return SchemaError(SOURCE, column, exc.reason)


def decide(df: DataFrame, cols: Columns | None, options: AtMostOnceOptions,
           lock: dict[str, Any] | None, plan: Plan | None = None) -> DataFrame:
    """Every row of the stream ``df``, all its columns, plus ``verdict``, ``rho``,
    ``entries`` and ``late_arrival``. ``lock``: what the checkpoint must agree with
    (None: the caller locks it, ``timebound stream``). ``plan``: ``Plan.caller(cols)``
    unless given, then ``df`` already holds the working columns (``traced``)."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    spark = df.sparkSession
    prefer_exact_integers(df)
    token = None if lock is None else _lock.register(spark, "at_most_once",
                                                      {**lock, "engine": ENGINE})
    if plan is None:  # (``timebound stream`` sizes its own session: ``prepare_session``)
        assert cols is not None
        use_rocksdb(df)
        size_state(spark)
        plan = Plan.caller(cols, df.schema, options.receiver.resilient)
        keyed = prepared(df, cols, options.classes, resilient=options.receiver.resilient,
                         read=plan.read)
        kept = list(df.columns)
    else:
        keyed = df
        kept = [c for c in df.columns if not c.startswith(PREFIX)]
    floating = _floating(StructType([df.schema[c] for c in kept]))
    out_schema = added_schema(StructType([df.schema[c] for c in kept]), True)
    if plan.class_column is not None:
        out_schema = out_schema.add(plan.class_column, LongType(), True)
    flags = [StructField(_NAN + str(i), BooleanType(), False) for i in range(len(floating))]
    grouped_schema = StructType(list(out_schema.fields[:len(kept)]) + flags
                                + list(out_schema.fields[len(kept):]))
    if plan.checks:
        grouped_schema = grouped_schema.add(FAILED, StringType(), True)
    names = [flag.name for flag in flags]
    decider = Decider(options, plan, token, kept, names)
    if floating:  # pandas reads NaN and null alike: the JVM tells them apart
        keyed = keyed.select("*", *[F.isnan(col(name)).alias(flag)
                                    for name, flag in zip(floating, names)])
    decided = (keyed.groupBy(*plan.group, col(plan.read["receiver"]), CLS)
               .applyInPandasWithState(decider, grouped_schema, STATE_SCHEMA, "append",
                                       GroupStateTimeout.NoTimeout))
    if plan.checks:
        decided = failed_guard(decided)
    if not floating:
        return decided
    restored = {name: F.when(F.col(_NAN + str(i)), F.lit(float("nan")).cast(
        df.schema[name].dataType)).otherwise(col(name)) for i, name in enumerate(floating)}
    return decided.select(*[restored[name].alias(name) if name in restored else col(name)
                            for name in out_schema.names])


#: ``trace_verdicts``' working column: the row has no ``seq`` (it comes after those
#: that have one).
NO_SEQ = PREFIX + "no_seq"


def trace_plan() -> Plan:
    """What the engine reads of ``messages`` trace rows (``trace_verdicts``)."""
    return Plan(group=("run",), order=(NO_SEQ, "seq", FILE_COLUMN, LINE_COLUMN), tie=False,
                down=True, traced=True, provenance=(FILE_COLUMN, LINE_COLUMN),
                class_column="cls")


def trace_verdicts(messages: DataFrame, options: AtMostOnceOptions) -> DataFrame:
    """The verdict table of a stream of ``messages`` trace rows (``source_schema``: what
    ``timebound stream atmostonce`` reads), through this engine (``decide``): one
    receiver per (run, receiver, hash class), crash rows (``type`` crash) in every
    class, each key's rows in ``at`` order, then ``seq`` (rows without ``seq`` after,
    by file name, then line); every row checked by the replay's row adapter, a bad
    one named by its file and line; the message rows come back with their class,
    file and line (``STREAM_VERDICTS``)."""
    rows = traced(messages.withColumn(NO_SEQ, F.col("seq").isNull()), "type", "receiver",
                  "conn", "ts", "at", "down", options.classes)
    out = decide(rows, None, options, None, trace_plan())
    named = {"file": FILE_COLUMN, "line": LINE_COLUMN}
    return out.select(*[F.col(named.get(f.name, f.name)).alias(f.name)
                        for f in STREAM_VERDICTS.fields])
