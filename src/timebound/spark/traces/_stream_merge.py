"""Streaming causal deterministic merge: one merger per key, with or without timers.

The query: arrival files -> ``groupBy(run, merger)`` -> ``transformWithStateInPandas(
TraceMergeProcessor)`` (the engine ``COLUMNAR``). Spark hands a key's rows of a
micro-batch as pandas frames; ``MergeProcessor`` takes them whole: it restores the key's
state once (``STATE_SCHEMA``: the merger's snapshot -- ``merger_snapshot``, its clock,
the number of rows it has emitted and its timer anchor -- and what the buffered
arrivals carry to their delivery), puts the rows in decision order with one Arrow sort
(``arrivals``), hands the merger to the shared row adapter
(``timebound.adapters.merge.MergeAdapter``, the replay's own), feeds it the key's
arrivals in that order, builds the key's output frame column by column (``output``)
and writes the state back once. No protocol rule lives here: exactly as the replay
does, before the arrivals at time T the merger delivers every buffered message with
deadline < T. An arrival whose ``at`` is behind its merger's clock (a late file) is
taken at the clock (its deadline is then usually past: ``late``): the late-row rule
of every stream, ``clocked``.

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
own rows (``carries``: each buffered arrival's row waits in the key's state until
delivered, one entry per buffered message: the state is bounded by the buffer).

The engine before this one (``row``: ``transformWithState``, one Python call per row
and one ``MapState`` entry per buffered row) is retired: Spark restarts state only
under the operator that wrote it, so a checkpoint it started is refused in one line
(the locks of ``timebound stream`` and ``timebound.spark``).
"""

from __future__ import annotations

import json
import pickle
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from timebound.adapters import Row
from timebound.adapters.merge import MergeAdapter, MergeOptions
from timebound.core.merge import Merger, merger_snapshot, restore_merger
from timebound.errors import TimeboundError, TraceError
from timebound.spark.traces._rows import (
    FILE_COLUMN,
    FLOOR,
    LINE_COLUMN,
    arrow_frame,
    clocked,
    frames_of,
    grouping_key,
)
from timebound.spark.traces._stream_schemas import ORDER, source_schema
from timebound.sparkutil import marked

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

#: A key's state: the merger's snapshot (zlib JSON) and the buffered arrivals' carried
#: values (zlib pickle; empty when nothing is carried).
STATE_SCHEMA = "snapshot binary, pending binary"
TIMERS = ("none", "processing")
#: ``transformWithStateInPandas``' time mode for each ``timers`` value.
TIME_MODES = {"none": "None", "processing": "ProcessingTime"}
#: The merge streams' engine (``transformWithStateInPandas``), locked into a checkpoint;
#: the retired ``row`` engine's checkpoints are refused.
COLUMNAR = "columnar"
#: A merger's arrival as the processor feeds it: the adapter's row fields, and what
#: the subclass carries to the output row (None: nothing).
Arrival = tuple[dict[str, Any], Any]
#: One output row before the subclass shapes it: what the adapter produced, what the
#: arrival carried, whether its ``at`` was behind the clock, its position.
Produced = tuple[dict[str, Any], Any, bool, int]
_Pair = tuple[str, str]


