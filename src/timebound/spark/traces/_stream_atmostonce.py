"""Streaming at-most-once: one SCMP receiver per (receiver, hash class) key.

The one engine of both streams: ``applyInPandasWithState`` (``GROUPED``), the key's
snapshot in its ``GroupState`` (the zlib-compressed JSON of ``classified_snapshot``
and the receiver's clock). Spark hands the function each key's rows of a micro-batch
as column slices of the Arrow batch; the key's receiver is restored once, the rows
are decided column-wise by ``timebound.columnar.decide_table`` (the batch operator's
path: the core's compiled receiver loop over Arrow/numpy columns, no per-row Python
object for a well-formed message), and the snapshot is written back. No protocol rule
lives here.

- ``timebound stream atmostonce`` (``verdicts``): trace files -> ``cls = crc32(utf-8
  conn) mod K`` (crash rows copied to every class, as the batch operator does) ->
  ``groupBy(run, receiver, cls)`` -> ``GroupedDecider``, whose ``ColumnarProcessor``
  takes the key's rows in ``seq`` order (files without ``seq``: file name, then line);
  crash rows and any malformed row go through the shared row adapter
  (``AtMostOnceAdapter``, the replay's own) one row at a time (``decide``), so every
  error is the replay's own. Timers run inline, as in the replay: the adapter fires
  every timer due at or before a row's ``at`` first.
- ``timebound.spark.at_most_once`` on a stream: the caller's rows, checked by Spark,
  in decision order, through ``decide_messages`` (``timebound.spark``'s ``_stream``).

The late-row rule is ``clocked``, the one copy both paths apply: each row is decided
at the running maximum of the key's clock and the ``at`` before it, and the rows it
raised are the ``late_arrival`` ones. Each class is an independent receiver (the
replay's ``--classes``), so a key's adapter is built with one class; its clock is the
class receiver's. A late row (a late file) is decided at the receiver's clock, its own
``at`` kept in the output -- never dropped, and never a reason to accept a duplicate
(the core's rules do not depend on time for that). A crash row behind the clock
crashes at the clock.

Warm receivers: Spark reuses a Python worker process from one micro-batch to the next,
and a key's receiver is what the worker saved last. ``save`` keeps the receiver object
under the exact bytes it wrote to the key's state; ``restored`` takes it back (and out
of the cache) when the state holds those bytes, and decodes the state otherwise (a new
process, another worker had the key, the bytes differ). A micro-batch that fails after
taking a warm receiver leaves none behind, so its retry decodes the state Spark kept.
A snapshot round trip restores every field these receivers decide by, so a warm
receiver and a decoded one decide alike (tests/test_stream_columnar.py).

The engines before this one (``columnar``: ``transformWithStateInPandas``; ``row``:
``transformWithState`` and a row-at-a-time processor) are retired: Spark restarts
state only under the operator that wrote it, so a checkpoint they started is refused
in one line (``timebound stream``'s lock, ``timebound.spark``'s ``_lock``).
"""

from __future__ import annotations

import json
import warnings
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_type

from timebound.adapters import Row
from timebound.adapters.atmostonce import AtMostOnceAdapter, AtMostOnceOptions
from timebound.columnar import Decided, decide_table
from timebound.core.atmostonce import (
    ClassifiedReceiver,
    classified_snapshot,
    crc32_classifier,
    restore_classified,
)
from timebound.errors import TimeboundError
from timebound.spark.traces._rows import FILE_COLUMN, LINE_COLUMN, grouping_key
from timebound.spark.traces._stream_schemas import MESSAGES_IN, VERDICTS, source_schema
from timebound.sparkutil import marked

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

