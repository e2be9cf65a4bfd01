"""``timebound replay merge``: causal deterministic mergers over arrival rows (DESIGN.md).

A thin adapter: one ``timebound.core.merge.Merger`` per merger name. For a row at
time T of merger M it first lets M deliver everything with deadline < T (this also
delivers the deadline = T' messages of M's previous time T' < T, which the contract
delivers right after the rows at T' -- the same order, since deliveries are sorted by
deadline), then hands the row to ``Merger.receive``. At the end every merger
delivers what it still buffers. Output rows are held per merger and written grouped
by merger in order of first appearance.

Rows validated here: ``merger``, ``msg``, ``proc`` non-empty strings; ``at``, ``r``,
``c`` integers; ``kn`` (rckn only) a list of 2E integers; ``at`` non-decreasing per
merger. Timestamp values are not otherwise constrained: a corrupted timestamp is the
merger's business (it is buffered to its deadline like any other, Theorem 4.6).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import Any

from timebound.core.causal import RCTimestamp, Timestamp
from timebound.core.merge import Delivery, Envelope, Merger, Verdict
from timebound.replay._framework import ReplayCommand, Row, add_io_arguments, require

VARIANTS = ("rckn", "rc")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_io_arguments(parser)
    parser.add_argument("--epsilon", type=int, metavar="E",
                        help="clock-difference bound epsilon (G1), ticks >= 1 (required)")
    parser.add_argument("--delta", type=int, metavar="D",
                        help="message-delay bound delta (G2), ticks >= 0 (required)")
    parser.add_argument("--variant", choices=VARIANTS, default="rckn",
                        help="rckn: rows carry r, c, kn (default); rc: rows carry r, c")


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


class MergeReplayer:
    def __init__(self, args: argparse.Namespace) -> None:
        self.epsilon = require(args, "epsilon", minimum=1)
        self.delta = require(args, "delta", minimum=0)
        self.variant: str = args.variant
        self._lanes: dict[str, _Lane] = {}

    def feed(self, row: Row) -> Iterable[Mapping[str, Any]]:
        name = row.str("merger")
        msg = row.str("msg")
        proc = row.str("proc")
        at = row.int("at")
        r = row.int("r")
        c = row.int("c")
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
        if lane.at is None or at > lane.at:
            lane.deliver(lane.merger.deliver_until(at - 1))
            lane.at = at
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


COMMAND = ReplayCommand(
    name="merge",
    help="causal deterministic mergers: buffer to r + c + delta + epsilon, then deliver",
    description="""\
Replay arrivals at causal deterministic mergers (causal merge paper, section 4).
Deadline = r + c + D + E. Before its rows at time T a merger delivers every buffered
message with deadline < T; each of its rows at T is then late (deadline < T),
duplicate (a repeat of a message, proc and msg, it buffered or delivered) or
buffered; then it delivers deadline = T. At the end of input it delivers the rest.
Equal deadlines go by the paper's less, then proc, then msg.

input rows (per merger, `at` never decreases):
  {"merger":"M1","msg":"m1","proc":"p1","at":12,"r":5,"c":1,"kn":[0,1,2,0]}
  (kn: 2E integers, rckn only; no kn with --variant rc)
output: rows grouped by merger in order of first appearance, each merger's in the
order it acts:
  {"merger":"M1","msg":"m1","proc":"p1","action":"deliver","time":9}
  action deliver (time = deadline) | late | duplicate (time = at)

example:
  timebound replay merge --input arrivals.jsonl --output order.jsonl \\
      --epsilon 2 --delta 3
""",
    add_arguments=add_arguments,
    build=MergeReplayer,
    output_types={
        "merger": "string", "msg": "string", "proc": "string", "action": "string",
        "time": "int64",
    },
    example_file="merge.jsonl",
    example_args=("--epsilon", "2", "--delta", "3"),
)
