"""``timebound replay stability``: timestamp (or vector) acknowledgments over a trace.

A thin adapter over ``timebound.core.stability``: one ``StabilityNode`` per node named
in ``--senders`` / ``--receivers`` (static groups: every sender's receiver group is the
receiver list, every receiver's sender group the sender list), fed in file order with
``at`` as each node's ``now``. A node in both lists receives its own messages and its
own acks as it sends them (done by the core node).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import Any

from timebound.core.stability import Ack, AckMode, StabilityNode, TimestampAck
from timebound.errors import UsageError
from timebound.replay._framework import ReplayCommand, Row, add_io_arguments

#: Output column types. ``value`` is an integer with timestamp acks and a map
#: sender -> timestamp with vector acks: the replayer's ``output_types`` says which.
OUTPUT_TYPES: dict[str, str] = {
    "type": "string", "node": "string", "from": "string", "id": "string", "ack": "string",
    "ts": "int64", "at": "int64", "delivered": "bool", "value": "int64",
    "stable": "list<int64>",
}

ROW_TYPES = ["send", "recv", "ack", "ackrecv"]


class StabilityReplayer:
    output_types: dict[str, str]

    def __init__(self, mode: AckMode, senders: list[str], receivers: list[str]) -> None:
        self.output_types = OUTPUT_TYPES
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
        name = row.str("node")
        node = self._nodes.get(name)
        if node is None:
            raise row.error("node", f"'{name}' is in neither --senders nor --receivers")
        at = row.int("at")
        previous = self._at.get(name)
        if previous is not None and at < previous:
            raise row.error("at", f"goes backwards for node '{name}': {at} < {previous}")
        out = dict(row.data)
        if kind == "send":
            self._role(row, name, self._sender_set, "--senders")
            ts = row.int("ts")
            last = self._last_ts.get(name)
            if last is not None and ts <= last:
                raise row.error("ts", f"must increase per sender: {ts} after {last}")
            self._last_ts[name] = ts
            node.send(now=at, ts=ts)
        elif kind == "recv":
            self._role(row, name, self._receiver_set, "--receivers")
            origin = row.str("from")
            if origin not in self._sender_set:
                raise row.error("from", f"'{origin}' is not in --senders")
            delivered = node.receive(origin, row.int("ts"), now=at)
            self._recv[delivered] += 1
            out["delivered"] = delivered
        elif kind == "ack":
            self._role(row, name, self._receiver_set, "--receivers")
            ident = row.str("id")
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
            ident = row.str("ack")
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


def _names(value: str | None, option: str) -> list[str]:
    if value is None:
        raise UsageError(option, "required here")
    names = [name.strip() for name in value.split(",")]
    if not all(names):
        raise UsageError(option, f"expected a comma-separated list of names, got {value!r}")
    if len(set(names)) != len(names):
        raise UsageError(option, f"names a node twice: {value!r}")
    return names


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    add_io_arguments(parser)
    parser.add_argument("--acks", default=None, metavar="timestamp|vector",
                        help="acknowledgment scheme: one scalar (timestamp) or a vector")
    parser.add_argument("--senders", default=None, metavar="S1,S2",
                        help="comma-separated sender nodes")
    parser.add_argument("--receivers", default=None, metavar="R1,R2",
                        help="comma-separated receiver nodes (may overlap --senders)")


def _build(args: argparse.Namespace) -> StabilityReplayer:
    if args.acks is None:
        raise UsageError("--acks", "required here")
    if args.acks not in ("timestamp", "vector"):
        raise UsageError("--acks", f"expected timestamp or vector, got {args.acks!r}")
    mode = AckMode(args.acks)
    senders = _names(args.senders, "--senders")
    receivers = _names(args.receivers, "--receivers")
    replayer = StabilityReplayer(mode, senders, receivers)
    replayer.output_types = {
        **OUTPUT_TYPES,
        "value": "int64" if mode is AckMode.TIMESTAMP else "map<string,int64>",
    }
    return replayer


COMMAND = ReplayCommand(
    name="stability",
    help="message stability by timestamp (or vector) acknowledgments",
    description=(
        "Replay timestamp acknowledgments (Berket et al., Fig. 1) or the vector-ack\n"
        "baseline over a trace of sends, receipts and acknowledgments.\n\n"
        "Options: --acks timestamp|vector --senders s1,s2 --receivers r1,r2 (lists may\n"
        "overlap: a node in both receives its own messages and acks as it sends them).\n\n"
        "Input rows (at non-decreasing per node, ts increasing per sender):\n"
        '  {"type":"send","node":"s1","ts":10,"at":10}\n'
        '  {"type":"recv","node":"r1","from":"s1","ts":10,"at":12}\n'
        '  {"type":"ack","node":"r1","id":"a1","at":13}\n'
        '  {"type":"ackrecv","node":"s1","ack":"a1","at":17}\n\n'
        "Output: each input row, plus on recv `delivered`; on ack `value` (timestamp:\n"
        "min of the node's timestamp vector; vector: {sender: last ts}); on ackrecv, and\n"
        "on ack rows of a node that is also a sender, `stable`: the sorted timestamps of\n"
        "the node's own buffered messages that this row made stable."
    ),
    add_arguments=_add_arguments,
    build=_build,
    output_types=OUTPUT_TYPES,
    example_file="stability.jsonl",
    example_args=("--acks", "timestamp", "--senders", "s1,s2", "--receivers", "s1,r1,r2"),
)