STATE_SCHEMA = "snapshot binary"
_INPUT_NAMES = [name for name, _ in MESSAGES_IN]
INT_EXTENSION_DTYPE = "spark.sql.execution.pythonUDF.pandas.preferIntExtensionDtype"
# PySpark's own output step of ``applyInPandasWithState`` pads the frames it concatenates
# with all-NA rows, and pandas warns about that on every micro-batch of every query
# (pyspark/worker.py): nothing a user can act on, printed in the Python workers, which
# import this module before their first batch.
warnings.filterwarnings("ignore", category=FutureWarning,
                        message="The behavior of DataFrame concatenation with empty or all-NA")
#: ``verdicts``' engine (``applyInPandasWithState``), locked into a checkpoint; the
#: retired ones (``columnar``, ``row``) are refused (``timebound.stream``'s lock).
GROUPED = "grouped"
#: The source's provenance columns under names the adapter's rows do not use.
_FILE, _LINE = "file", "line"
_IN_ARROW = pa.schema([pa.field(f.name, to_arrow_type(f.dataType))
                       for f in source_schema("messages").fields]
                      + [pa.field("cls", pa.int64())])
_IN_NAMES = [_FILE if n == FILE_COLUMN else _LINE if n == LINE_COLUMN else n
             for n in _IN_ARROW.names]
_VERDICTS_ARROW = pa.schema([pa.field(f.name, to_arrow_type(f.dataType))
                             for f in VERDICTS.fields])
#: Below every clock: the first row of a receiver is never late.
_FLOOR = np.iinfo(np.int64).min
#: Warm receivers (module docstring): (options, the state's bytes) -> (the receiver
#: those bytes encode, its clock), those saved last in this process: at most
#: ``WARM_KEYS`` of them and ``WARM_BYTES`` of compressed state (a receiver takes
#: about 15 times its compressed state in Python objects).
_WARM: dict[tuple[AtMostOnceOptions, bytes], tuple[ClassifiedReceiver, int | None]] = {}
WARM_KEYS, WARM_BYTES = 256, 4 << 20


def warm_states() -> list[bytes]:
    """The state bytes of this process's warm receivers, the oldest first."""
    return [blob for _, blob in _WARM]


def forget_warm_receivers() -> None:
    """Drop this process's warm receivers: the next restore of each key decodes."""
    _WARM.clear()


def encode(data: object) -> bytes:
    return zlib.compress(json.dumps(data, separators=(",", ":")).encode("utf-8"), 1)


def decode(blob: bytes) -> Any:
    return json.loads(zlib.decompress(blob).decode("utf-8"))


def row_order(row: dict[str, Any]) -> tuple[Any, ...]:
    """``seq`` order; rows without ``seq`` by file name, then line."""
    seq = row.get("seq")
    return (seq is None, seq if seq is not None else 0, row.get(FILE_COLUMN) or "",
            row.get(LINE_COLUMN) or 0)


class StateValue(Protocol):
    """What the processors read and write of a key's state: Spark's ``ValueState``, or
    a ``GroupState`` through ``_GroupStateValue``."""

    def get(self) -> Any: ...

    def update(self, newValue: tuple[Any, ...]) -> None: ...  # noqa: N803 - Spark's name


