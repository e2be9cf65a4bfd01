"""``timebound replay causal``: logical timestamps over an event trace (DESIGN.md).

A thin adapter: one ``CausalProcess`` (``--variant rckn``, Fig. 1 with the section 3.3
resets) or ``RCProcess`` (``--variant rc``, Fig. 3) per process name, created at the
paper's virtual event at rt 0. A send's timestamp is remembered under its message id
and handed to each receive of that id. Every protocol rule lives in
``timebound.core.causal``; this module validates rows and options, enforces the trace
rules (rt >= 1 and strictly increasing per process, message ids sent once, every recv
of a sent message, at most once per process) and formats output rows.

``--n`` defaults to "the processes in the input". By Lemma 3.3 no counter can exceed
the number of processes with an event at one clock value in an event's causal past,
and each process has at most one event per clock value, so no counter of a trace can
exceed its process count: the default is passed to the core as "no bound", which
decides every check the same way without reading the input twice
(``test_causal_replay.py::test_default_n_equals_process_count`` pins it).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import Any

from timebound.core.causal import CausalProcess, RCProcess, RCTimestamp, Timestamp
from timebound.replay._framework import ReplayCommand, Row, add_io_arguments, forbid, require

VARIANTS = ("rckn", "rc")
ROW_TYPES = ("local", "send", "recv")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_io_arguments(parser)
    parser.add_argument("--epsilon", type=int, metavar="E",
                        help="clock-difference bound epsilon (G1), ticks >= 1 (required)")
    parser.add_argument("--variant", choices=VARIANTS, default="rckn",
                        help="rckn: <r, c, kn> of Fig. 1 with the section 3.3 resets "
                             "(default); rc: <r, c> of Fig. 3")
    parser.add_argument("--n", type=int, metavar="N",
                        help="rckn only: the process bound of Lemma 3.4 "
                             "(default: the processes in the input)")


class CausalReplayer:
    def __init__(self, args: argparse.Namespace) -> None:
        self.epsilon = require(args, "epsilon", minimum=1)
        self.variant: str = args.variant
        if self.variant == "rc":
            forbid(args, ["n"], "with --variant rc")
            self.n: int | None = None
        else:
            self.n = None if args.n is None else require(args, "n", minimum=1)
        self._procs: dict[str, CausalProcess | RCProcess] = {}
        self._sent: dict[str, Timestamp | RCTimestamp] = {}
        self._received: set[tuple[str, str]] = set()
        self._events = 0
        self._max_c = 0

    def _process(self, name: str) -> CausalProcess | RCProcess:
        proc = self._procs.get(name)
        if proc is None:
            proc = (RCProcess(self.epsilon) if self.variant == "rc"
                    else CausalProcess(self.epsilon, self.n))
            self._procs[name] = proc
        return proc

    def feed(self, row: Row) -> Iterable[Mapping[str, Any]]:
        kind = row.choice("type", ROW_TYPES)
        name = row.str("proc")
        rt = row.int("rt", minimum=1)
        msg = row.str("msg") if kind != "local" else None
        proc = self._procs.get(name)
        if proc is not None and rt <= proc.r:
            raise row.error("rt", f"must increase for process '{name}': {rt} after {proc.r}")
        if kind == "send":
            assert msg is not None
            if msg in self._sent:
                raise row.error("msg", f"message '{msg}' was already sent")
        elif kind == "recv":
            assert msg is not None
            if msg not in self._sent:
                raise row.error("msg", f"message '{msg}' was never sent (before this row)")
            if (msg, name) in self._received:
                raise row.error("msg", f"process '{name}' already received '{msg}'")
        proc = self._process(name)
        if kind == "recv":
            assert msg is not None
            self._received.add((msg, name))
            stamp = proc.receive(self._sent[msg], rt)  # type: ignore[arg-type]
        else:
            stamp = proc.local(rt)
            if kind == "send":
                assert msg is not None
                self._sent[msg] = stamp
        self._events += 1
        if stamp.c > self._max_c:
            self._max_c = stamp.c
        out = dict(row.data)
        out["r"] = stamp.r
        out["c"] = stamp.c
        if isinstance(stamp, Timestamp):
            out["kn"] = list(stamp.kn)
        return (out,)

    def finish(self) -> Iterable[Mapping[str, Any]]:
        return ()

    def summary(self) -> list[tuple[str, object]]:
        rows: list[tuple[str, object]] = [
            ("variant", self.variant),
            ("events", self._events),
            ("processes", len(self._procs)),
            ("messages sent", len(self._sent)),
            ("receive events", len(self._received)),
            ("largest c", self._max_c),
        ]
        if self.variant == "rckn":
            rows.append(("state resets (section 3.3)",
                         sum(p.resets for p in self._procs.values()
                             if isinstance(p, CausalProcess))))
        return rows


COMMAND = ReplayCommand(
    name="causal",
    help="logical timestamps <r, c, kn> (or <r, c>) from loosely synchronized clocks",
    description="""\
Timestamp every event of a trace with the causal merge paper's logical clocks:
<r, c, kn> of Fig. 1 with the stabilizing resets of section 3.3 (--variant rckn), or
<r, c> of Fig. 3 (--variant rc). Each process starts at the virtual event at rt 0
(r = c = 0, kn[0] = 1).

input rows, in a causally consistent order (per process rt >= 1, strictly increasing):
  {"type":"local","proc":"p1","rt":6}
  {"type":"send","proc":"p1","rt":7,"msg":"m1"}     each msg id sent once
  {"type":"recv","proc":"p2","rt":9,"msg":"m1"}     after its send; once per process
output: one row per event, its fields plus
  r, c     the timestamp (r is the unbounded rt)
  kn       rckn only: 2E integers for offsets -E..E-1
A trace where every recv has r.m + c.m < rt + E never triggers a reset.

example:
  timebound replay causal --input events.jsonl --output stamps.parquet --epsilon 2
""",
    add_arguments=add_arguments,
    build=CausalReplayer,
    output_types={
        "type": "string", "proc": "string", "rt": "int64", "msg": "string",
        "r": "int64", "c": "int64", "kn": "list<int64>",
    },
    example_file="causal.jsonl",
    example_args=("--epsilon", "2"),
)
