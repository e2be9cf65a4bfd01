"""The sink: each micro-batch's output written once, whole, under its batch id.

Structured Streaming re-runs a micro-batch after a crash with the same input (its
offsets are logged before it runs) and the same state (the store's version before
it), so it produces the same rows. ``BatchSink`` is the query's ``foreachBatch``: it
writes batch N of table T into a hidden ``SINK/T/_tmp-batch=N`` folder and renames it
to ``SINK/T/batch=N`` when complete. A re-run finds ``batch=N`` and skips it; a
half-written temporary folder of a killed run is ours and is replaced. So every
output row is in the sink exactly once whatever moment the process is killed at,
and ``spark.read.parquet("SINK/T")`` (or pyarrow) reads the table with a ``batch``
column. Derived tables (``accepted`` from ``verdicts``) are computed from the
written main table, never by running the stateful operator a second time. A re-run
that finds its main table written still runs the operator (into Spark's ``noop``
sink): Spark requires every state store to commit each batch.

Paths go through Hadoop's ``FileSystem`` (rename is atomic on local and HDFS file
systems; an object store without atomic rename needs a committing file system).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

#: A table written from the main table: its name and how to derive it.
Derived = tuple[str, Callable[["DataFrame"], "DataFrame"]]


class BatchSink:
    """``foreachBatch`` writer of a main table and tables derived from it."""

    def __init__(self, spark: SparkSession, sink: str, main: str,
                 derived: list[Derived], count_column: str) -> None:
        self.spark = spark
        self.sink = sink.rstrip("/")
        self.main = main
        self.derived = derived
        self.count_column = count_column
        #: batch id -> (rows out, {value of count_column: rows}), for progress lines
        self.counts: dict[int, tuple[int, dict[str, int]]] = {}
        self._lock = threading.Lock()
        jvm = spark._jvm
        assert jvm is not None
        self._Path = jvm.org.apache.hadoop.fs.Path
        self._conf = spark._jsc.hadoopConfiguration()

    def _fs(self, path: str) -> tuple[Any, Any]:
        p = self._Path(path)
        return p.getFileSystem(self._conf), p

    def exists(self, path: str) -> bool:
        fs, p = self._fs(path)
        return bool(fs.exists(p))

    def _commit(self, table: str, batch_id: int, write: Callable[[str], None]) -> str:
        final = f"{self.sink}/{table}/batch={batch_id}"
        if self.exists(final):
            return final  # written whole by an earlier run of this batch
        temp = f"{self.sink}/{table}/_tmp-batch={batch_id}"
        fs, tp = self._fs(temp)
        if fs.exists(tp):
            fs.delete(tp, True)
        try:
            write(temp)
            if not fs.rename(tp, self._Path(final)):
                raise OSError(f"cannot rename {temp} to {final}")
        except BaseException:
            if fs.exists(tp):  # ours: never leave a half-written batch behind
                fs.delete(tp, True)
            raise
        return final

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        main = f"{self.sink}/{self.main}/batch={batch_id}"
        if self.exists(main):
            # A re-run of a batch already written whole. The stateful operator must
            # still run over every partition (Spark checks that each state store
            # committed this batch); its output is the one already written.
            df.write.format("noop").mode("overwrite").save()
        else:
            self._commit(self.main, batch_id,
                         lambda path: df.write.mode("overwrite").parquet(path))
        written = self.spark.read.parquet(main)
        for table, derive in self.derived:
            self._commit(table, batch_id, _writer(derive(written)))
        counts = {str(r[0]): int(r[1])
                  for r in written.groupBy(self.count_column).count().collect()}
        with self._lock:
            self.counts[batch_id] = (sum(counts.values()), counts)

    def take_counts(self, batch_id: int) -> tuple[int, dict[str, int]] | None:
        with self._lock:
            return self.counts.pop(batch_id, None)


def _writer(df: DataFrame) -> Callable[[str], None]:
    def write(path: str) -> None:
        df.write.mode("overwrite").parquet(path)

    return write