class AtMostOnceProcessor:
    """Feeds each (run, receiver, class) key's rows to its receiver (module docstring):
    ``state`` is the key's state (``state_value``), set by the engine before each
    key."""

    state: StateValue

    def __init__(self, options: AtMostOnceOptions) -> None:
        # One class per key: the key already is the class.
        self.options = AtMostOnceOptions(options.receiver, 1)

    def decide(self, key: tuple[Any, ...], rows: list[dict[str, Any]]
               ) -> list[dict[str, Any]]:
        """The verdict rows of one key's rows in this batch; updates the state."""
        _, name, cls = key
        adapter = self.restored(name)
        out: list[dict[str, Any]] = []
        ordered = sorted(rows, key=row_order)
        ats = [row.get("at") for row in ordered]
        fed_at, lates = clocked(  # a row without an integer ``at`` moves no clock
            np.array([a if type(a) is int else _FLOOR for a in ats], dtype=np.int64),
            adapter.clock(name) if isinstance(name, str) else None)
        for i, row in enumerate(ordered):
            source = str(row.get(FILE_COLUMN))
            line = int(row.get(LINE_COLUMN) or 0)
            data = {k: v for k, v in row.items()
                    if v is not None and k not in (FILE_COLUMN, LINE_COLUMN)}
            late = type(ats[i]) is int and bool(lates[i])
            if late:
                data["at"] = int(fed_at[i])
            for produced in adapter.feed(Row(source, line, data)):
                decided = {column: row.get(column) for column in _INPUT_NAMES}
                decided.update(verdict=produced["verdict"], rho=produced["rho"],
                               entries=produced["entries"], cls=cls, late_arrival=late,
                               file=source, line=line)
                out.append(decided)
        if isinstance(name, str):
            self.save(adapter, name)
        return out

    def restored(self, name: Any) -> AtMostOnceAdapter:
        """A fresh adapter holding the key's receiver and clock from the state, if any:
        the warm receiver this process saved as exactly that state, else decoded."""
        adapter = AtMostOnceAdapter(self.options)
        saved = self.state.get()
        if saved is not None:
            warm = _WARM.pop((self.options, saved[0]), None)
            if warm is not None:
                adapter.adopt(name, *warm)
                return adapter
            data = decode(saved[0])
            node = ClassifiedReceiver([self.options.receiver.new_receiver()],
                                      crc32_classifier(1))
            adapter.adopt(name, restore_classified(node, data["node"]),
                             int(data["clock"]))
        return adapter

    def save(self, adapter: AtMostOnceAdapter, name: str) -> None:
        """The key's receiver and clock back into the state (once the receiver
        exists), and kept warm in this process under the bytes saved."""
        node = adapter.node(name)
        if node is not None:
            clock = adapter.clock(name)
            blob = encode({"node": classified_snapshot(node), "clock": clock})
            self.state.update((blob,))
            _WARM[(self.options, blob)] = (node, clock)
            while len(_WARM) > WARM_KEYS or sum(len(k[1]) for k in _WARM) > WARM_BYTES:
                del _WARM[next(iter(_WARM))]  # the oldest first, this one last


