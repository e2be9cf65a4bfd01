"""``timebound replay causal``: logical timestamps over an event trace (docs/replay-causal.md).

The command line of the causal replay; the rows go to the shared row adapter
``timebound.adapters.causal.CausalAdapter``. Every protocol rule lives in
``timebound.core.causal``.
"""

from __future__ import annotations

import argparse

from timebound.adapters.causal import ROW_TYPES, CausalAdapter, CausalOptions
from timebound.contract import REPLAY_OUTPUTS, VARIANTS
from timebound.replay._framework import ReplayCommand, add_io_arguments

__all__ = ["COMMAND", "ROW_TYPES", "VARIANTS", "add_arguments", "build"]


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


def build(args: argparse.Namespace) -> CausalAdapter:
    return CausalAdapter(CausalOptions.from_values(vars(args)))


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
    build=build,
    output_types=REPLAY_OUTPUTS["causal"],
    example_file="causal.jsonl",
    example_args=("--epsilon", "2"),
)
