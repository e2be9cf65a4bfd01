"""``at_most_once`` on a batch DataFrame: the pipeline's placed-receiver path.

The rows go where their (receiver, hash class) hashes (``repartition``), each partition
is sorted by the JVM in decision order (``_check.sort_order``: ``at``, then the
tie-breaks), and an iterator Arrow UDF (Spark's ``ArrowEvalPython``, as
``timebound.spark.traces._atmostonce`` decides placed receivers) hands the four columns a
receiver reads to the pipeline's own decider (``timebound.spark.traces``' ``Decider``: one
``AtMostOnceAdapter`` per partition, every receiver and class of it, decided
column-wise by the core through ``timebound.columnar``). Only those columns cross to
Python and only the decisions come back; the JVM keeps every column of the caller's
rows and puts the two together, row for row.

A receiver's classes are independent receivers, so a partition holding only some
classes of a receiver decides them as the whole receiver would: Spark's ``crc32``
spreads a receiver over up to ``classes`` partitions, and the adapter routes each row
by the core's own classifier (the same function).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import ArrowUDFType, arrow_udf
from pyspark.sql.types import ByteType, LongType, StringType, StructField, StructType

from timebound.adapters import ATMOSTONCE
from timebound.adapters.atmostonce import AtMostOnceOptions
from timebound.errors import TimeboundError
from timebound.spark._check import AT, CLS, CONN, RECEIVER, TS, Columns, prepared, sort_order
from timebound.spark.traces._atmostonce import VERDICTS, Decider, answered, arrow_schema
from timebound.sparkutil import marked

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

#: The one run of the pipeline's decider (it keys replayers by run).
RUN = "at_most_once"
_DECISION = "__timebound_decision"
#: What the decider reads, as ``timebound.spark.traces._atmostonce`` names it.
_READ = ("receiver", "conn", "ts", "at")
_S, _L = StringType(), LongType()
_DECIDED = StructType([
    StructField("run", _S), StructField("seq", _L), StructField("type", _S),
    StructField("receiver", _S), StructField("conn", _S), StructField("ts", _L),
    StructField("at", _L), StructField("_row", _L), StructField("verdict", _S),
    StructField("rho", _L), StructField("entries", _L), StructField("cls", _L),
])
_RETURNED = StructType([StructField("verdict", ByteType()), StructField("rho", _L),
                        StructField("entries", _L), StructField("cls", _L)])


def _decider(options: AtMostOnceOptions) -> Decider:
    return Decider({RUN: (ATMOSTONCE, options, options.classes)}, arrow_schema(_DECIDED),
                    whole=True)


def _batches(arrays: Iterator[tuple[pa.Array, ...]]) -> Iterator[pa.RecordBatch]:
    """The partition's rows as the decider reads them: in the order they come, which
    is decision order (``seq`` counts them), every row a message of the one run."""
    seq = 0
    for receiver, conn, ts, at in arrays:
        n = len(receiver)
        yield pa.RecordBatch.from_arrays(
            [pa.array([RUN] * n, pa.string()), pa.array(np.arange(seq, seq + n)),
             pa.array(["msg"] * n, pa.string()), receiver, conn, ts, at],
            names=["run", "seq", "type", *_READ])
        seq += n


def decide(df: DataFrame, cols: Columns, options: AtMostOnceOptions) -> DataFrame:
    """Every row of ``df``, all its columns, plus ``verdict``, ``rho``, ``entries``."""

    def decided(arrays: Iterator[tuple[pa.Array, ...]]) -> Iterator[pa.Array]:
        decider = _decider(options)
        try:
            yield from answered(_batches(arrays), decider, False)
        except TimeboundError as exc:
            raise marked(exc) from None

    # Nondeterministic: the optimizer must neither move it nor evaluate it twice; it
    # decides the rows in the order the sort left them.
    with warnings.catch_warnings():  # "type hints are preferred": these are the same
        warnings.simplefilter("ignore", UserWarning)
        udf = arrow_udf(decided, returnType=_RETURNED.simpleString(),
                        functionType=ArrowUDFType.SCALAR_ITER).asNondeterministic()
    kept = [f"`{name.replace('`', '``')}`" for name in df.columns]
    ordered = (prepared(df, cols, options.classes).repartition(F.col(RECEIVER), F.col(CLS))
               .sortWithinPartitions(*sort_order(cols)))
    out = ordered.select(*kept, udf(F.col(RECEIVER), F.col(CONN), F.col(TS), F.col(AT))
                         .alias(_DECISION))
    verdict = F.element_at(F.array(*map(F.lit, VERDICTS)),
                           (F.col(f"{_DECISION}.verdict") + 1).cast("int"))
    return out.select(*kept, verdict.alias("verdict"),
                      F.col(f"{_DECISION}.rho").alias("rho"),
                      F.col(f"{_DECISION}.entries").alias("entries"))
