"""``at_most_once`` on a batch DataFrame: the pipeline's placed-receiver path.

The rows go where their (receiver, hash class) hashes (``repartition`` on the caller's
columns alone, ``_check.placement``; the working columns and the row checks come after
the shuffle, so it moves nothing twice), and an
iterator Arrow UDF (Spark's ``ArrowEvalPython``, as ``timebound.spark.traces``'
decides placed receivers) hands the columns a receiver reads, and the tie-breaks, to
the pipeline's own decider (``timebound.spark.traces``' ``Decider``: one
``AtMostOnceAdapter`` per partition, every receiver and class of it, decided
column-wise by the core through ``timebound.columnar``). The worker holds its
partition's key columns, ranks the rows in decision order (``_order.arrow_order``,
the one rule the stream sorts by too), decides them in that order and answers each
batch row for row in the order it came (``answered``), so the JVM neither sorts nor
moves the caller's columns: only those key columns cross to Python, only the
decisions come back, and the JVM puts the two together. A partition holding a row the
row checks refused (``_check.BAD`` set) decides nothing: it answers that row's
sentence, which Spark raises (``_check.failed_guard``).

A receiver's classes are independent receivers, so a partition holding only some
classes of a receiver decides them as the whole receiver would: Spark's ``crc32``
spreads a receiver over up to ``classes`` partitions, and the adapter routes each row
by the core's own classifier (the same function).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import ArrowUDFType, arrow_udf
from pyspark.sql.types import ByteType, LongType, StringType, StructField, StructType

from timebound.adapters import ATMOSTONCE
from timebound.adapters.atmostonce import AtMostOnceOptions
from timebound.errors import SchemaError, TimeboundError, TraceError
from timebound.spark._check import (
    AT,
    BAD,
    CONN,
    DOWN,
    FAILED,
    RECEIVER,
    TABLE,
    TIE,
    TS,
    WORKING,
    Check,
    Columns,
    checks,
    col,
    failed_guard,
    placement,
    prepared,
    refused,
    working_names,
)
from timebound.spark._order import arrow_order
from timebound.spark.traces import VERDICTS, Decider, answered, arrow_schema
from timebound.sparkutil import carried, marked

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

#: The one run of the pipeline's decider (it keys replayers by run).
RUN = "at_most_once"
_DECISION = "__timebound_decision"
_RUN, _MSG = pa.scalar(RUN, pa.string()), pa.scalar("msg", pa.string())
#: What the decider reads, as ``timebound.spark.traces`` names it.
_READ = ("receiver", "conn", "ts", "at")
_S, _L = StringType(), LongType()
_DECIDED = StructType([
    StructField("run", _S), StructField("seq", _L), StructField("type", _S),
    StructField("receiver", _S), StructField("conn", _S), StructField("ts", _L),
    StructField("at", _L), StructField("_row", _L), StructField("verdict", _S),
    StructField("rho", _L), StructField("entries", _L), StructField("cls", _L),
])
#: A worker's answer per row: the verdict's code (``VERDICTS``' index), the estimate,
#: the table size, the hash class, a refused row's sentence.
RETURNED = StructType([StructField("verdict", ByteType()), StructField("rho", _L),
                       StructField("entries", _L), StructField("cls", _L),
                       StructField("failed", _S)])
_RETURNED_NAMES = [f.name for f in RETURNED.fields]


def _decider(options: AtMostOnceOptions) -> Decider:
    return Decider({RUN: (ATMOSTONCE, options, options.classes)}, arrow_schema(_DECIDED),
                    whole=True)


def _read(cols: Columns) -> list[str]:
    """The working columns the worker reads, in ``_batches``' order."""
    return [RECEIVER, CONN, TS, AT, TIE] + ([] if cols.down is None else [DOWN]) + (
        [] if cols.order is None else [str(cols.order)])


def _batches(held: list[tuple[pa.Array, ...]], cols: Columns) -> Iterator[pa.RecordBatch]:
    """The partition's rows as the decider reads them, batch by batch as they came,
    every row a message of the one run (a crash, where ``down`` is set), ``seq`` its
    rank in decision order (``_order.arrow_order``): the decider holds the partition
    and takes it in ``seq`` order (``answered``)."""
    names = _read(cols)[1:]
    keys = pa.table([pa.chunked_array([part[1 + i] for part in held])
                     for i in range(len(names))], names=names)
    rank = np.empty(keys.num_rows, dtype=np.int64)
    rank[arrow_order(keys, working_names(cols)).to_numpy()] = np.arange(keys.num_rows)
    offset = 0
    for receiver, conn, ts, at, _tie, *rest in held:
        n = len(receiver)
        kind, extra, extra_names = pa.repeat(_MSG, n), [], []
        if cols.down is not None:
            down = rest[0]
            if down.null_count < n:
                kind = pc.if_else(down.is_valid(), "crash", "msg")
            extra, extra_names = [down], ["down"]
        yield pa.RecordBatch.from_arrays(
            [pa.repeat(_RUN, n), pa.array(rank[offset:offset + n]), kind,
             receiver, conn, ts, at, *extra],
            names=["run", "seq", "type", *_READ, *extra_names])
        offset += n


