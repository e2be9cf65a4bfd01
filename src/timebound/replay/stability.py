"""``timebound replay stability``: timestamp (or vector) acknowledgments over a trace.

The command line of the stability replay; the rows go to the shared row adapter
``timebound.adapters.stability.StabilityAdapter``. Every protocol rule lives in
``timebound.core.stability``.
"""

from __future__ import annotations

import argparse

from timebound.adapters.stability import ROW_TYPES, StabilityAdapter, StabilityOptions
from timebound.contract import REPLAY_OUTPUTS
from timebound.replay._framework import ReplayCommand, add_io_arguments

OUTPUT_TYPES: dict[str, str] = dict(REPLAY_OUTPUTS["stability"])
__all__ = ["COMMAND", "OUTPUT_TYPES", "ROW_TYPES"]


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    add_io_arguments(parser)
    parser.add_argument("--acks", default=None, metavar="timestamp|vector",
                        help="acknowledgment scheme: one scalar (timestamp) or a vector "
                             "(required)")
    parser.add_argument("--senders", default=None, metavar="S1,S2",
                        help="comma-separated sender nodes (required)")
    parser.add_argument("--receivers", default=None, metavar="R1,R2",
                        help="comma-separated receiver nodes, may overlap --senders "
                             "(required)")


def _build(args: argparse.Namespace) -> StabilityAdapter:
    return StabilityAdapter(StabilityOptions.from_values(vars(args)))


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
    output_types=REPLAY_OUTPUTS["stability"],
    example_file="stability.jsonl",
    example_args=("--acks", "timestamp", "--senders", "s1,s2", "--receivers", "s1,r1,r2"),
)