class ColumnarProcessor(AtMostOnceProcessor):
    """``AtMostOnceProcessor`` over ``applyInPandasWithState``'s column batches
    (module docstring, "Columns"): the same state, the same verdicts, the same rows."""

    def decide_frames(self, key: Any, frames: Iterator[Any]) -> Iterator[Any]:
        """The verdict rows of one key's pandas frames in this batch (the form
        ``applyInPandasWithState`` gives and takes)."""
        import pandas as pd

        parts = [frame for frame in frames if len(frame)]
        if not parts:
            return
        if len(parts) == 1:
            frame = parts[0]
        else:
            with warnings.catch_warnings():
                # pandas' notice that all-NA columns (``down`` in a file without crash
                # rows) will count towards the dtype: ``_arrow_rows`` types every column
                # by the contract afterwards, so either dtype gives the same table
                warnings.filterwarnings("ignore", category=FutureWarning,
                                        message="The behavior of DataFrame concatenation")
                frame = pd.concat(parts, ignore_index=True)
        try:
            out = self.decide_columns(grouping_key(key), frame)
        except TimeboundError as exc:
            raise marked(exc) from None
        if out.num_rows:  # nullable integers stay exact integers (not float64)
            yield out.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype(),
                                              pa.bool_(): pd.BooleanDtype()}.get)

    def decide_columns(self, key: tuple[Any, ...], frame: Any) -> pa.Table:
        """The verdict rows of one key's rows in this batch, as an Arrow table of
        ``VERDICTS``; updates the state. The rows go in ``seq`` order (then file,
        line); an ``at`` behind the receiver's clock is decided at the clock."""
        _, name, cls = key
        table = _arrow_rows(frame)
        table = table.take(_row_order(table))
        if not isinstance(name, str) or table.column("at").null_count:
            rows = [{**row, FILE_COLUMN: row.pop(_FILE), LINE_COLUMN: row.pop(_LINE)}
                    for row in table.drop_columns(["cls"]).to_pylist()]
            return pa.Table.from_pylist(self.decide(key, rows), schema=_VERDICTS_ARROW)
        adapter = self.restored(name)
        fed_at, late = clocked(table.column("at").to_numpy(), adapter.clock(name))
        fed = table.set_column(table.schema.get_field_index("at"), "at", pa.array(fed_at))
        files = table.column(_FILE).to_pylist()
        lines = table.column(_LINE).to_numpy(zero_copy_only=False)

        def row_path(i: int) -> list[Any]:
            data = {k: v for k, v in fed.slice(i, 1).to_pylist()[0].items()
                    if v is not None and k not in (_FILE, _LINE, "cls")}
            return list(adapter.feed(Row(str(files[i]), int(lines[i] or 0), data)))

        decided = decide_table(adapter, str(files[0]), fed, lines, row_path)
        self.save(adapter, name)
        keep = pa.array(decided.keep, type=pa.int64())
        kept = table.take(keep)
        n = len(decided.keep)
        columns = {name_: kept.column(name_) for name_ in _INPUT_NAMES}
        columns.update(verdict=decided.verdict, rho=decided.rho, entries=decided.entries,
                       cls=pa.array(np.full(n, cls, dtype=np.int64)),
                       late_arrival=pa.array(late[decided.keep]),
                       file=kept.column(_FILE), line=kept.column(_LINE))
        return pa.Table.from_arrays([columns[f.name].cast(f.type) for f in _VERDICTS_ARROW],
                                    schema=_VERDICTS_ARROW)


def clocked(at: np.ndarray, clock: int | None) -> tuple[np.ndarray, np.ndarray]:
    """The late-row rule over one key's rows in decision order: each row is decided at
    the larger of its ``at`` and the receiver's clock before it (``clock``: the
    restored receiver's, None for a new one), and it is late when that raised it.
    Returns the ``at`` each row is decided at and the ``late_arrival`` mask."""
    before = np.maximum.accumulate(np.r_[_FLOOR if clock is None else clock, at])[:-1]
    return np.maximum(at, before), at < before


def decide_messages(processor: AtMostOnceProcessor, name: str, source: str,
                    conn: pa.Array, ts: np.ndarray, at: np.ndarray
                    ) -> tuple[Decided, np.ndarray]:
    """One key's well-formed message rows of a micro-batch, in decision order,
    decided column-wise by the key's receiver restored from ``processor.state``
    (saved back after): the decisions (one per row) and the ``late_arrival`` mask.
    ``source`` names the rows in an error."""
    adapter = processor.restored(name)
    fed_at, late = clocked(at, adapter.clock(name))
    n = len(at)
    table = pa.table({"receiver": pa.array([name] * n, pa.string()), "conn": conn,
                      "ts": pa.array(ts, pa.int64()), "at": pa.array(fed_at, pa.int64())})

    def row_path(i: int) -> list[Any]:  # the row checks ran before: never reached
        raise AssertionError(f"row {i} of {source} reached the row path")

    decided = decide_table(adapter, source, table, np.arange(n), row_path,
                           all_messages=True)
    processor.save(adapter, name)
    return decided, late


def _row_order(table: pa.Table) -> pa.Array:
    """``row_order`` column-wise: ``seq`` (nulls last), then file name, then line."""
    seq = table.column("seq")
    keys = pa.table({"a": pc.is_null(seq), "b": pc.fill_null(seq, 0),
                     "c": pc.fill_null(table.column(_FILE), ""),
                     "d": pc.fill_null(table.column(_LINE), 0)})
    return pc.sort_indices(keys, sort_keys=[(k, "ascending") for k in "abcd"])