def _refusal(parts: list[tuple[pa.Array, ...]], tried: tuple[Check, ...],
             shown: dict[str, int]) -> Iterator[pa.StructArray]:
    """The answer of a partition holding a row a check refused (``BAD`` set, the last
    column of ``parts``): no decision, the first such row's sentence in ``failed``."""
    first = True
    for part in parts:
        n, bad = len(part[-1]), part[-1]
        failed: list[str | None] = [None] * n
        if first and bad.null_count < n:
            i = int(pc.index(bad.is_valid(), True).as_py())
            exc = refused(tried[int(bad[i].as_py())],
                          {name: part[at][i].as_py() for name, at in shown.items()})
            failed[i], first = carried(exc), False
        yield undecided(n, failed)


def undecided(n: int, failed: list[str | None] | None = None) -> pa.StructArray:
    """``n`` rows' answer with no decision (``failed``: each row's sentence, or none)."""
    return pa.StructArray.from_arrays(
        [pa.nulls(n, pa.int8()), *[pa.nulls(n, pa.int64())] * 3,
         pa.nulls(n, pa.string()) if failed is None else pa.array(failed, pa.string())],
        names=_RETURNED_NAMES)


def decide(df: DataFrame, cols: Columns, options: AtMostOnceOptions) -> DataFrame:
    """Every row of ``df``, all its columns, plus ``verdict``, ``rho``, ``entries``
    (null on a crash row)."""
    return planned(df, cols, options, worker(cols, options))


#: A partition's worker: the columns ``_read(cols)`` and ``BAD``, batch by batch, in;
#: one ``RETURNED`` struct per row, batch by batch as they came, out.
Worker = Callable[[Iterator[tuple[pa.Array, ...]]], Iterator[pa.Array]]


def worker(cols: Columns, options: AtMostOnceOptions) -> Worker:
    """The operator's worker: decides its partition (module docstring)."""
    roles = {role: name for role, name in cols.roles()}
    roles["type"] = cols.down or "type"
    tried = checks(cols, options.receiver.resilient)
    read = _read(cols)
    shown = {name: read.index(WORKING[role]) for role, name in cols.roles()
             if role in WORKING}  # ``_check.described``'s columns, in its order

    def decided(arrays: Iterator[tuple[pa.Array, ...]]) -> Iterator[pa.Array]:
        parts = list(arrays)
        held = [part[:-1] for part in parts]
        if not held:
            return
        for part in parts:  # a row a check refused: its sentence, no decision
            bad = part[-1]
            if bad.null_count < len(bad):
                yield from _refusal(parts, tried, shown)
                return
        decider = _decider(options)
        try:
            for answer in answered(_batches(held, cols), decider, True):
                yield pa.StructArray.from_arrays(
                    [*answer.flatten(), pa.nulls(len(answer), pa.string())],
                    names=_RETURNED_NAMES)
        except TraceError as exc:  # the row adapter's: a crash while its receiver is down
            raise marked(SchemaError(TABLE, roles.get(exc.field, exc.field), exc.reason)
                         ) from None
        except TimeboundError as exc:
            raise marked(exc) from None

    return decided


def planned(df: DataFrame, cols: Columns, options: AtMostOnceOptions,
            work: Worker) -> DataFrame:
    """The operator's plan around ``work``: the shuffle, the working columns and row
    checks, the iterator Arrow UDF, the guard, the verdicts' names (``decide``'s with
    its ``worker``; benchmarks/profile_pipeline.py's, through ``timebound.spark.stages``,
    with one that decides nothing)."""
    # Nondeterministic: the optimizer must neither move it nor evaluate it twice.
    with warnings.catch_warnings():  # "type hints are preferred": these are the same
        warnings.simplefilter("ignore", UserWarning)
        udf = arrow_udf(work, returnType=RETURNED.simpleString(),
                        functionType=ArrowUDFType.SCALAR_ITER).asNondeterministic()
    kept = [f"`{name.replace('`', '``')}`" for name in df.columns]
    placed = prepared(df.repartition(*placement(cols, options.classes)), cols,
                      options.classes, resilient=options.receiver.resilient, copies=False)
    out = failed_guard(placed.select(*kept, udf(*map(col, [*_read(cols), BAD]))
                                     .alias(_DECISION))
                       .select("*", F.col(f"{_DECISION}.failed").alias(FAILED)))
    code = F.col(f"{_DECISION}.verdict")
    verdict = F.when(code >= 0, F.element_at(F.array(*map(F.lit, VERDICTS)),
                                             (code + 1).cast("int")))
    return out.select(*kept, verdict.alias("verdict"),
                      F.col(f"{_DECISION}.rho").alias("rho"),
                      F.col(f"{_DECISION}.entries").alias("entries"))
