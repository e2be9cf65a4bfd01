"""Parquet -> Parquet fast path of ``timebound replay atmostonce``: Arrow record batches.

The row path (``replay_rows``) turns every Parquet row into a dict, wraps it in a
``Row``, checks its fields one by one, looks up its receiver and class by name, and
spools every output row as a JSON line before converting the spool to Parquet. Here
each record batch (``BATCH_ROWS`` rows, so memory stays bounded by the protocol state,
never by the file) goes to ``timebound.columnar.decide_table``, the column-wise
decider the Spark operator, the streaming processor and the library use too: the
column checks of well-formed message rows and of the trace rule (``at`` never
decreasing per receiver, also against the adapter's last ``at``), the receivers opened
as ``decide`` opens them, each (receiver, class) through the core's own loop
(``core.atmostonce.drive``), crash and malformed rows through the adapter's row path
(so every error is the row path's ``file:line: field`` one). Output batches are
spooled as Arrow IPC and written as Parquet on ``commit()`` with the schema the row
path would infer (same columns, same order, same types).

Every decision is the core's; the adapter's counters (``--stats``) are kept as
``decide`` keeps them. ``timebound.columnar`` needs numpy (installed with every extra;
the base package needs only pyarrow): without it the replay takes the row path, with
the same decisions. Inputs whose columns are not the plain ``messages`` ones
(``type``, ``receiver``, ``conn``, ``ts``, ``at``, ``down``, with string and integer
types) take the row path whole. tests/test_replay_fastpath.py checks this path equal
to the row path over generated traces.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from timebound._safety import follow_umask, hidden_temp
from timebound.adapters import Row
from timebound.adapters.atmostonce import AtMostOnceAdapter
from timebound.contract import REPLAY_OUTPUTS
from timebound.errors import UsageError
from timebound.replay._io import ARROW_TYPES, BATCH_ROWS, trace_format


def path_batch() -> str:
    """The record-batch path's name, for benchmark output (with the core in use)."""
    from timebound._compiled import status

    return f"batch (Arrow record batches, {status()})"


PATH_ROW = "row (one dict per row)"

_STRINGS = ("type", "receiver", "conn")
_INTEGERS = ("ts", "at", "down")
_DECISIONS = ("verdict", "rho", "entries")
_KNOWN = {name: ARROW_TYPES[kind] for name, kind in REPLAY_OUTPUTS["atmostonce"].items()}


def plain_schema(path: str) -> pa.Schema | None:
    """The input's schema with integers as int64, when the fast path can take the file
    (plain ``messages`` columns); None sends the whole file to the row path (which
    also reports a file it cannot open)."""
    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowException):
        return None
    names = schema.names
    if len(set(names)) != len(names):
        return None
    fields = []
    for f in schema:
        if f.name in _STRINGS and f.type == pa.string():
            fields.append(pa.field(f.name, pa.string()))
        elif (f.name in _INTEGERS and pa.types.is_integer(f.type)
              and f.type != pa.uint64()):
            fields.append(pa.field(f.name, pa.int64()))
        else:
            return None
    return pa.schema(fields)


def _numpy() -> bool:
    try:
        import numpy  # noqa: F401
    except ImportError:
        return False
    return True


def applies(adapter: object, input_path: str, output_path: str) -> bool:
    """The fast path can run this replay (at-most-once, a Parquet file to a Parquet
    file, plain columns, and numpy installed: ``timebound.columnar`` needs it; without
    it the replay takes the row path, the same decisions)."""
    if not isinstance(adapter, AtMostOnceAdapter) or not _numpy():
        return False
    if input_path == "-" or output_path == "-":
        return False
    if trace_format(input_path, "--input") != "parquet":
        return False
    if trace_format(output_path, "--output") != "parquet":
        return False
    return plain_schema(input_path) is not None


def replay_parquet(adapter: AtMostOnceAdapter, input_path: str, output_path: str,
                   *, batch_rows: int = BATCH_ROWS) -> None:
    """Replay ``input_path`` (Parquet) into ``output_path`` (Parquet), written whole
    or not at all, in record batches of ``batch_rows`` rows."""
    schema = plain_schema(input_path)
    if schema is None:
        raise UsageError("--input", f"cannot read '{input_path}' as Parquet")
    wide = pa.schema([*schema, pa.field("verdict", pa.string()),
                      pa.field("rho", pa.int64()), pa.field("entries", pa.int64())])
    parquet = pq.ParquetFile(input_path)
    with _BatchOutput(output_path, schema, wide) as out:
        line = 0
        for batch in parquet.iter_batches(batch_size=batch_rows):
            for piece in decide_batch(adapter, input_path, batch, line + 1, schema, wide):
                out.write(piece)
            line += batch.num_rows
        out.commit()


# -- deciding one batch -----------------------------------------------------------------


