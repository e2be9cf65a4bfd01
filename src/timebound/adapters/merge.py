"""Merge row adapter: causal deterministic mergers over ``arrivals`` rows (docs/replay-merge.md).

One ``timebound.core.merge.Merger`` per merger name. For a row at time T of merger M
it first lets M deliver everything with deadline < T (this also delivers the
deadline = T' messages of M's previous time T' < T, which the contract delivers right
after the rows at T' -- the same order, since deliveries are sorted by deadline), then
hands the row to ``Merger.receive``. At the end every merger delivers what it still
buffers. Output rows are held per merger and written grouped by merger in order of
first appearance.

Rows validated here: ``merger``, ``msg``, ``proc`` non-empty strings; ``at``, ``r``,
``c`` integers; ``kn`` (rckn only) a list of 2E integers; ``at`` non-decreasing per
merger. Timestamp values are not otherwise constrained: a corrupted timestamp is the
merger's business (it is buffered to its deadline like any other, Theorem 4.6).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from timebound.adapters._options import Values, choice, require
from timebound.adapters._rows import Row
from timebound.contract import REPLAY_OUTPUTS, VARIANTS
from timebound.core.causal import RCTimestamp, Timestamp
from timebound.core.merge import Delivery, Envelope, Merger, Verdict


@dataclass(frozen=True, slots=True)
class MergeOptions:
    epsilon: int
    delta: int
    variant: str = "rckn"

    @classmethod
    def from_values(cls, values: Values) -> MergeOptions:
        return cls(require(values, "epsilon", minimum=1), require(values, "delta", minimum=0),
                   choice(values, "variant", VARIANTS, "rckn"))



class _Lane:
    """One merger, its last time and its output rows."""

    __slots__ = ("name", "merger", "at", "rows")

    def __init__(self, name: str, merger: Merger) -> None:
        self.name = name
        self.merger = merger
        self.at: int | None = None
        self.rows: list[dict[str, Any]] = []

    def deliver(self, deliveries: list[Delivery]) -> None:
        for item in deliveries:
            self.rows.append({"merger": self.name, "msg": item.envelope.msg,
                              "proc": item.envelope.proc, "action": "deliver",
                              "time": item.time})


class MergeAdapter:
    output_types: Mapping[str, str] = REPLAY_OUTPUTS["merge"]

    def __init__(self, options: MergeOptions) -> None:
        self.options = options
        self.epsilon = options.epsilon
        self.delta = options.delta
        self.variant = options.variant
        self._lanes: dict[str, _Lane] = {}

    # -- hooks for drivers that keep each merger elsewhere between batches (streaming)

    def merger(self, name: str) -> Merger | None:
        lane = self._lanes.get(name)
        return None if lane is None else lane.merger

    def clock(self, name: str) -> int | None:
        """The last ``at`` merger ``name`` has seen (None: no row yet)."""
        lane = self._lanes.get(name)
        return None if lane is None else lane.at

    def adopt(self, name: str, merger: Merger, clock: int | None) -> None:
        """Install a restored merger and its last ``at``; its pending rows start empty."""
        lane = self._lanes[name] = _Lane(name, merger)
        lane.at = clock

    def next_deadline(self, name: str) -> int | None:
        """The clock value at which merger ``name`` next has something to deliver (the
        earliest buffered deadline + 1: a deadline ``d`` is delivered once the clock is
        past it), or None (nothing buffered, or no such merger)."""
        lane = self._lanes.get(name)
        due = None if lane is None else lane.merger.next_deadline()
        return None if due is None else due + 1

    def advance(self, name: str, now: int) -> None:
        """Merger ``name``'s clock reached ``now`` with no arrival (a timer): it delivers
        what it would deliver before an arrival at ``now`` (deadline < ``now``). A clock
        never goes back: ``now`` at or behind it changes nothing."""
        lane = self._lanes.get(name)
        if lane is not None and (lane.at is None or now > lane.at):
            lane.deliver(lane.merger.handle_timer(now=now - 1))
            lane.at = now

    def drain(self, name: str) -> list[dict[str, Any]]:
        """The output rows merger ``name`` has produced so far, removed from it (what
        ``finish`` would yield, without flushing the merger)."""
        lane = self._lanes.get(name)
        if lane is None:
            return []
        rows, lane.rows = lane.rows, []
        return rows

    def feed(self, row: Row) -> Iterable[Mapping[str, Any]]:
        name = row.string("merger")
        msg = row.string("msg")
        proc = row.string("proc")
        at = row.integer("at")
        r = row.integer("r")
        c = row.integer("c")
        stamp: Timestamp | RCTimestamp
        if self.variant == "rckn":
            stamp = Timestamp(r, c, tuple(row.int_list("kn", length=2 * self.epsilon)))
        else:
            stamp = RCTimestamp(r, c)
        lane = self._lanes.get(name)
        if lane is None:
            lane = self._lanes[name] = _Lane(name, Merger(self.epsilon, self.delta))
        elif lane.at is not None and at < lane.at:
            raise row.error("at", f"goes backwards for merger '{name}': {at} after {lane.at}")
        self.advance(name, at)
        verdict = lane.merger.receive(Envelope(proc, msg, stamp), now=at)
        if verdict is not Verdict.BUFFERED:
            lane.rows.append({"merger": name, "msg": msg, "proc": proc,
                              "action": verdict.value, "time": at})
        return ()

    def finish(self) -> Iterable[Mapping[str, Any]]:
        for lane in self._lanes.values():
            lane.deliver(lane.merger.flush())
            yield from lane.rows
            lane.rows = []

    def summary(self) -> list[tuple[str, object]]:
        stats = [lane.merger.statistics() for lane in self._lanes.values()]
        return [
            ("variant", self.variant),
            ("mergers", len(stats)),
            ("arrivals", sum(s.received for s in stats)),
            ("delivered", sum(s.delivered for s in stats)),
            ("late (dropped)", sum(s.late for s in stats)),
            ("duplicates (dropped)", sum(s.duplicates for s in stats)),
            ("largest buffer", max((s.max_buffered for s in stats), default=0)),
            ("longest buffering (ticks)", max((s.max_buffering for s in stats), default=0)),
        ]
