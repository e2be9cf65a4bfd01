"""Causal row adapter: logical timestamps over ``events`` rows (docs/replay-causal.md).

One ``CausalProcess`` (variant ``rckn``, Fig. 1 with the section 3.3 resets) or
``RCProcess`` (variant ``rc``, Fig. 3) per process name, created at the paper's
virtual event at rt 0. A send's timestamp is remembered under its message id and
handed to each receive of that id. Every protocol rule lives in
``timebound.core.causal``; this module validates rows and options, enforces the trace
rules (rt >= 1 and strictly increasing per process, message ids sent once, every recv
of a sent message, at most once per process) and formats output rows.

``n`` defaults to "the processes in the input". By Lemma 3.3 no counter can exceed
the number of processes with an event at one clock value in an event's causal past,
and each process has at most one event per clock value, so no counter of a trace can
exceed its process count: the default is passed to the core as "no bound", which
decides every check the same way without reading the input twice
(``test_causal_replay.py::test_default_n_equals_process_count`` pins it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from timebound.adapters._options import Values, choice, forbid, require
from timebound.adapters._rows import Row
from timebound.contract import REPLAY_OUTPUTS, VARIANTS
from timebound.core.causal import CausalProcess, RCProcess, RCTimestamp, Timestamp

ROW_TYPES = ("local", "send", "recv")


@dataclass(frozen=True, slots=True)
class CausalOptions:
    epsilon: int
    variant: str = "rckn"
    n: int | None = None

    @classmethod
    def from_values(cls, values: Values) -> CausalOptions:
        epsilon = require(values, "epsilon", minimum=1)
        variant = choice(values, "variant", VARIANTS, "rckn")
        if variant == "rc":
            forbid(values, ["n"], "with --variant rc")
            return cls(epsilon, variant, None)
        n = None if values.get("n") is None else require(values, "n", minimum=1)
        return cls(epsilon, variant, n)



class CausalAdapter:
    output_types: Mapping[str, str] = REPLAY_OUTPUTS["causal"]

    def __init__(self, options: CausalOptions) -> None:
        self.options = options
        self.epsilon = options.epsilon
        self.variant = options.variant
        self.n = options.n
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
        name = row.string("proc")
        rt = row.integer("rt", minimum=1)
        msg = row.string("msg") if kind != "local" else None
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
        stamp: Timestamp | RCTimestamp
        if kind == "recv":
            assert msg is not None
            self._received.add((msg, name))
            stamp = proc.receive(self._sent[msg], now=rt)  # type: ignore[arg-type]
        else:
            stamp = proc.send(now=rt)
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