def decide_batch(adapter: AtMostOnceAdapter, source: str, batch: pa.RecordBatch,
                 first_line: int, schema: pa.Schema,
                 wide: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The output batch (``wide`` schema, file order) of one input batch whose first
    row is line ``first_line``: its message rows with their decisions, decided by
    ``timebound.columnar.decide_table`` (the column-wise decider every driver shares:
    column checks, ``at`` order, receivers opened, the core's loop per (receiver,
    class), crash and malformed rows through the adapter's row path)."""
    n = batch.num_rows
    if n == 0:
        return
    cast = pa.RecordBatch.from_arrays(
        [batch.column(i).cast(schema.field(i).type) for i in range(batch.num_columns)],
        schema=schema)
    import numpy as np

    from timebound.columnar import decide_table

    lines = np.arange(first_line, first_line + n, dtype=np.int64)
    decided = decide_table(adapter, source, pa.Table.from_batches([cast]), lines,
                           lambda i: list(_row_path(adapter, source, batch, i, first_line)))
    if len(decided.keep):
        kept = cast.take(pa.array(decided.keep, type=pa.int64()))
        yield pa.RecordBatch.from_arrays(
            [*kept.columns, decided.verdict, decided.rho, decided.entries], schema=wide)


def _row_path(adapter: AtMostOnceAdapter, source: str, batch: pa.RecordBatch, i: int,
              first_line: int) -> Iterator[Any]:
    """Row ``i`` of ``batch`` through the adapter's row path, exactly as ``read_rows``
    and ``replay_rows`` hand it over (its errors are the row path's)."""
    record = batch.slice(i, 1).to_pylist()[0]
    data = {key: value for key, value in record.items() if value is not None}
    yield from adapter.feed(Row(source, first_line + i, data))


# -- writing -----------------------------------------------------------------------------


class _BatchOutput:
    """Output batches spooled as Arrow IPC beside the destination; ``commit()`` writes
    the Parquet file with the row path's schema (columns in order of first appearance,
    ``down`` only when a message row carried one) and renames it over the destination.
    Leaving the ``with`` block by an exception (or SIGTERM) removes both temporary
    files and leaves the destination untouched."""

    def __init__(self, path: str, schema: pa.Schema, wide: pa.Schema) -> None:
        self._path = path
        self._input = schema
        self._wide = wide
        self._tmp: str | None = None
        self._spool: str | None = None
        self._sink: Any = None
        self._writer: Any = None
        self.rows = 0
        self._first_down: bool | None = None  # the first output row carried `down`
        self._down_seen = False

    def __enter__(self) -> _BatchOutput:
        folder = os.path.dirname(os.path.abspath(self._path))
        if not os.path.isdir(folder):
            raise UsageError("--output", f"folder '{folder}' does not exist")
        try:
            self._tmp = hidden_temp(self._path, ".tmp")
            self._spool = hidden_temp(self._path, ".spool")
            self._sink = pa.OSFile(self._spool, "wb")
            self._writer = pa.ipc.new_file(self._sink, self._wide)
        except OSError as exc:
            self.__exit__()
            raise UsageError("--output", f"cannot write '{self._path}': {exc.strerror}") from None
        except BaseException:
            # ``__exit__`` does not run when ``__enter__`` raises (SIGTERM lands here too)
            self.__exit__()
            raise
        return self

    def write(self, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            return
        if "down" in self._wide.names:
            down = batch.column("down")
            if self._first_down is None:
                self._first_down = down[0].is_valid
            if down.null_count < batch.num_rows:
                self._down_seen = True
        self.rows += batch.num_rows
        self._writer.write_batch(batch)

    def _schema(self) -> pa.Schema:
        if not self.rows:
            return pa.schema([pa.field(name, kind) for name, kind in _KNOWN.items()])
        names = [name for name in self._input.names if name != "down" or self._first_down]
        names += _DECISIONS
        if self._down_seen and not self._first_down:
            names.append("down")
        return pa.schema([pa.field(name, _KNOWN.get(name, pa.int64())) for name in names])

    def commit(self) -> None:
        """Make the output visible at its path (fsync, then rename over it)."""
        assert self._tmp is not None and self._spool is not None
        self._writer.close()
        self._sink.close()
        self._writer = self._sink = None
        schema = self._schema()
        with pq.ParquetWriter(self._tmp, schema) as writer:
            if not self.rows:
                writer.write_table(schema.empty_table())
            else:
                with pa.memory_map(self._spool, "r") as source:
                    reader = pa.ipc.open_file(source)
                    pending: list[pa.RecordBatch] = []
                    held = 0
                    for i in range(reader.num_record_batches):
                        batch = reader.get_batch(i).select(schema.names)
                        pending.append(batch)
                        held += batch.num_rows
                        if held >= BATCH_ROWS:
                            table = pa.Table.from_batches(pending).cast(schema)
                            full = held - held % BATCH_ROWS
                            writer.write_table(table.slice(0, full), row_group_size=BATCH_ROWS)
                            pending = table.slice(full).to_batches()
                            held -= full
                    if held:
                        writer.write_table(pa.Table.from_batches(pending, schema=schema))
        with open(self._tmp, "rb") as published:
            os.fsync(published.fileno())
        follow_umask(self._tmp)
        os.replace(self._tmp, self._path)
        self._tmp = None

    def __exit__(self, *exc: object) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            except pa.ArrowException:
                pass
        if self._sink is not None:
            self._sink.close()
        for leftover in (self._tmp, self._spool):
            if leftover is not None and os.path.exists(leftover):
                os.unlink(leftover)
