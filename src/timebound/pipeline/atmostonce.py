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

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import Window
from pyspark.sql import functions as F

from timebound.adapters import ATMOSTONCE
from timebound.adapters.atmostonce import AtMostOnceOptions
from timebound.errors import TraceError
from timebound.pipeline import _columnar, _group
from timebound.pipeline.schemas import DECISION_EXTRA

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

TABLE = "messages"


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

    @_group.guarded
    def group(key: tuple[pa.Scalar, ...], table: pa.Table) -> pa.Table:
        run, cls = key[0].as_py(), key[2].as_py()
        k = _classes(options[run])
        replayer = ATMOSTONCE.adapter(options[run])
        source = f"{TABLE}[run {run!r}]"
        # Column-wise (pipeline/_columnar.py): the replayer decides, its core
        # receivers driven over Arrow columns; crash and malformed rows take its row path.
        return _columnar.atmostonce_group(replayer, source, table, cls, k, arrow_schema)

    return with_classes(df, options).groupBy("run", "receiver", "cls") \
        .applyInArrow(group, schema)


OPERATOR = _group.Operator(TABLE, ATMOSTONCE, operate)
