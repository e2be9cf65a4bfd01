"""``timebound replay merge``: causal deterministic mergers over arrival rows (docs/replay-merge.md).

The command line of the merge replay; the rows go to the shared row adapter
``timebound.adapters.merge.MergeAdapter``. Every protocol rule lives in
``timebound.core.merge``.
"""

from __future__ import annotations

import argparse

from timebound.adapters.merge import MergeAdapter, MergeOptions
from timebound.contract import REPLAY_OUTPUTS, VARIANTS
from timebound.replay._framework import ReplayCommand, add_io_arguments

__all__ = ["COMMAND", "VARIANTS", "add_arguments", "build"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_io_arguments(parser)
    parser.add_argument("--epsilon", type=int, metavar="E",
                        help="clock-difference bound epsilon (G1), ticks >= 1 (required)")
    parser.add_argument("--delta", type=int, metavar="D",
                        help="message-delay bound delta (G2), ticks >= 0 (required)")
    parser.add_argument("--variant", choices=VARIANTS, default="rckn",
                        help="rckn: rows carry r, c, kn (default); rc: rows carry r, c")


def build(args: argparse.Namespace) -> MergeAdapter:
    return MergeAdapter(MergeOptions.from_values(vars(args)))


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
  {"merger":"M1","msg":"m1","proc":"p1","at":9,"r":5,"c":1,"kn":[0,1,2,0]}
  (kn: 2E integers, rckn only; no kn with --variant rc)
output: rows grouped by merger in order of first appearance, each merger's in the
order it acts:
  {"merger":"M1","msg":"m1","proc":"p1","action":"deliver","time":11}
  action deliver (time = deadline) | late | duplicate (time = at)

example (the row above alone gives the row below it: deadline 5 + 1 + 3 + 2 = 11):
  timebound replay merge --input arrivals.jsonl --output order.jsonl \\
      --epsilon 2 --delta 3
""",
    add_arguments=add_arguments,
    build=build,
    output_types=REPLAY_OUTPUTS["merge"],
    example_file="merge.jsonl",
    example_args=("--epsilon", "2", "--delta", "3"),
)
