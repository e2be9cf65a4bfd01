"""Parquet -> Parquet fast path of ``timebound replay atmostonce``: Arrow record batches.

The row path (``replay_rows``) turns every Parquet row into a dict, wraps it in a
``Row``, checks its fields one by one, looks up its receiver and class by name, and
spools every output row as a JSON line before converting the spool to Parquet. Here
the same work is done per record batch (``BATCH_ROWS`` rows, so memory stays bounded
by the protocol state, never by the file):

- the checks of a well-formed message row (non-null, non-empty strings, ``ts >= 1``,
  ``at >= 0``) and the trace rule (``at`` never decreasing per receiver, also against
  the adapter's last ``at``) are column-wide ``pyarrow.compute`` work; a segment that
  fails any of them goes to the row path untouched, which raises the exact
  ``file:line: field`` error (nothing is decided before every check passed);
- connection ids are dictionary-encoded and each distinct one classified once by the
  core's own classifier; the rows of each (receiver, class) run through that one core
  ``Receiver`` in file order, in a loop of exactly the calls ``decide`` makes
  (``handle_timer(now=)``, the down check, ``estimate``, ``receive(now=)``,
  ``entries``), and the results are put back in file order with an Arrow ``take``;
- crash rows (any ``type`` other than ``msg``) split a batch into segments and go
  through the row path between them, so crashes land at the right place;
- output batches are spooled as Arrow IPC and written as Parquet on ``commit()`` with
  the schema the row path would infer (same columns, same order, same types).

Every decision is the core's; the adapter's counters (``--stats``) are kept as
``decide`` keeps them. Inputs whose columns are not the plain ``messages`` ones
(``type``, ``receiver``, ``conn``, ``ts``, ``at``, ``down``, with string and integer
types) take the row path whole. tests/test_replay_fastpath.py checks this path equal
to the row path over generated traces. pyarrow and the standard library only.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from timebound._safety import follow_umask
from timebound.adapters import Row
from timebound.adapters.atmostonce import AtMostOnceAdapter
from timebound.contract import REPLAY_OUTPUTS
from timebound.core.atmostonce import Verdict, drive, drive_resilient
from timebound.errors import UsageError
from timebound.replay._io import ARROW_TYPES, BATCH_ROWS, trace_format


def path_batch() -> str:
    """The record-batch path's name, for benchmark output (with the core in use)."""
    from timebound._compiled import status

    return f"batch (Arrow record batches, {status()})"


PATH_ROW = "row (one dict per row)"
#: Verdict names by the core loop's codes.
_NAMES = tuple(verdict.value for verdict in Verdict)

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


def applies(adapter: object, input_path: str, output_path: str) -> bool:
    """The fast path can run this replay (at-most-once, a Parquet file to a Parquet
    file, plain columns)."""
    if not isinstance(adapter, AtMostOnceAdapter):
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
    """Output batches (``wide`` schema, file order) of one input batch whose first row
    is line ``first_line``."""
    n = batch.num_rows
    if n == 0:
        return
    cast = pa.RecordBatch.from_arrays(
        [batch.column(i).cast(schema.field(i).type) for i in range(batch.num_columns)],
        schema=schema)
    if "type" in schema.names:
        is_msg = pc.fill_null(pc.equal(cast.column("type"), "msg"), False)
        others = pc.indices_nonzero(pc.invert(is_msg)).to_pylist()
    else:
        others = list(range(n))
    bounds = [-1, *others, n]
    for left, right in zip(bounds, bounds[1:]):
        start, stop = left + 1, right
        if stop > start:
            segment = cast.slice(start, stop - start)
            decided = _decide_segment(adapter, source, segment, first_line + start)
            if decided is not None:
                columns = [*segment.columns, *decided]
                yield pa.RecordBatch.from_arrays(columns, schema=wide)
            else:
                rows = [out for i in range(start, stop)
                        for out in _row_path(adapter, source, batch, i, first_line)]
                if rows:
                    yield pa.RecordBatch.from_pylist(rows, schema=wide)
        if right < n:
            rows = list(_row_path(adapter, source, batch, right, first_line))
            if rows:
                yield pa.RecordBatch.from_pylist(rows, schema=wide)


def _row_path(adapter: AtMostOnceAdapter, source: str, batch: pa.RecordBatch, i: int,
              first_line: int) -> Iterator[Any]:
    """Row ``i`` of ``batch`` through the adapter's row path, exactly as ``read_rows``
    and ``replay_rows`` hand it over (its errors are the row path's)."""
    record = batch.slice(i, 1).to_pylist()[0]
    data = {key: value for key, value in record.items() if value is not None}
    yield from adapter.feed(Row(source, first_line + i, data))


