"""Streaming causal deterministic merge: one merger per key, with or without timers.

The query: arrival files -> ``groupBy(run, merger)`` -> ``transformWithState(
TraceMergeProcessor)``. ``MergeProcessor`` holds no protocol rule: per key and
micro-batch it restores the merger from the state store (``merger_snapshot``, its
clock, the number of rows it has emitted and its timer anchor), hands it to the shared
row adapter (``timebound.adapters.merge.MergeAdapter``, the replay's own), feeds it the
key's arrivals in decision order and emits what the adapter produced -- exactly as the
replay does: before the arrivals at time T the merger delivers every buffered message
with deadline < T. An arrival whose ``at`` is behind its merger's clock (a late file)
is taken at the clock (its deadline is then usually past: ``late``).

What moves a merger's clock between arrivals (``timers``):

- ``"none"`` (``timebound stream merge``'s default): only arrivals. A stream has no
  end, so the replay's final flush never happens: what is still buffered waits for a
  later arrival at its merger (the output is the replay's, per merger, minus the
  flushed tail).
- ``"processing"``: the wall clock, through Spark's processing-time timers. After each
  micro-batch a key remembers an *anchor* (its clock and the micro-batch's processing
  time) and registers one timer for the moment its earliest buffered deadline ``d`` is
  passed: ``anchor time + (d + 1 - anchor clock) * tick``, ``tick`` being the wall-clock
  length of one ``at`` tick. When it fires (Spark runs a micro-batch for due timers
  even when no file comes) the clock becomes ``anchor clock + elapsed / tick`` and
  every message whose deadline it passed is delivered; new arrivals first bring the
  clock to that same value. A buffered message so waits for its deadline plus at most
  one trigger interval, never for the next arrival.

Event-time timers are not offered: an event-time timer fires only when the watermark
moves, that is when new arrivals come -- the wait the timers exist to end.

``TraceMergeProcessor`` (this command) keys by ``(run, merger)``, takes a key's
arrivals in ``seq`` order (files without ``seq``: file name, then line) and emits the
replay's rows plus ``run`` and ``seq`` (the row's position in that merger's output,
kept in the state), so replicated mergers fed the same messages can be compared row
for row. ``timebound.spark.causal_merge`` subclasses ``MergeProcessor`` for a caller's
own rows (it keeps each buffered arrival's row in a ``MapState`` until delivered).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from timebound.adapters import Row
from timebound.adapters.merge import MergeAdapter, MergeOptions
from timebound.core.merge import Merger, merger_snapshot, restore_merger
from timebound.errors import TimeboundError, TraceError
from timebound.spark.traces._rows import FILE_COLUMN, LINE_COLUMN, OutRow, grouping_key
from timebound.spark.traces._stream_schemas import ORDER
from timebound.sparkutil import marked

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

STATE_SCHEMA = "snapshot binary"
TIMERS = ("none", "processing")
#: ``transformWithState``'s time mode for each ``timers`` value.
TIME_MODES = {"none": "None", "processing": "ProcessingTime"}
#: A merger's arrival as the processor feeds it: the adapter's row fields, and what
#: the subclass carries to the output row (None: nothing).
Arrival = tuple[dict[str, Any], Any]


class MergeProcessor(StatefulProcessor):
    """One merger per key (module docstring). A subclass says how a key names its
    merger (``merger_name``), which arrivals a micro-batch brings in decision order
    (``arrivals``) and what row each output is (``output``); with ``pending_schema`` it
    carries something from a buffered arrival to its delivery."""

    #: The ``MapState`` value schema of a buffered arrival's carried value (None: the
    #: output rows need nothing from the arrival a delivery came from).
    pending_schema: StructType | None = None

    def __init__(self, options: MergeOptions, timers: str = "none", tick_us: int = 1000
                 ) -> None:
        self.options = options
        self.timers = timers
        self.tick_us = tick_us

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.state = handle.getValueState("merger", STATE_SCHEMA)
        if self.pending_schema is not None:
            self.pending = handle.getMapState("pending", "proc string, msg string",
                                              self.pending_schema)

    # -- what a subclass says

    def merger_name(self, key: tuple[Any, ...]) -> str:
        raise NotImplementedError

    def arrivals(self, key: tuple[Any, ...], rows: list[Any]) -> list[Arrival]:
        raise NotImplementedError

    def output(self, key: tuple[Any, ...], produced: dict[str, Any], carried: Any,
               late: bool, position: int) -> dict[str, Any]:
        raise NotImplementedError

    def refused(self, exc: TraceError) -> TimeboundError:
        """The error a row the adapter refuses raises (the adapter's own by default)."""
        return exc

    # -- state

    def _restore(self, name: str) -> tuple[MergeAdapter, dict[str, int]]:
        adapter = MergeAdapter(self.options)
        meta = {"emitted": 0, "anchor_ms": 0, "anchor_at": 0}
        saved = self.state.get()
        if saved is not None:
            data = json.loads(zlib.decompress(saved[0]).decode("utf-8"))
            merger = restore_merger(Merger(self.options.epsilon, self.options.delta),
                                    data["merger"])
            adapter.adopt(name, merger, data["clock"])
            meta = {k: int(data.get(k, 0)) for k in meta}
        return adapter, meta

    def _save(self, name: str, adapter: MergeAdapter, meta: dict[str, int],
              fired: int | None = None) -> None:
        merger = adapter.merger(name)
        if merger is None:
            return
        kept = meta if self.timers == "processing" else {"emitted": meta["emitted"]}
        blob = json.dumps({"merger": merger_snapshot(merger), "clock": adapter.clock(name),
                           **kept}, separators=(",", ":")).encode("utf-8")
        self.state.update((zlib.compress(blob, 1),))
        if self.timers != "processing":
            return
        for old in list(self.handle.listTimers()):
            if fired is None or old > fired:  # Spark removes the one that fired
                self.handle.deleteTimer(old)
        due = adapter.next_deadline(name)
        if due is not None:
            ahead = max(0, due - meta["anchor_at"]) * self.tick_us
            self.handle.registerTimer(meta["anchor_ms"] + -(-ahead // 1000))

    def _wall_clock(self, meta: dict[str, int], now_ms: int) -> int:
        """The merger's clock at processing time ``now_ms``: its anchor clock plus the
        ticks elapsed since the anchor."""
        elapsed_us = max(0, now_ms - meta["anchor_ms"]) * 1000
        return meta["anchor_at"] + elapsed_us // self.tick_us

    def _emit(self, key: tuple[Any, ...], produced: list[dict[str, Any]],
              meta: dict[str, int], held: dict[tuple[str, str], tuple[Any, bool]],
              current: tuple[Any, bool] | None) -> Iterator[OutRow]:
        """The output rows of what a merger ``produced``: a delivery carries what its
        buffered arrival carried (``held``: this micro-batch's; else the pending state),
        a late or duplicate row what the ``current`` arrival carries."""
        for out in produced:
            if out["action"] == "deliver":
                pair = (out["proc"], out["msg"])
                if pair in held:
                    carried, late = held.pop(pair)
                elif self.pending_schema is not None:
                    saved = self.pending.getValue(pair)
                    if saved is None:  # pragma: no cover - a buffered pair is pending
                        raise TraceError("state", 0, "pending", f"no buffered arrival {pair}")
                    carried, late = saved
                    self.pending.removeKey(pair)
                else:
                    carried, late = None, False
            else:
                assert current is not None
                carried, late = current
            yield OutRow(self.output(key, out, carried, late, meta["emitted"]))
            meta["emitted"] += 1

    # -- Spark's calls

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any
                        ) -> Iterator[Any]:
        try:
            yield from self._arrive(grouping_key(key), list(rows),
                                    int(timerValues.getCurrentProcessingTimeInMs()))
        except TimeboundError as exc:
            raise marked(exc) from None

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any
                           ) -> Iterator[Any]:
        try:
            values = grouping_key(key)
            name = self.merger_name(values)
            adapter, meta = self._restore(name)
            if adapter.merger(name) is None:
                return
            now_ms = int(timerValues.getCurrentProcessingTimeInMs())
            adapter.advance(name, self._wall_clock(meta, now_ms))
            yield from self._emit(values, adapter.drain(name), meta, {}, None)
            self._save(name, adapter, meta, int(expiredTimerInfo.getExpiryTimeInMs()))
        except TimeboundError as exc:
            raise marked(exc) from None

    def _arrive(self, key: tuple[Any, ...], rows: list[Any], now_ms: int
                ) -> Iterator[OutRow]:
        name = self.merger_name(key)
        adapter, meta = self._restore(name)
        if self.timers == "processing" and adapter.merger(name) is not None:
            adapter.advance(name, self._wall_clock(meta, now_ms))
            yield from self._emit(key, adapter.drain(name), meta, {}, None)
        held: dict[tuple[str, str], tuple[Any, bool]] = {}
        for data, carried in self.arrivals(key, rows):
            data["merger"] = name
            clock = adapter.clock(name)
            late = isinstance(data.get("at"), int) and clock is not None and data["at"] < clock
            if late:
                data["at"] = clock
            source, line = str(data.pop(FILE_COLUMN, "")), int(data.pop(LINE_COLUMN, 0))
            try:
                adapter.feed(Row(source, line, data))
            except TraceError as exc:
                raise self.refused(exc) from None
            produced = adapter.drain(name)
            own = bool(produced) and produced[-1]["action"] != "deliver"
            if not own:
                held[(data["proc"], data["msg"])] = (carried, late)
            yield from self._emit(key, produced, meta, held, (carried, late) if own else None)
        if self.pending_schema is not None:
            for pair, value in held.items():
                self.pending.updateValue(pair, value)
        if self.timers == "processing":
            meta["anchor_ms"] = now_ms
            meta["anchor_at"] = adapter.clock(name) or 0
        self._save(name, adapter, meta)

    def close(self) -> None:
        pass


def _order(row: dict[str, Any]) -> tuple[Any, ...]:
    seq = row.get("seq")
    return (seq is None, seq if seq is not None else 0, row.get(FILE_COLUMN) or "",
            row.get(LINE_COLUMN) or 0)


class TraceMergeProcessor(MergeProcessor):
    """``timebound stream merge``: keys ``(run, merger)`` of the arrivals table, rows in
    ``seq`` order, the replay's output rows plus ``run`` and ``seq``."""

    def merger_name(self, key: tuple[Any, ...]) -> str:
        return key[1]  # type: ignore[no-any-return]

    def arrivals(self, key: tuple[Any, ...], rows: list[Any]) -> list[Arrival]:
        out: list[Arrival] = []
        for row in sorted((row.asDict() for row in rows), key=_order):
            data = {k: v for k, v in row.items() if v is not None}
            data[FILE_COLUMN] = str(row.get(FILE_COLUMN))
            out.append((data, None))
        return out

    def output(self, key: tuple[Any, ...], produced: dict[str, Any], carried: Any,
               late: bool, position: int) -> dict[str, Any]:
        return {"run": key[0], "merger": produced["merger"], "seq": position,
                "msg": produced["msg"], "proc": produced["proc"],
                "action": produced["action"], "time": produced["time"]}


def merge_order(arrivals: DataFrame, options: MergeOptions, timers: str = "none",
                tick_us: int = 1000) -> DataFrame:
    """The streaming order table of an ``arrivals`` stream."""
    return arrivals.groupBy("run", "merger").transformWithState(
        TraceMergeProcessor(options, timers, tick_us), ORDER, "Append", TIME_MODES[timers])
