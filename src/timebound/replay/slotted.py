"""``timebound replay slotted``: one slotted-FIFO channel over a trace.

The command line of the slotted replay; the rows go to the shared row adapter
``timebound.adapters.slotted.SlottedAdapter``. The trace has no clock, so the
receiver's ``now`` is the row's line number; delays in the summary are in rows.
"""

from __future__ import annotations

import argparse

from timebound.adapters.slotted import KINDS, SlottedAdapter, SlottedOptions
from timebound.contract import REPLAY_OUTPUTS
from timebound.replay._framework import ReplayCommand, add_io_arguments

__all__ = ["COMMAND", "KINDS"]


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    add_io_arguments(parser)


def _build(args: argparse.Namespace) -> SlottedAdapter:
    return SlottedAdapter(SlottedOptions.from_values(vars(args)))


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
    output_types=REPLAY_OUTPUTS["slotted"],
    example_file="slotted.jsonl",
)
