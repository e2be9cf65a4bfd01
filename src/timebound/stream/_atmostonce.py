"""Streaming at-most-once: one SCMP receiver per (run, receiver, hash class) key.

The query: trace files -> ``cls = crc32(utf-8 conn) mod K`` (crash rows copied to
every class, as the batch operator does) -> ``groupBy(run, receiver, cls)`` ->
``transformWithState(AtMostOnceProcessor, timeMode="None")``.

``AtMostOnceProcessor`` holds no protocol rule. For each key in a micro-batch it
loads the key's snapshot from the state store once (a ``ValueState`` holding the
zlib-compressed JSON of ``classified_snapshot`` and the receiver's clock), restores a
receiver built from the run's ``ReceiverConfig``, hands it to the shared row adapter
(``timebound.adapters.atmostonce.AtMostOnceAdapter``, the replay's own), feeds it the
key's rows in ``seq`` order (files without ``seq``: file name, then line), writes the
snapshot back and emits one verdict row per message row. Timers run inline, as in
the replay: the adapter fires every timer due at or before a row's ``at`` first.

Each class is an independent receiver (the replay's ``--classes``), so a key's adapter
is built with one class; its clock is the class receiver's. A row whose ``at`` is
behind that clock (a late file) is fed with ``at`` = the clock: it is decided at the
receiver's clock, marked ``late_arrival`` (its own ``at`` is kept in the output) --
never dropped, and never a reason to accept a duplicate (the core's rules do not
depend on time for that). A crash row behind the clock crashes at the clock.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from timebound.adapters import Row
from timebound.adapters.atmostonce import AtMostOnceAdapter, AtMostOnceOptions
from timebound.core.atmostonce import (
    ClassifiedReceiver,
    classified_snapshot,
    crc32_classifier,
    restore_classified,
)
from timebound.errors import TimeboundError
from timebound.stream._adapt import atmostonce_adopt, atmostonce_clock, atmostonce_node
from timebound.stream._errors import OutRow, grouping_key, marked
from timebound.stream._schemas import MESSAGES_IN, VERDICTS
from timebound.stream._source import FILE_COLUMN, LINE_COLUMN

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

STATE_SCHEMA = "snapshot binary"
_INPUT_NAMES = [name for name, _ in MESSAGES_IN]


def encode(data: object) -> bytes:
    return zlib.compress(json.dumps(data, separators=(",", ":")).encode("utf-8"), 1)


def decode(blob: bytes) -> Any:
    return json.loads(zlib.decompress(blob).decode("utf-8"))


def row_order(row: dict[str, Any]) -> tuple[Any, ...]:
    """``seq`` order; rows without ``seq`` by file name, then line."""
    seq = row.get("seq")
    return (seq is None, seq if seq is not None else 0, row.get(FILE_COLUMN) or "",
            row.get(LINE_COLUMN) or 0)


class AtMostOnceProcessor(StatefulProcessor):
    """Feeds each (run, receiver, class) key's rows to its receiver (module docstring)."""

    def __init__(self, options: AtMostOnceOptions) -> None:
        # One class per key: the key already is the class.
        self.options = AtMostOnceOptions(options.receiver, 1)

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState("receiver", STATE_SCHEMA)

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any
                        ) -> Iterator[Any]:
        try:
            outputs = self.decide(grouping_key(key), [row.asDict() for row in rows])
        except TimeboundError as exc:
            raise marked(exc) from None
        for out in outputs:
            yield OutRow(out)

    def decide(self, key: tuple[Any, ...], rows: list[dict[str, Any]]
               ) -> list[dict[str, Any]]:
        """The verdict rows of one key's rows in this batch; updates the state."""
        _, name, cls = key
        adapter = AtMostOnceAdapter(self.options)
        saved = self.state.get()
        if saved is not None:
            data = decode(saved[0])
            node = ClassifiedReceiver([self.options.receiver.new_receiver()],
                                      crc32_classifier(1))
            atmostonce_adopt(adapter, name, restore_classified(node, data["node"]),
                             int(data["clock"]))
        out: list[dict[str, Any]] = []
        for row in sorted(rows, key=row_order):
            source = str(row.get(FILE_COLUMN))
            line = int(row.get(LINE_COLUMN) or 0)
            data = {k: v for k, v in row.items()
                    if v is not None and k not in (FILE_COLUMN, LINE_COLUMN)}
            at = data.get("at")
            clock = atmostonce_clock(adapter, name) if isinstance(name, str) else None
            late = isinstance(at, int) and clock is not None and at < clock
            if late:
                data["at"] = clock
            for produced in adapter.feed(Row(source, line, data)):
                decided = {column: row.get(column) for column in _INPUT_NAMES}
                decided.update(verdict=produced["verdict"], rho=produced["rho"],
                               entries=produced["entries"], cls=cls, late_arrival=late,
                               file=source, line=line)
                out.append(decided)
        node_after = atmostonce_node(adapter, name) if isinstance(name, str) else None
        if node_after is not None:
            clock = atmostonce_clock(adapter, name)
            self.state.update((encode({"node": classified_snapshot(node_after),
                                       "clock": clock}),))
        return out

    def close(self) -> None:
        pass


def with_classes(df: DataFrame, classes: int) -> DataFrame:
    """Add ``cls``: ``crc32(utf-8 conn) mod K`` (Spark's crc32 is the core's: both are
    java.util.zip.CRC32 / zlib.crc32 over the UTF-8 bytes); crash rows go to every
    class."""
    k = F.lit(classes).cast("long")
    cls = F.when(F.col("type") == "crash", F.sequence(F.lit(0).cast("long"), k - 1)) \
        .otherwise(F.array(F.pmod(F.crc32(F.col("conn")), k)))
    return df.withColumn("cls", F.explode_outer(cls))


def verdicts(messages: DataFrame, options: AtMostOnceOptions) -> DataFrame:
    """The streaming verdict table of a ``messages`` stream."""
    return with_classes(messages, options.classes).groupBy("run", "receiver", "cls") \
        .transformWithState(AtMostOnceProcessor(options), VERDICTS, "Append", "None")


def accepted(verdict_table: DataFrame) -> DataFrame:
    """Every accepted message's input columns."""
    return verdict_table.where(F.col("verdict") == "accepted").select(*_INPUT_NAMES)
