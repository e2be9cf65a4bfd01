"""Trace files in and out: JSON Lines or Parquet, chosen by extension, ``-`` for stdio.

Reading streams (one JSON line or one Parquet record batch at a time), so memory is
bounded by the protocols' state, not by the file. Writing goes to a temporary file in
the destination folder that is renamed over the destination only when the replay
finished without error: the output path is written whole or not at all. Standard
output is streamed as JSON Lines (it cannot be taken back; a failed replay ends it
early and the exit status says so).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from timebound._safety import follow_umask, hidden_temp
from timebound.arrowtypes import ARROW_TYPES as ARROW_TYPES  # the replay's output types
from timebound.errors import TraceError, UsageError

#: Rows per Parquet record batch, read or written.
BATCH_ROWS = 8192

_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def trace_format(path: str, option: str) -> str:
    """``"jsonl"`` or ``"parquet"`` for a path (``-`` is JSON Lines), else a UsageError."""
    if path == "-":
        return "jsonl"
    suffix = Path(path).suffix.lower()
    if suffix == ".jsonl":
        return "jsonl"
    if suffix == ".parquet":
        return "parquet"
    raise UsageError(option, f"'{path}' must end in .jsonl or .parquet (or be '-')")


def read_rows(path: str) -> Iterator[tuple[int, Any]]:
    """Yield ``(line, value)`` for each record of a trace file, lines counted from 1.

    JSON Lines: blank lines are skipped (but counted); a line that is not JSON raises
    a TraceError naming the line. Parquet: each row becomes a dict of its columns.
    """
    fmt = trace_format(path, "--input")
    source = "<stdin>" if path == "-" else path
    if fmt == "parquet":
        yield from _read_parquet(path)
        return
    if path == "-":
        yield from _read_jsonl(sys.stdin, source)
        return
    try:
        handle = open(path, encoding="utf-8")
    except OSError as exc:
        raise UsageError("--input", f"cannot open '{path}': {exc.strerror}") from None
    with handle:
        yield from _read_jsonl(handle, source)


def _read_jsonl(handle: IO[str], source: str) -> Iterator[tuple[int, Any]]:
    line_no = 0
    try:
        for line_no, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                raise TraceError(source, line_no, "<row>", f"not valid JSON ({exc.msg})") from None
            yield line_no, value
    except UnicodeDecodeError:
        raise TraceError(source, line_no + 1, "<row>", "not valid UTF-8") from None


def _read_parquet(path: str) -> Iterator[tuple[int, Any]]:
    try:
        parquet = pq.ParquetFile(path)
    except FileNotFoundError:
        raise UsageError("--input", f"cannot open '{path}': no such file") from None
    except (OSError, pa.ArrowException) as exc:
        raise UsageError("--input", f"cannot read '{path}' as Parquet: {exc}") from None
    line_no = 0
    for batch in parquet.iter_batches(batch_size=BATCH_ROWS):
        for row in batch.to_pylist():
            line_no += 1
            yield line_no, {key: value for key, value in row.items() if value is not None}


class OutputWriter:
    """Collects output rows and publishes the file atomically on ``commit()``.

    JSON Lines go straight to a temporary file beside the destination. Parquet rows
    are first spooled as JSON lines to a temporary file, so that the schema can be
    fixed from every row (a column may first appear late, e.g. ``msg`` after many
    ``local`` events); ``commit()`` then converts the spool in record batches. Memory
    stays bounded either way. Leaving the ``with`` block by an exception removes the
    temporary files and leaves the destination untouched.
    """

    def __init__(self, path: str, column_types: Mapping[str, str]) -> None:
        self._fmt = trace_format(path, "--output")
        self._path = path
        self._known = {name: ARROW_TYPES[kind] for name, kind in column_types.items()}
        self._columns: dict[str, None] = {}
        self._samples: dict[str, Any] = {}
        self._tmp: str | None = None
        self._spool: str | None = None
        self._handle: IO[str] | None = None
        self.rows = 0

    def __enter__(self) -> OutputWriter:
        if self._path == "-":
            self._handle = sys.stdout
            return self
        folder = os.path.dirname(os.path.abspath(self._path))
        if not os.path.isdir(folder):
            raise UsageError("--output", f"folder '{folder}' does not exist")
        try:
            self._tmp = hidden_temp(self._path, ".tmp")
        except OSError as exc:
            raise UsageError("--output", f"cannot write '{self._path}': {exc.strerror}") from None
        try:
            if self._fmt == "jsonl":
                self._handle = open(self._tmp, "w", encoding="utf-8")
            else:
                self._spool = hidden_temp(self._path, ".spool")
                self._handle = open(self._spool, "w+", encoding="utf-8")
        except BaseException:
            # ``__exit__`` does not run when ``__enter__`` raises (SIGTERM lands here too)
            self.__exit__()
            raise
        return self

    def write(self, row: Mapping[str, Any]) -> None:
        self.rows += 1
        assert self._handle is not None
        self._handle.write(_ENCODE(row) + "\n")
        if self._fmt == "parquet":
            for key, value in row.items():
                if key not in self._columns:
                    self._columns[key] = None
                if value is not None and key not in self._samples and key not in self._known:
                    self._samples[key] = value

    def _schema(self) -> pa.Schema:
        fields = []
        for name in self._columns:
            kind = self._known.get(name)
            if kind is None:
                sample = pa.array([self._samples.get(name)])
                kind = pa.string() if pa.types.is_null(sample.type) else sample.type
            fields.append(pa.field(name, kind))
        return pa.schema(fields)

    def _convert_spool(self) -> None:
        assert self._handle is not None and self._tmp is not None
        schema = self._schema()
        names = schema.names
        self._handle.flush()
        self._handle.seek(0)
        with pq.ParquetWriter(self._tmp, schema) as writer:
            batch: list[dict[str, Any]] = []
            for text in self._handle:
                batch.append(json.loads(text))
                if len(batch) >= BATCH_ROWS:
                    writer.write_table(self._table(batch, names, schema))
                    batch.clear()
            if batch or not self.rows:
                writer.write_table(self._table(batch, names, schema))

    @staticmethod
    def _table(rows: list[dict[str, Any]], names: list[str], schema: pa.Schema) -> pa.Table:
        columns = {name: [row.get(name) for row in rows] for name in names}
        return pa.table(columns, schema=schema)

    def commit(self) -> None:
        """Make the output visible at its path (fsync, then rename over it)."""
        if self._path == "-":
            sys.stdout.flush()
            return
        assert self._tmp is not None and self._handle is not None
        if self._fmt == "parquet":
            if not self._columns:
                self._columns = dict.fromkeys(self._known)
            try:
                self._convert_spool()
            except (pa.ArrowException, OverflowError) as exc:
                # e.g. a pass-through field beyond int64, or of mixed types across rows
                raise UsageError("--output", f"cannot store the rows as Parquet: {exc}") from None
            with open(self._tmp, "rb") as published:
                os.fsync(published.fileno())
        else:
            self._handle.flush()
            os.fsync(self._handle.fileno())
        self._handle.close()
        self._handle = None
        follow_umask(self._tmp)
        os.replace(self._tmp, self._path)
        self._tmp = None

    def __exit__(self, *exc: object) -> None:
        if self._handle is not None and self._handle is not sys.stdout:
            self._handle.close()
        for leftover in (self._tmp, self._spool):
            if leftover is not None and os.path.exists(leftover):
                os.unlink(leftover)
