"""Streaming at-most-once: one SCMP receiver per (receiver, hash class) key.

The one engine of both streams: ``applyInPandasWithState`` (``GROUPED``), the key's
snapshot in its ``GroupState`` (the zlib-compressed JSON of ``classified_snapshot``
and the receiver's clock). Spark hands the function each key's rows of a micro-batch
as column slices of the Arrow batch; the key's receiver is restored once, the rows
are decided column-wise by ``timebound.columnar.decide_table`` (the batch operator's
path: the core's compiled receiver loop over Arrow/numpy columns, no per-row Python
object for a well-formed message), and the snapshot is written back. No protocol rule
lives here.

Its rows come from ``timebound.spark``'s ``_stream`` (the one engine's Spark side:
``at_most_once`` on a stream, and ``timebound stream atmostonce`` through it), each
key's rows of a micro-batch in decision order, to ``decide_rows``: well-formed message
rows through the core's loop column-wise, crash rows and any malformed row through the
shared row adapter (``AtMostOnceAdapter``, the replay's own) one row at a time, so
every error is the replay's own. Timers run inline, as in the replay: the adapter
fires every timer due at or before a row's ``at`` first.

The late-row rule is ``clocked`` (``_rows``), the one copy every stream applies: each
row is decided at the running maximum of the key's clock and the ``at`` before it, and
the rows it raised are the ``late_arrival`` ones. Each class is an independent receiver (the
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
in one line (``timebound stream``'s lock, ``timebound.spark``'s ``_lock``). The
command's own copy of this engine (``GroupedDecider``) wrote the same keys and state:
its checkpoints go on under this one.
"""

from __future__ import annotations

import json
import warnings
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F

from timebound.adapters import Row
from timebound.adapters.atmostonce import AtMostOnceAdapter, AtMostOnceOptions
from timebound.columnar import Decided, decide_table
from timebound.core.atmostonce import (
    ClassifiedReceiver,
    classified_snapshot,
    crc32_classifier,
    restore_classified,
)
from timebound.spark.traces._rows import FLOOR, clocked
from timebound.spark.traces._stream_schemas import MESSAGES_IN

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
#: The engine (``applyInPandasWithState``), locked into a checkpoint; the retired
#: ones (``columnar``, ``row``) are refused (``timebound stream``'s lock).
GROUPED = "grouped"
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


#: The columns ``decide_rows`` reads, in the shared row adapter's names.
ROW_COLUMNS = ("type", "conn", "ts", "at", "down")


def decide_rows(processor: AtMostOnceProcessor, name: str | None, rows: pa.Table,
                sources: str | Sequence[str], lines: np.ndarray) -> tuple[Decided, np.ndarray]:
    """One key's rows of a micro-batch, in decision order, decided by the key's
    receiver restored from ``processor.state`` (saved back after): the decisions (of
    the rows that have one: not a crash row) and the ``late_arrival`` mask of every
    row.

    ``rows`` holds ``ROW_COLUMNS`` (``type``: ``msg`` or ``crash``; nulls allowed), of
    receiver ``name``. Well-formed message rows go through the core's loop column-wise
    (``timebound.columnar.decide_table``); crash rows and any malformed row go through
    the shared row adapter one at a time, so every error is the replay's own, naming
    ``sources[i]`` (or ``sources``) and ``lines[i]``. A row without ``at`` moves no
    clock."""
    adapter = processor.restored(name)
    at = rows.column("at")
    missing = at.null_count > 0
    raw = (pc.fill_null(at, FLOOR) if missing else at).to_numpy()
    fed_at, late = clocked(raw, adapter.clock(name) if isinstance(name, str) else None)
    if missing:
        absent = at.is_null().to_numpy(zero_copy_only=False)
        late &= ~absent
        fed = pa.array(fed_at, pa.int64(), mask=absent)
    else:
        fed = pa.array(fed_at, pa.int64())
    n = rows.num_rows
    table = rows.select(list(ROW_COLUMNS)).set_column(
        ROW_COLUMNS.index("at"), "at", fed).append_column(
        "receiver", pa.repeat(pa.scalar(name, pa.string()), n))

    def row_path(i: int) -> list[Any]:
        data = {k: v for k, v in table.slice(i, 1).to_pylist()[0].items() if v is not None}
        source = sources if isinstance(sources, str) else sources[i]
        return list(adapter.feed(Row(source, int(lines[i]), data)))

    first = sources if isinstance(sources, str) else sources[0]
    decided = decide_table(adapter, first, table, lines, row_path)
    if isinstance(name, str):
        processor.save(adapter, name)
    return decided, late


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


def prefer_exact_integers(df: DataFrame) -> None:
    """Spark hands ``transformWithStateInPandas`` a nullable long column as float64
    unless told otherwise, and a float64 holds integers exactly only up to 2**53: ask
    for pandas' nullable integers instead (a session setting read when the query's
    Python workers start)."""
    df.sparkSession.conf.set(INT_EXTENSION_DTYPE, "true")


def _unchanged(key: Any, frames: Any, state: Any) -> Any:
    """``floor``'s function: each frame back as it came; the key's row count kept."""
    rows = state.get[0] if state.exists else 0
    for frame in frames:
        rows += len(frame)
        yield frame
    state.update((rows,))


def floor(df: DataFrame, receiver: str) -> DataFrame:
    """The rows of ``df`` through this engine's Spark operator and back unchanged:
    ``applyInPandasWithState`` keyed as ``at_most_once`` keys a receiver with
    ``classes=1`` (the ``receiver`` column and class 0, a long, so the keys land on the
    same tasks), one state value per key, nothing decided. What the engine's path costs
    before any work of ours (``timebound bench stream``'s ``floor`` side)."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    keyed = df.withColumn("__timebound_cls", F.lit(0).cast("long"))
    return keyed.groupBy(receiver, "__timebound_cls").applyInPandasWithState(
        _unchanged, keyed.schema, "rows long", "append", GroupStateTimeout.NoTimeout
    ).drop("__timebound_cls")


def accepted(verdict_table: DataFrame) -> DataFrame:
    """Every accepted message's input columns."""
    return verdict_table.where(F.col("verdict") == "accepted").select(*_INPUT_NAMES)