def _decide_segment(adapter: AtMostOnceAdapter, source: str, segment: pa.RecordBatch,
                    first_line: int) -> list[pa.Array] | None:
    """Decide a segment of message rows: ``[verdict, rho, entries]`` in row order, or
    None (and nothing changed) when any row is malformed or goes back in time."""
    names_in = segment.schema.names
    for name in ("receiver", "conn", "ts", "at"):
        if name not in names_in or segment.column(name).null_count:
            return None
    receivers, conns = segment.column("receiver"), segment.column("conn")
    ts, at = segment.column("ts"), segment.column("at")
    if pc.min(pc.binary_length(receivers)).as_py() == 0:
        return None
    if pc.min(pc.binary_length(conns)).as_py() == 0:
        return None
    if pc.min(ts).as_py() < 1 or pc.min(at).as_py() < 0:
        return None

    n = segment.num_rows
    names_enc = pc.dictionary_encode(receivers)
    names = names_enc.dictionary.to_pylist()
    rcode = names_enc.indices.cast(pa.int64())
    # trace rule: per receiver, `at` never decreases (within, and from the last call)
    if len(names) == 1:
        by_receiver = None
        r_sorted, at_sorted = rcode, at
    else:
        by_receiver = pc.sort_indices(rcode)  # stable: file order within a receiver
        r_sorted, at_sorted = rcode.take(by_receiver), at.take(by_receiver)
    if n > 1:
        same = pc.equal(r_sorted.slice(1), r_sorted.slice(0, n - 1))
        back = pc.less(at_sorted.slice(1), at_sorted.slice(0, n - 1))
        if pc.any(pc.and_(same, back)).as_py():
            return None
        change = pc.indices_nonzero(pc.invert(same)).to_pylist()
    else:
        change = []
    firsts = [0, *(i + 1 for i in change)]
    lasts = [*change, n - 1]
    first_at = at_sorted.take(pa.array(firsts)).to_pylist()
    last_at = at_sorted.take(pa.array(lasts)).to_pylist()
    codes_sorted = r_sorted.take(pa.array(firsts)).to_pylist()
    for code, when in zip(codes_sorted, first_at):
        last = adapter.clock(names[code])
        if last is not None and when < last:
            return None

    # every receiver exists (the adapter creates it at its first row, as ``decide``)
    positions = (firsts if by_receiver is None
                 else by_receiver.take(pa.array(firsts)).to_pylist())
    for code, position, when in sorted(zip(codes_sorted, positions, first_at),
                                       key=lambda item: item[1]):
        adapter.open_receiver(source, first_line + position, names[code], when)

    # (receiver, class) groups, each in file order
    classes = adapter.options.classes
    conns_enc = pc.dictionary_encode(conns)
    if classes > 1:
        classify = adapter.classifier
        conn_class = pa.array([classify(c) for c in conns_enc.dictionary.to_pylist()],
                              pa.int64())
        key = pc.add(pc.multiply(rcode, classes),
                     conn_class.take(conns_enc.indices))
    else:
        key = rcode
    bounds_key = pc.min_max(key)
    if bounds_key["min"] == bounds_key["max"]:
        order = None
        k_sorted: pa.Array = key
    else:
        order = pc.sort_indices(key)
        k_sorted = key.take(order)
    conn_list = (conns if order is None else conns.take(order)).to_pylist()
    ts_list = (ts if order is None else ts.take(order)).to_pylist()
    at_list = (at if order is None else at.take(order)).to_pylist()
    if n > 1:
        bounds = pc.indices_nonzero(
            pc.not_equal(k_sorted.slice(1), k_sorted.slice(0, n - 1))).to_pylist()
    else:
        bounds = []
    starts = [0, *(b + 1 for b in bounds)]
    ends = [*starts[1:], n]

    verdicts: list[str] = []
    rhos: list[int | None] = []
    sizes: list[int | None] = []
    resilient = adapter.config.resilient
    for begin, end in zip(starts, ends):
        node = adapter.node(names[rcode_at(k_sorted, begin, classes)])
        assert node is not None
        receiver = node.receiver_for(conn_list[begin])
        _loop(receiver, conn_list[begin:end], ts_list[begin:end], at_list[begin:end],
              resilient, verdicts, rhos, sizes)

    verdict = pa.array(verdicts, pa.string())
    rho = pa.array(rhos, pa.int64())
    entries = pa.array(sizes, pa.int64())
    if order is not None:
        inverse = pc.sort_indices(order)
        verdict, rho, entries = verdict.take(inverse), rho.take(inverse), entries.take(inverse)

    # the adapter's state and summary counters, as ``decide`` keeps them
    for code, when in zip(codes_sorted, last_at):
        name = names[code]
        node = adapter.node(name)
        assert node is not None
        adapter.adopt(name, node, when)
    adapter.count_decided({item["values"]: item["counts"]
                           for item in pc.value_counts(verdict).to_pylist()},
                          pc.max(entries).as_py() or 0)
    return [verdict, rho, entries]


def rcode_at(k_sorted: pa.Array, i: int, classes: int) -> int:
    """The receiver code of sorted row ``i`` (the key is ``rcode * classes + class``)."""
    key: int = k_sorted[i].as_py()
    return key // classes if classes > 1 else key


def _loop(receiver: Any, conns: list[str], stamps: list[int], times: list[int],
          resilient: bool, verdicts: list[str], rhos: list[int | None],
          sizes: list[int | None]) -> None:
    """One core receiver over its rows in order, through the core's own loop
    (``core.atmostonce.drive``: exactly ``decide``'s calls -- timers due, the down
    check, the estimate in force, ``receive``, ``entries``), the verdicts by name."""
    if not resilient:
        codes, estimates, entries = drive(receiver, conns, stamps, times)
        verdicts.extend([_NAMES[code] for code in codes])
        rhos.extend(estimates)
        sizes.extend(entries)
        return
    codes, estimates, entries, up = drive_resilient(receiver, conns, stamps, times)
    for code, estimate, size, alive in zip(codes, estimates, entries, up, strict=True):
        verdicts.append(_NAMES[code])
        rhos.append(estimate if alive else None)
        sizes.append(size if alive else None)


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
        base = os.path.basename(self._path)
        try:
            fd, self._tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp", dir=folder)
            os.close(fd)
            fd, self._spool = tempfile.mkstemp(prefix=f".{base}.", suffix=".spool",
                                               dir=folder)
            os.close(fd)
        except OSError as exc:
            raise UsageError("--output", f"cannot write '{self._path}': {exc.strerror}") from None
        self._sink = pa.OSFile(self._spool, "wb")
        self._writer = pa.ipc.new_file(self._sink, self._wide)
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
