"""The streaming source: a folder producers drop trace files into, taken in name order.

Spark's own file source takes new files in the order of their *modification times*
(ties in listing order), so files written within the same millisecond can be read out
of order; the contract here is "files named in trace order". This source is a
Python data source (``pyspark.sql.datasource``) that lists the folder, sorts by name
and hands out the files after the last one taken:

- an offset is ``{"last": NAME, "files": COUNT}`` (the last file name taken and how many
  files that makes); a micro-batch takes the files with ``start.last < name <=
  end.last``, so a batch re-run after a crash reads exactly the same files;
- ``--max-files-per-trigger N`` is the read limit (``ReadMaxFiles``); the
  ``available-now`` trigger takes everything present when the query starts, in
  batches of at most N files, then stops;
- ``.parquet`` files and JSON Lines (``.jsonl``, ``.json``) may be mixed; names
  starting with ``.`` or ``_`` are ignored, so a producer writes ``.name.tmp`` and
  renames it when complete (a file is read once, whole);
- a file whose name sorts at or before the last one taken is never read: name new
  files so they sort after the old ones (zero-padded numbers, timestamps); the
  driver warns when it sees one.

Every row carries two extra columns, ``_file`` (the file's name) and ``_line`` (the
1-based line of a JSON Lines file, the 1-based row of a Parquet file): they order the
rows of files without a ``seq`` column and name a malformed row in errors. Values are
checked against the declared schema as they are read: a wrong type stops the query
with ``FILE:LINE: field 'x': ...`` (exit 2), like the replay. So does a row extension
column the stream does not decide (option ``refuseColumns``, a comma list: the
contract's ``REFUSED_BY_DRIVERS``, i.e. ``marked`` for ``messages``): a JSON Lines row
that has the field, or a Parquet file that has the column (line 0), rather than
deciding it as if the field were absent.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from timebound.errors import TraceError
from timebound.sparkutil import FILE_COLUMN, LINE_COLUMN
from timebound.stream._errors import marked

NAME = "timebound_trace_files"
SUFFIXES = (".parquet", ".jsonl", ".json")


def trace_files(folder: str) -> list[str]:
    """The trace files of ``folder``, sorted by name (hidden and ``_`` names skipped)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(n for n in names if not n.startswith((".", "_")) and n.endswith(SUFFIXES)
                  and os.path.isfile(os.path.join(folder, n)))


class _File(InputPartition):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


class TraceFiles(DataSource):
    """``spark.readStream.format(NAME).schema(s).option("path", DIR)``."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        raise TypeError("the trace-file source needs an explicit schema")

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        # ``self.options`` is case-insensitive; a plain dict of it is lower-cased.
        refuse = str(self.options.get("refuseColumns", "") or "")
        return _Reader(str(self.options["path"]),
                       int(self.options.get("maxFilesPerTrigger", "0") or 0), schema,
                       tuple(c for c in refuse.split(",") if c))


class _Reader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, folder: str, max_files: int, schema: StructType,
                 refuse: tuple[str, ...] = ()) -> None:
        self.folder = os.path.abspath(folder)
        self.max_files = max_files
        self.schema = schema
        self.refuse = refuse
        self._target: str | None = None

    def initialOffset(self) -> dict[str, Any]:
        return {"last": "", "files": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxFiles(self.max_files) if self.max_files > 0 else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        files = trace_files(self.folder)
        self._target = files[-1] if files else ""

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        last = str(start.get("last", ""))
        new = [n for n in trace_files(self.folder) if n > last]
        if self._target is not None:
            new = [n for n in new if n <= self._target]
        if isinstance(limit, ReadMaxFiles) and limit.max_files > 0:
            new = new[:limit.max_files]
        if not new:
            return start
        return {"last": new[-1], "files": int(start.get("files", 0)) + len(new)}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        low, high = str(start.get("last", "")), str(end.get("last", ""))
        return [_File(os.path.join(self.folder, n))
                for n in trace_files(self.folder) if low < n <= high]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, _File)
        try:
            yield from read_file(partition.path, self.schema, self.refuse)
        except TraceError as exc:
            raise marked(exc) from None

    def commit(self, end: dict[str, Any]) -> None:
        pass


# -- reading one file -------------------------------------------------------------


def _check(value: Any, kind: str) -> str | None:
    """None when ``value`` fits the Spark type name ``kind``; else the reason."""
    if value is None:
        return None
    if kind in ("bigint", "int", "long"):
        ok = isinstance(value, int) and not isinstance(value, bool) \
            and -(2**63) <= value < 2**63
        return None if ok else f"expected an integer, got {value!r}"
    if kind == "string":
        return None if isinstance(value, str) else f"expected a string, got {value!r}"
    if kind == "boolean":
        return None if isinstance(value, bool) else f"expected true or false, got {value!r}"
    if kind.startswith("array"):
        ok = isinstance(value, list) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value)
        return None if ok else f"expected a list of integers, got {value!r}"
    return None


REFUSED_REASON = ("incarnation marks (our extension) are decided by "
                  "`timebound replay atmostonce` only; the stream refuses them")


def read_file(path: str, schema: StructType, refuse: Sequence[str] = ()) -> Iterator[Any]:
    """Arrow record batches of ``path`` in ``schema`` (whose last two columns are
    ``_file`` and ``_line``); a column or field named in ``refuse`` is a TraceError."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(schema)
    data_fields = [f for f in schema.fields if f.name not in (FILE_COLUMN, LINE_COLUMN)]
    name = os.path.basename(path)
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except (OSError, pa.ArrowException) as exc:
            raise TraceError(name, 0, "<file>", f"cannot read Parquet: {exc}") from None
        for column in refuse:
            if column in table.column_names:
                raise TraceError(name, 0, column, REFUSED_REASON)
        columns = []
        for f, target in zip(data_fields, arrow_schema):
            if f.name in table.column_names:
                try:
                    columns.append(table.column(f.name).cast(target.type))
                except (pa.ArrowException, ValueError) as exc:
                    raise TraceError(name, 0, f.name,
                                     f"cannot read as {f.dataType.simpleString()}: {exc}"
                                     ) from None
            else:
                columns.append(pa.nulls(table.num_rows, target.type))
        columns.append(pa.array([name] * table.num_rows, pa.string()))
        columns.append(pa.array(range(1, table.num_rows + 1), pa.int64()))
        out = pa.Table.from_arrays(columns, schema=arrow_schema)
        yield from out.to_batches(max_chunksize=65536)
        return
    kinds = [(f.name, f.dataType.simpleString()) for f in data_fields]
    rows: dict[str, list[Any]] = {f.name: [] for f in schema.fields}
    try:
        handle = open(path, encoding="utf-8")
    except OSError as exc:
        raise TraceError(name, 0, "<file>", f"cannot read: {exc.strerror}") from None
    with handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                value = json.loads(text)
            except ValueError as exc:
                raise TraceError(name, number, "<row>", f"not JSON: {exc}") from None
            if not isinstance(value, dict):
                raise TraceError(name, number, "<row>", "expected a JSON object")
            for column in refuse:
                if column in value:
                    raise TraceError(name, number, column, REFUSED_REASON)
            for column, kind in kinds:
                item = value.get(column)
                reason = _check(item, kind)
                if reason is not None:
                    raise TraceError(name, number, column, reason)
                rows[column].append(item)
            rows[FILE_COLUMN].append(name)
            rows[LINE_COLUMN].append(number)
    yield from pa.Table.from_pydict(rows, schema=arrow_schema).to_batches(max_chunksize=65536)
