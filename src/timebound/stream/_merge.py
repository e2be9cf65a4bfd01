"""Streaming causal deterministic merge: one merger per (run, merger) key.

The query: arrival files -> ``groupBy(run, merger)`` ->
``transformWithState(MergeProcessor, timeMode="None")``. ``MergeProcessor`` holds no
protocol rule: per key and micro-batch it restores the merger from the state store
(``merger_snapshot``, its clock and the number of rows it has emitted), hands it to
the shared row adapter (``timebound.adapters.merge.MergeAdapter``, the replay's own),
feeds it the key's arrivals in ``seq`` order (files without ``seq``: file name, then
line) and emits what the adapter produced -- exactly as the replay does: before the
arrivals at time T the merger delivers every buffered message with deadline < T, so
its clock is advanced by the arrivals' ``at``. A stream has no end, so the replay's
final flush never happens: what is still buffered waits for a later arrival (the
output is the replay's, per merger, minus the flushed tail).

Every output row carries ``seq``, its position in that merger's output (kept in the
state), so replicated mergers fed the same messages can be compared row for row. An
arrival whose ``at`` is behind its merger's clock (a late file) is taken at the clock
(its deadline is then usually past: ``late``).
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
from timebound.errors import TimeboundError
from timebound.stream._errors import OutRow, grouping_key, marked
from timebound.stream._schemas import ORDER
from timebound.stream._source import FILE_COLUMN, LINE_COLUMN

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

STATE_SCHEMA = "snapshot binary"


def _order(row: dict[str, Any]) -> tuple[Any, ...]:
    seq = row.get("seq")
    return (seq is None, seq if seq is not None else 0, row.get(FILE_COLUMN) or "",
            row.get(LINE_COLUMN) or 0)


class MergeProcessor(StatefulProcessor):
    """Feeds each (run, merger) key's arrivals to its merger (module docstring)."""

    def __init__(self, options: MergeOptions) -> None:
        self.options = options

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState("merger", STATE_SCHEMA)

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
        run, name = key
        adapter = MergeAdapter(self.options)
        emitted = 0
        saved = self.state.get()
        if saved is not None:
            data = json.loads(zlib.decompress(saved[0]).decode("utf-8"))
            merger = restore_merger(Merger(self.options.epsilon, self.options.delta),
                                    data["merger"])
            adapter.adopt(name, merger, data["clock"])
            emitted = int(data["emitted"])
        for row in sorted(rows, key=_order):
            data = {k: v for k, v in row.items()
                    if v is not None and k not in (FILE_COLUMN, LINE_COLUMN)}
            clock = adapter.clock(name) if isinstance(name, str) else None
            if isinstance(data.get("at"), int) and clock is not None and data["at"] < clock:
                data["at"] = clock
            adapter.feed(Row(str(row.get(FILE_COLUMN)), int(row.get(LINE_COLUMN) or 0), data))
        out: list[dict[str, Any]] = []
        if isinstance(name, str):
            for produced in adapter.drain(name):
                out.append({"run": run, "merger": name, "seq": emitted,
                            "msg": produced["msg"], "proc": produced["proc"],
                            "action": produced["action"], "time": produced["time"]})
                emitted += 1
            merger_now = adapter.merger(name)
            if merger_now is not None:
                blob = json.dumps({"merger": merger_snapshot(merger_now),
                                   "clock": adapter.clock(name), "emitted": emitted},
                                  separators=(",", ":")).encode("utf-8")
                self.state.update((zlib.compress(blob, 1),))
        return out

    def close(self) -> None:
        pass


def merge_order(arrivals: DataFrame, options: MergeOptions) -> DataFrame:
    """The streaming order table of an ``arrivals`` stream."""
    return arrivals.groupBy("run", "merger").transformWithState(
        MergeProcessor(options), ORDER, "Append", "None")
