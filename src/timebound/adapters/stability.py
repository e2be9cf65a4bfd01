"""Stability row adapter: timestamp (or vector) acknowledgments over ``acks`` rows.

One ``StabilityNode`` per node named in ``senders`` / ``receivers`` (static groups:
every sender's receiver group is the receiver list, every receiver's sender group the
sender list), fed in trace order with ``at`` as each node's ``now``. A node in both
lists receives its own messages and its own acks as it sends them (done by the core
node). ``ack(id)`` gives drivers the acknowledgment an ``ack`` row sent (the Spark
operator records its size).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from timebound.adapters._options import Values
from timebound.adapters._rows import Row
from timebound.contract import REPLAY_OUTPUTS, STABILITY_VECTOR_VALUE
from timebound.core.stability import Ack, AckMode, StabilityNode, TimestampAck
from timebound.errors import UsageError

ROW_TYPES = ["send", "recv", "ack", "ackrecv"]


def _names(value: object, option: str) -> tuple[str, ...]:
    if value is None:
        raise UsageError(option, "required here")
    if not isinstance(value, str):
        raise UsageError(option, f"expected a comma-separated list of names, got {value!r}")
    names = [name.strip() for name in value.split(",")]
    if not all(names):
        raise UsageError(option, f"expected a comma-separated list of names, got {value!r}")
    if len(set(names)) != len(names):
        raise UsageError(option, f"names a node twice: {value!r}")
    return tuple(names)


@dataclass(frozen=True, slots=True)
class StabilityOptions:
    acks: AckMode
    senders: tuple[str, ...]
    receivers: tuple[str, ...]

    @classmethod
    def from_values(cls, values: Values) -> StabilityOptions:
        acks = values.get("acks")
        if acks is None:
            raise UsageError("--acks", "required here")
        if acks not in ("timestamp", "vector"):
            raise UsageError("--acks", f"expected timestamp or vector, got {acks!r}")
        return cls(AckMode(acks), _names(values.get("senders"), "--senders"),
                   _names(values.get("receivers"), "--receivers"))



class StabilityAdapter:
    output_types: Mapping[str, str]

    def __init__(self, options: StabilityOptions) -> None:
        self.options = options
        mode, senders, receivers = options.acks, list(options.senders), list(options.receivers)
        self.output_types = {
            **REPLAY_OUTPUTS["stability"],
            "value": "int64" if mode is AckMode.TIMESTAMP else STABILITY_VECTOR_VALUE,
        }
        self._mode = mode
        self._senders = senders
        self._sender_set = set(senders)
        self._receiver_set = set(receivers)
        self._nodes: dict[str, StabilityNode] = {}
        for name in dict.fromkeys(senders + receivers):
            self._nodes[name] = StabilityNode(
                name,
                senders=senders if name in self._receiver_set else None,
                receivers=receivers if name in self._sender_set else None,
                acks=mode,
            )
        self._at: dict[str, int] = {}
        self._last_ts: dict[str, int] = {}
        self._acks: dict[str, Ack] = {}
        self._recv = {True: 0, False: 0}

    def ack(self, ident: str) -> Ack:
        """The acknowledgment an ``ack`` row with this id sent (KeyError if none)."""
        return self._acks[ident]

    def feed(self, row: Row) -> Iterable[Mapping[str, Any]]:
        kind = row.choice("type", ROW_TYPES)
        name = row.string("node")
        node = self._nodes.get(name)
        if node is None:
            raise row.error("node", f"'{name}' is in neither --senders nor --receivers")
        at = row.integer("at")
        previous = self._at.get(name)
        if previous is not None and at < previous:
            raise row.error("at", f"goes backwards for node '{name}': {at} < {previous}")
        out = dict(row.data)
        if kind == "send":
            self._role(row, name, self._sender_set, "--senders")
            ts = row.integer("ts")
            last = self._last_ts.get(name)
            if last is not None and ts <= last:
                raise row.error("ts", f"must increase per sender: {ts} after {last}")
            self._last_ts[name] = ts
            node.send(now=at, ts=ts)
        elif kind == "recv":
            self._role(row, name, self._receiver_set, "--receivers")
            origin = row.string("from")
            if origin not in self._sender_set:
                raise row.error("from", f"'{origin}' is not in --senders")
            delivered = node.receive(origin, row.integer("ts"), now=at)
            self._recv[delivered] += 1
            out["delivered"] = delivered
        elif kind == "ack":
            self._role(row, name, self._receiver_set, "--receivers")
            ident = row.string("id")
            if ident in self._acks:
                raise row.error("id", f"ack id '{ident}' is used twice")
            acked = node.make_ack(now=at)
            self._acks[ident] = acked.ack
            out["value"] = (acked.ack.value if isinstance(acked.ack, TimestampAck)
                            else {s: acked.ack.entries[s] for s in self._senders})
            if acked.stable is not None:
                out["stable"] = acked.stable
        else:
            self._role(row, name, self._sender_set, "--senders")
            ident = row.string("ack")
            ack = self._acks.get(ident)
            if ack is None:
                raise row.error("ack", f"ack id '{ident}' was never sent")
            out["stable"] = node.receive_ack(ack, now=at)
        self._at[name] = at
        return (out,)

    @staticmethod
    def _role(row: Row, name: str, members: set[str], option: str) -> None:
        if name not in members:
            raise row.error("node", f"'{name}' is not in {option}")

    def finish(self) -> Iterable[Mapping[str, Any]]:
        return ()

    def summary(self) -> list[tuple[str, object]]:
        senders = [n.sender.statistics() for n in self._nodes.values() if n.sender]
        receivers = [n.receiver.statistics() for n in self._nodes.values() if n.receiver]
        stable = sum(s.stable for s in senders)
        latency = sum(s.latency_sum for s in senders)
        acks = sum(r.acks_sent for r in receivers)
        ack_bytes = sum(r.ack_bytes for r in receivers)
        return [
            ("acknowledgments", self._mode.value),
            ("senders / receivers", f"{len(senders)} / {len(receivers)}"),
            ("messages sent", sum(s.sent for s in senders)),
            ("recv delivered / ignored", f"{self._recv[True]} / {self._recv[False]}"),
            ("acks sent (bytes)", f"{acks} ({ack_bytes})"),
            ("messages stable", stable),
            ("still in send buffers", sum(s.buffered for s in senders)),
            ("max send buffer", max((s.max_buffered for s in senders), default=0)),
            ("stability latency mean / max",
             f"{latency / stable if stable else 0.0:.1f} / "
             f"{max((s.max_latency for s in senders), default=0)} ticks"),
        ]
