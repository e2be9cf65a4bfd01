"""``timebound replay slotted``: one slotted-FIFO channel over a trace.

A thin adapter: ``send`` rows go through ``SlottedSender`` (which stamps them, Fig. 3),
``arrive`` rows through ``SlottedReceiver`` (Fig. 4, event-driven). The trace has no
clock, so the receiver's ``now`` is the row's line number; delays in the summary are
therefore in rows.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import Any

from timebound.core.slotted import Deliver, Kind, SlottedReceiver, SlottedSender, Stamp
from timebound.replay._framework import ReplayCommand, Row, add_io_arguments

KINDS = [kind.value for kind in Kind]


class SlottedReplayer:
    def __init__(self) -> None:
        self._sender = SlottedSender()
        self._receiver: SlottedReceiver[str] = SlottedReceiver()
        self._stamps: dict[str, Stamp] = {}
        self._arrived: set[str] = set()
        #: The core's actions (``Deliver`` / ``Discard``) caused by the last row fed,
        #: in output order: drivers that record more than the replay's columns
        #: (the Spark operator) read them here instead of recomputing anything.
        self.last_actions: list[Any] = []

    @property
    def receiver(self) -> SlottedReceiver[str]:
        return self._receiver

    def feed(self, row: Row) -> Iterable[Mapping[str, Any]]:
        self.last_actions = []
        kind = row.choice("type", ["send", "arrive"])
        ident = row.str("id")
        if kind == "send":
            send_kind = Kind(row.choice("kind", KINDS))
            if ident in self._stamps:
                raise row.error("id", f"'{ident}' is sent twice")
            self._stamps[ident] = self._sender.send(send_kind)
            return ()
        stamp = self._stamps.get(ident)
        if stamp is None:
            raise row.error("id", f"'{ident}' arrives before its send row")
        if ident in self._arrived:
            raise row.error("id", f"'{ident}' arrives twice")
        self._arrived.add(ident)
        actions = self._receiver.receive(ident, stamp, now=row.line)
        self.last_actions = list(actions)
        return [
            {"id": act.message, "action": "deliver" if isinstance(act, Deliver) else "discard"}
            for act in actions
        ]

    def finish(self) -> Iterable[Mapping[str, Any]]:
        return ()

    def summary(self) -> list[tuple[str, object]]:
        stats = self._receiver.statistics()
        rows: list[tuple[str, object]] = [
            ("messages sent", len(self._stamps)),
            ("arrived", len(self._arrived)),
            ("slots closed", stats.slot),
        ]
        for kind in KINDS:
            delivered = stats.delivered[kind]
            mean = stats.delay_sum[kind] / delivered if delivered else 0.0
            rows.append((f"{kind} delivered (mean delay, rows)",
                         f"{delivered} / {stats.arrived[kind]} arrived ({mean:.2f})"))
        for reason, count in stats.discarded.items():
            rows.append((f"discarded: {reason}", count))
        rows.append(("still buffered at end", stats.buffered))
        rows.append(("max buffered", stats.max_buffered))
        return rows


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    add_io_arguments(parser)


def _build(args: argparse.Namespace) -> SlottedReplayer:
    return SlottedReplayer()


COMMAND = ReplayCommand(
    name="slotted",
    help="one slotted-FIFO channel: FR/R/F/N sends, arrivals -> deliver/discard",
    description=(
        "Replay one slotted-FIFO channel (Baldoni, Beraldi, Prakash, Figs. 3 and 4).\n\n"
        "Input rows, in file order:\n"
        '  {"type":"send","id":"a","kind":"FR"|"R"|"F"|"N"}   in send order\n'
        '  {"type":"arrive","id":"a"}                          in transport-receive order\n'
        "Each id is sent once and arrives at most once, after its send row.\n\n"
        "Output rows, in the order the receiver acts:\n"
        '  {"id":"a","action":"deliver"|"discard"}\n'
        "FR delimit slots and are delivered in send order; R are delivered inside their\n"
        "slot; F and N only inside their slot (else discarded), F in send order. Messages\n"
        "still buffered at the end of the input get no row. No options."
    ),
    add_arguments=_add_arguments,
    build=_build,
    output_types={"id": "string", "action": "string"},
    example_file="slotted.jsonl",
)
