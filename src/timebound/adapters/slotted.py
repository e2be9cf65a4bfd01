"""Slotted row adapter: one slotted-FIFO channel over ``channel`` rows.

``send`` rows go through ``SlottedSender`` (which stamps them, Fig. 3), ``arrive`` rows
through ``SlottedReceiver`` (Fig. 4, event-driven). The trace has no clock, so the
receiver's ``now`` is the row's line number; delays in the summary are therefore in
rows. Drivers that record more than the replay's columns (the Spark operator) read the
core's actions of the last row from ``last_actions`` and the receiver's buffer from
``buffered`` instead of recomputing anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from timebound.adapters._options import Values
from timebound.adapters._rows import Row
from timebound.contract import REPLAY_OUTPUTS
from timebound.core.slotted import Deliver, Discard, Kind, SlottedReceiver, SlottedSender, Stamp

KINDS = [kind.value for kind in Kind]

#: One action of the receiver on a message id.
Action = Deliver[str] | Discard[str]


@dataclass(frozen=True, slots=True)
class SlottedOptions:
    """The slotted replay has no options."""

    @classmethod
    def from_values(cls, values: Values) -> SlottedOptions:
        return cls()



class SlottedAdapter:
    output_types: Mapping[str, str] = REPLAY_OUTPUTS["slotted"]

    def __init__(self, options: SlottedOptions | None = None) -> None:
        self.options = options or SlottedOptions()
        self._sender = SlottedSender()
        self._receiver: SlottedReceiver[str] = SlottedReceiver()
        self._stamps: dict[str, Stamp] = {}
        self._arrived: set[str] = set()
        self._last_actions: list[Action] = []

    @property
    def last_actions(self) -> Sequence[Action]:
        """The core's actions caused by the last row fed, in output order."""
        return self._last_actions

    @property
    def buffered(self) -> int:
        """Messages the receiver holds right now."""
        return self._receiver.buffered

    @property
    def receiver(self) -> SlottedReceiver[str]:
        return self._receiver

    def feed(self, row: Row) -> Iterable[Mapping[str, Any]]:
        self._last_actions = []
        kind = row.choice("type", ["send", "arrive"])
        ident = row.string("id")
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
        self._last_actions = list(actions)
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