class MergeProcessor(StatefulProcessor):
    """One merger per key (module docstring). A subclass says how a key names its
    merger (``merger_name``), which arrivals a micro-batch's frame brings in decision
    order (``arrivals``) and what frame a key's output rows are (``output``); with
    ``carries`` it keeps what a buffered arrival carries until its delivery."""

    #: Whether a buffered arrival's carried value is kept to its delivery.
    carries = False

    def __init__(self, options: MergeOptions, timers: str = "none", tick_us: int = 1000
                 ) -> None:
        self.options = options
        self.timers = timers
        self.tick_us = tick_us

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.state = handle.getValueState("merger", STATE_SCHEMA)

    # -- what a subclass says

    def merger_name(self, key: tuple[Any, ...]) -> str:
        raise NotImplementedError

    def arrivals(self, key: tuple[Any, ...], frame: Any) -> list[Arrival]:
        raise NotImplementedError

    def output(self, key: tuple[Any, ...], rows: list[Produced]) -> Any:
        """The pandas frame of a key's output rows."""
        raise NotImplementedError

    def refused(self, exc: TraceError) -> TimeboundError:
        """The error a row the adapter refuses raises (the adapter's own by default)."""
        return exc

    # -- state

    def _restore(self, name: str) -> tuple[MergeAdapter, dict[str, int],
                                           dict[_Pair, tuple[Any, bool]]]:
        adapter = MergeAdapter(self.options)
        meta = {"emitted": 0, "anchor_ms": 0, "anchor_at": 0}
        pending: dict[_Pair, tuple[Any, bool]] = {}
        saved = self.state.get()
        if saved is not None:
            data = json.loads(zlib.decompress(saved[0]).decode("utf-8"))
            merger = restore_merger(Merger(self.options.epsilon, self.options.delta),
                                    data["merger"])
            adapter.adopt(name, merger, data["clock"])
            meta = {k: int(data.get(k, 0)) for k in meta}
            if saved[1]:
                pending = {(proc, msg): (carried, late) for proc, msg, carried, late
                           in pickle.loads(zlib.decompress(saved[1]))}
        return adapter, meta, pending

    def _save(self, name: str, adapter: MergeAdapter, meta: dict[str, int],
              pending: dict[_Pair, tuple[Any, bool]], fired: int | None = None) -> None:
        merger = adapter.merger(name)
        if merger is None:
            return
        kept = meta if self.timers == "processing" else {"emitted": meta["emitted"]}
        blob = json.dumps({"merger": merger_snapshot(merger), "clock": adapter.clock(name),
                           **kept}, separators=(",", ":")).encode("utf-8")
        carried = b""
        if pending:
            carried = zlib.compress(pickle.dumps(
                [(proc, msg, value, late) for (proc, msg), (value, late) in pending.items()],
                protocol=4), 1)
        self.state.update((zlib.compress(blob, 1), carried))
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

    @staticmethod
    def _emit(produced: list[dict[str, Any]], meta: dict[str, int],
              held: dict[_Pair, tuple[Any, bool]], pending: dict[_Pair, tuple[Any, bool]],
              current: tuple[Any, bool] | None, out: list[Produced]) -> None:
        """The output rows of what a merger ``produced``: a delivery carries what its
        buffered arrival carried (``held``: this micro-batch's; else ``pending``, the
        state's), a late or duplicate row what the ``current`` arrival carries."""
        for row in produced:
            if row["action"] == "deliver":
                pair = (row["proc"], row["msg"])
                found = held.pop(pair, None)
                if found is None:
                    found = pending.pop(pair, (None, False))
                carried, late = found
            else:
                assert current is not None
                carried, late = current
            out.append((row, carried, late, meta["emitted"]))
            meta["emitted"] += 1

    # -- Spark's calls

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any
                        ) -> Iterator[Any]:
        try:
            frame = frames_of(rows)
            if frame is None:
                return
            values = grouping_key(key)
            out = self._arrive(values, frame,
                               int(timerValues.getCurrentProcessingTimeInMs()))
            if out:
                yield self.output(values, out)
        except TimeboundError as exc:
            raise marked(exc) from None

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any
                           ) -> Iterator[Any]:
        try:
            values = grouping_key(key)
            name = self.merger_name(values)
            adapter, meta, pending = self._restore(name)
            if adapter.merger(name) is None:
                return
            now_ms = int(timerValues.getCurrentProcessingTimeInMs())
            adapter.advance(name, self._wall_clock(meta, now_ms))
            out: list[Produced] = []
            self._emit(adapter.drain(name), meta, {}, pending, None, out)
            self._save(name, adapter, meta, pending,
                       int(expiredTimerInfo.getExpiryTimeInMs()))
            if out:
                yield self.output(values, out)
        except TimeboundError as exc:
            raise marked(exc) from None

    def _arrive(self, key: tuple[Any, ...], frame: Any, now_ms: int) -> list[Produced]:
        name = self.merger_name(key)
        adapter, meta, pending = self._restore(name)
        out: list[Produced] = []
        if self.timers == "processing" and adapter.merger(name) is not None:
            adapter.advance(name, self._wall_clock(meta, now_ms))
            self._emit(adapter.drain(name), meta, {}, pending, None, out)
        held: dict[_Pair, tuple[Any, bool]] = {}
        arrivals = list(self.arrivals(key, frame))
        ats = [data.get("at") for data, _ in arrivals]  # a row without one moves no clock
        fed_at, lates = clocked(np.array([a if type(a) is int else FLOOR for a in ats],
                                         dtype=np.int64), adapter.clock(name))
        for i, (data, carried) in enumerate(arrivals):
            data["merger"] = name
            late = type(ats[i]) is int and bool(lates[i])
            if late:
                data["at"] = int(fed_at[i])
            source, line = str(data.pop(FILE_COLUMN, "")), int(data.pop(LINE_COLUMN, 0))
            try:
                adapter.feed(Row(source, line, data))
            except TraceError as exc:
                raise self.refused(exc) from None
            produced = adapter.drain(name)
            own = bool(produced) and produced[-1]["action"] != "deliver"
            if not own:
                held[(data["proc"], data["msg"])] = (carried, late)
            self._emit(produced, meta, held, pending, (carried, late) if own else None, out)
        if self.carries:
            pending.update(held)
        if self.timers == "processing":
            meta["anchor_ms"] = now_ms
            meta["anchor_at"] = adapter.clock(name) or 0
        self._save(name, adapter, meta, pending if self.carries else {})
        return out

    def close(self) -> None:
        pass


