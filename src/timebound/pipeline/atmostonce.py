"""Batch at-most-once: SCMP receivers per (run, receiver, hash class) inside Spark.

Groups are ``(run, receiver, cls)`` with ``cls = crc32(utf-8 conn) mod K`` (K: the run's
``--classes``, default 1) -- the replay's classes, so one receiver too large for a task
spreads over K tasks. Spark's SQL ``crc32`` (java.util.zip.CRC32 over the UTF-8 bytes)
is the same function as ``timebound.core.atmostonce.crc32_class``; every group checks
that on each of its rows, so a disagreement could never pass silently
(tests/test_pipeline_atmostonce.py pins it on non-ASCII ids). A crash row is copied to
every class of its receiver, as the replay's ``ClassifiedReceiver`` applies a crash to
every class. Each group runs the shared ``AtMostOnceAdapter`` (with the run's
K, so the row is routed by the core's classifier) over its rows sorted by ``seq``.

``at`` never decreasing per receiver is verified inside each group; with K > 1 the
groups only see their own class, so a window over (run, receiver) ordered by ``seq``
checks the whole receiver first (``check_time_order``), naming the first bad row.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Window
from pyspark.sql import functions as F

from timebound.adapters import ATMOSTONCE
from timebound.adapters.atmostonce import AtMostOnceOptions
from timebound.errors import TimeboundError, TraceError
from timebound.pipeline import _columnar, _group
from timebound.pipeline.schemas import DECISION_EXTRA
from timebound.sparkutil import marked

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

TABLE = "messages"
#: How the operator runs in Spark, for benchmark output (with ``_fast_atmostonce.PATH``).
ENGINE = "mapInArrow, partitions sorted by seq in the JVM"


def _classes(options: AtMostOnceOptions) -> int:
    return options.classes


def with_classes(df: DataFrame, options: Mapping[str, AtMostOnceOptions]) -> DataFrame:
    """Add ``cls``; crash rows are exploded to every class of their run's K."""
    pairs: list[Any] = []
    for run, opts in options.items():
        pairs += [F.lit(run), F.lit(_classes(opts))]
    k = F.element_at(F.create_map(*pairs), F.col("run")) if pairs else F.lit(1)
    classes = F.when(F.col("type") == "crash", F.sequence(F.lit(0), (k - 1).cast("long"))) \
        .otherwise(F.array(F.pmod(F.crc32(F.col("conn")), k.cast("long"))))
    return df.withColumn("cls", F.explode_outer(classes))


def check_time_order(df: DataFrame) -> None:
    """Per (run, receiver), ``at`` never decreases in ``seq`` order (raises TraceError)."""
    window = Window.partitionBy("run", "receiver").orderBy("seq")
    bad = (df.select("run", "receiver", "seq", "at", F.lag("at").over(window).alias("prev"))
           .where(F.col("at") < F.col("prev")).orderBy("run", "seq").limit(1).collect())
    if bad:
        row = bad[0]
        raise TraceError(f"{TABLE}[run {row['run']!r}]", int(row["seq"]), "at",
                         f"goes back in time for receiver {row['receiver']!r} "
                         f"({row['at']} < {row['prev']})")


def operate(df: DataFrame, options: Mapping[str, AtMostOnceOptions]) -> DataFrame:
    """Decision table of ``messages``: input columns + verdict, rho, entries, cls."""
    schema = _group.out_schema(df.schema, DECISION_EXTRA[TABLE])
    if any(_classes(opts) > 1 for opts in options.values()):
        check_time_order(df.where(F.col("run").isin(
            [run for run, opts in options.items() if _classes(opts) > 1])))

    arrow_schema = _group.arrow_schema(schema)
    plan = {run: (ATMOSTONCE, opts, _classes(opts)) for run, opts in options.items()}

    def decide(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        try:
            yield from _stream(batches, plan, arrow_schema)
        except TimeboundError as exc:
            raise marked(exc) from None

    # The JVM hash-partitions by group and sorts each partition by ``seq`` alone (one
    # long key: a radix sort on its prefix): every group's rows arrive in trace order,
    # in record batches, with no grouped-map materialization (``_stream`` keeps each
    # group's replayer across batches).
    return with_classes(df, options) \
        .repartition("run", "receiver", "cls") \
        .sortWithinPartitions(F.asc_nulls_last("seq")) \
        .mapInArrow(decide, schema)


_KEY = ("run", "receiver", "cls")


def _codes(column: pa.Array) -> tuple[np.ndarray, int]:
    """Integer codes of ``column`` (equal values, equal codes; null -> 0; values from 1)
    and the number of codes."""
    encoded = pc.dictionary_encode(column)
    codes: np.ndarray = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    return codes.astype(np.int64) + 1, len(encoded.dictionary) + 1


def _stream(batches: Iterator[pa.RecordBatch], plan: Mapping[str, Any],
            schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Decide one partition, its rows in ``seq`` order (groups may interleave). Each
    (run, receiver, cls) group has its own replayer, kept from its first row to the
    end of the partition; each batch's rows of a group (in order) are decided by it in
    turn. The column-wise path checks a slice against the replayer's state, so a
    group spread over batches decides, and fails, exactly as in one piece."""
    groups: dict[tuple[Any, ...], tuple[Any, str, int]] = {}
    for batch in batches:
        n = batch.num_rows
        if n == 0:
            continue
        combined = np.zeros(n, dtype=np.int64)
        for name in _KEY:
            codes, size = _codes(batch.column(name))
            combined = np.unique(combined * size + codes, return_inverse=True)[1]
        order = np.argsort(combined, kind="stable")
        ordered = combined[order]
        starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]).tolist()
        for g, begin in enumerate(starts):
            end = starts[g + 1] if g + 1 < len(starts) else n
            first = int(order[begin])
            key = tuple(batch.column(name)[first].as_py() for name in _KEY)
            if key not in groups:
                spec, opts, k = plan[key[0]]
                groups[key] = (spec.adapter(opts), f"{TABLE}[run {key[0]!r}]", k)
            replayer, source, k = groups[key]
            part = batch if len(starts) == 1 else batch.take(pa.array(order[begin:end]))
            table = pa.Table.from_batches([part])
            out = _columnar.atmostonce_group(replayer, source, table, key[2], k, schema)
            yield from out.to_batches()


OPERATOR = _group.Operator(TABLE, ATMOSTONCE, operate)
