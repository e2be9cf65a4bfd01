"""Batch at-most-once: SCMP receivers per (run, receiver, hash class) inside Spark.

Groups are ``(run, receiver, cls)`` with ``cls = crc32(utf-8 conn) mod K`` (K: the run's
``--classes``, default 1) -- the replay's classes, so one receiver too large for a task
spreads over K tasks. Spark's SQL ``crc32`` (java.util.zip.CRC32 over the UTF-8 bytes)
is the same function as ``timebound.core.atmostonce.crc32_class``; every group checks
that on each of its rows, so a disagreement could never pass silently
(tests/test_pipeline_atmostonce.py pins it on non-ASCII ids). A crash row is copied to
every class of its receiver, as the replay's ``ClassifiedReceiver`` applies a crash to
every class. Each group runs the replay's own ``AtMostOnceReplayer`` (with the run's
K, so the row is routed by the core's classifier) over its rows sorted by ``seq``.

``at`` never decreasing per receiver is verified inside each group; with K > 1 the
groups only see their own class, so a window over (run, receiver) ordered by ``seq``
checks the whole receiver first (``check_time_order``), naming the first bad row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import Window
from pyspark.sql import functions as F

from timebound.core.atmostonce import crc32_class
from timebound.errors import TraceError
from timebound.pipeline import _group
from timebound.pipeline.schemas import DECISION_EXTRA
from timebound.replay import Row
from timebound.replay.atmostonce import COMMAND, well_formed

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

TABLE = "messages"


def _classes(options: dict[str, Any]) -> int:
    return int(options.get("classes") or 1)


def with_classes(df: DataFrame, options: dict[str, dict[str, Any]]) -> DataFrame:
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


def operate(df: DataFrame, options: dict[str, dict[str, Any]]) -> DataFrame:
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
        replayer = _group.build_replayer(COMMAND, options[run])
        source = f"{TABLE}[run {run!r}]"
        table = table.sort_by([("seq", "ascending")]).drop_columns(["cls"])
        # Column-wise: the replayer's own per-message path (``decide``) on plain
        # values, the input columns passed through as Arrow arrays. Crash rows and
        # malformed rows take the row path (``feed``), which names the bad field.
        kinds, names, conns, stamps, times, seqs = (
            table.column(c).to_pylist() for c in ("type", "receiver", "conn", "ts", "at", "seq"))
        keep: list[int] = []
        verdicts: list[str] = []
        rhos: list[int | None] = []
        entries: list[int | None] = []
        for i, (kind, name, conn, ts, at, seq) in enumerate(
                zip(kinds, names, conns, stamps, times, seqs)):
            if kind == "msg" and well_formed(name, conn, ts, at):
                if k > 1 and crc32_class(conn, k) != cls:
                    raise AssertionError(f"Spark crc32 class {cls} differs from the core's "
                                         f"for conn {conn!r}")
                verdict, rho, size = replayer.decide(source, seq, name, conn, ts, at)
            else:
                row = {n: v for n, v in table.slice(i, 1).to_pylist()[0].items() if v is not None}
                produced = list(replayer.feed(Row(source, seq, row)))
                if not produced:
                    continue  # a crash row: no decision
                verdict, rho, size = (produced[0][c] for c in ("verdict", "rho", "entries"))
            keep.append(i)
            verdicts.append(verdict)
            rhos.append(rho)
            entries.append(size)
        decided = {"verdict": verdicts, "rho": rhos, "entries": entries, "cls": [cls] * len(keep)}
        taken = table.take(pa.array(keep, type=pa.int64()))
        return pa.Table.from_arrays(
            [pa.array(decided[f.name], f.type) if f.name in decided
             else taken.column(f.name).cast(f.type) for f in arrow_schema],
            schema=arrow_schema)

    return with_classes(df, options).groupBy("run", "receiver", "cls") \
        .applyInArrow(group, schema)