def _source_arrow() -> pa.Schema:
    """The arrivals source's columns as Arrow types (the frame's columns, in order)."""
    from pyspark.sql.pandas.types import to_arrow_type

    return pa.schema([pa.field(f.name, to_arrow_type(f.dataType))
                      for f in source_schema("arrivals").fields])


class TraceMergeProcessor(MergeProcessor):
    """``timebound stream merge``: keys ``(run, merger)`` of the arrivals table, rows in
    ``seq`` order (then file name, line), the replay's output rows plus ``run`` and
    ``seq``."""

    def __init__(self, options: MergeOptions, timers: str = "none", tick_us: int = 1000
                 ) -> None:
        super().__init__(options, timers, tick_us)
        self.schema = _source_arrow()

    def merger_name(self, key: tuple[Any, ...]) -> str:
        return key[1]  # type: ignore[no-any-return]

    def arrivals(self, key: tuple[Any, ...], frame: Any) -> list[Arrival]:
        table = arrow_frame(frame, self.schema)
        seq = table.column("seq")
        keys = pa.table({"a": pc.is_null(seq), "b": pc.fill_null(seq, 0),
                         "c": pc.fill_null(table.column(FILE_COLUMN), ""),
                         "d": pc.fill_null(table.column(LINE_COLUMN), 0)})
        order = pc.sort_indices(keys, sort_keys=[(k, "ascending") for k in "abcd"])
        out: list[Arrival] = []
        for row in table.take(order).to_pylist():
            data = {k: v for k, v in row.items() if v is not None}
            data[FILE_COLUMN] = str(row.get(FILE_COLUMN))
            out.append((data, None))
        return out

    def output(self, key: tuple[Any, ...], rows: list[Produced]) -> Any:
        import pandas as pd

        return pd.DataFrame({
            "run": [key[0]] * len(rows),
            "merger": [produced["merger"] for produced, _, _, _ in rows],
            "seq": pd.array([position for _, _, _, position in rows], dtype="int64"),
            "msg": [produced["msg"] for produced, _, _, _ in rows],
            "proc": [produced["proc"] for produced, _, _, _ in rows],
            "action": [produced["action"] for produced, _, _, _ in rows],
            "time": pd.array([produced["time"] for produced, _, _, _ in rows],
                             dtype="int64")})


def merge_order(arrivals: DataFrame, options: MergeOptions, timers: str = "none",
                tick_us: int = 1000) -> DataFrame:
    """The streaming order table of an ``arrivals`` stream."""
    from timebound.spark.traces._stream_atmostonce import prefer_exact_integers

    prefer_exact_integers(arrivals)
    return arrivals.groupBy("run", "merger").transformWithStateInPandas(
        TraceMergeProcessor(options, timers, tick_us), ORDER, "Append", TIME_MODES[timers])