def _arrow_rows(frame: Any) -> pa.Table:
    """A key's pandas rows as Arrow, each column of its declared type (the working
    names ``_FILE``/``_LINE`` for the source's provenance; nulls kept). Columns are
    taken by position: Spark rebuilds the frame from ``itertuples``, which renames
    the source's ``_file`` and ``_line``."""
    assert len(frame.columns) == len(_IN_ARROW), list(frame.columns)
    arrays = []
    for index, field in enumerate(_IN_ARROW):
        column = frame.iloc[:, index]
        if field.type == pa.int64() and column.dtype == object:
            column = column.where(column.notna(), None)
        arrays.append(pa.array(column, type=field.type, from_pandas=True))
    return pa.Table.from_arrays(arrays, schema=_IN_ARROW).rename_columns(_IN_NAMES)


def with_classes(df: DataFrame, classes: int) -> DataFrame:
    """Add ``cls``: ``crc32(utf-8 conn) mod K`` (Spark's crc32 is the core's: both are
    java.util.zip.CRC32 / zlib.crc32 over the UTF-8 bytes); crash rows go to every
    class."""
    if classes == 1:  # one class: every row, crash rows too, is class 0
        return df.withColumn("cls", F.lit(0).cast("long"))
    k = F.lit(classes).cast("long")
    cls = F.when(F.col("type") == "crash", F.sequence(F.lit(0).cast("long"), k - 1)) \
        .otherwise(F.array(F.pmod(F.crc32(F.col("conn")), k)))
    return df.withColumn("cls", F.explode_outer(cls))


class _GroupStateValue:
    """A ``GroupState`` seen as the ``ValueState`` the processors read and write."""

    def __init__(self, state: Any) -> None:
        self.group = state

    def get(self) -> Any:
        return tuple(self.group.get) if self.group.exists else None

    def update(self, newValue: tuple[Any, ...]) -> None:  # noqa: N803 - ValueState's name
        self.group.update(newValue)


def state_value(state: Any) -> StateValue:
    """``applyInPandasWithState``'s ``GroupState`` as the processors' ``StateValue``."""
    return _GroupStateValue(state)


class GroupedDecider:
    """``applyInPandasWithState``'s function: each key's rows of a micro-batch decided
    by ``ColumnarProcessor.decide_columns`` over the key's ``GroupState`` (the same
    snapshot, the same verdict rows)."""

    def __init__(self, options: AtMostOnceOptions) -> None:
        self.processor = ColumnarProcessor(options)

    def __call__(self, key: Any, frames: Iterator[Any], state: Any) -> Iterator[Any]:
        self.processor.state = state_value(state)
        yield from self.processor.decide_frames(key, frames)


def verdicts(messages: DataFrame, options: AtMostOnceOptions) -> DataFrame:
    """The streaming verdict table of a ``messages`` stream: ``GroupedDecider`` under
    ``applyInPandasWithState`` (``GROUPED``, the one engine)."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    grouped = with_classes(messages, options.classes).groupBy("run", "receiver", "cls")
    prefer_exact_integers(messages)
    return grouped.applyInPandasWithState(GroupedDecider(options), VERDICTS, STATE_SCHEMA,
                                          "append", GroupStateTimeout.NoTimeout)


def prefer_exact_integers(df: DataFrame) -> None:
    """Spark hands ``transformWithStateInPandas`` a nullable long column as float64
    unless told otherwise, and a float64 holds integers exactly only up to 2**53: ask
    for pandas' nullable integers instead (a session setting read when the query's
    Python workers start)."""
    df.sparkSession.conf.set(INT_EXTENSION_DTYPE, "true")


def accepted(verdict_table: DataFrame) -> DataFrame:
    """Every accepted message's input columns."""
    return verdict_table.where(F.col("verdict") == "accepted").select(*_INPUT_NAMES)
