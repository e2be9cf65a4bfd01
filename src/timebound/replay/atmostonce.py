"""``timebound replay atmostonce``: SCMP receivers over a trace (docs/replay-atmostonce.md).

The command line of the at-most-once replay; the rows go to the shared row adapter
``timebound.adapters.atmostonce.AtMostOnceAdapter`` (one ``ClassifiedReceiver`` per
receiver name, fed in file order). Every protocol rule lives in
``timebound.core.atmostonce``.
"""

from __future__ import annotations

import argparse

from timebound.adapters.atmostonce import (
    ROW_TYPES,
    AtMostOnceAdapter,
    AtMostOnceOptions,
    well_formed,
)
from timebound.arguments import add_receiver_arguments, receiver_config_from_args
from timebound.contract import REPLAY_OUTPUTS
from timebound.core.atmostonce import ReceiverConfig
from timebound.replay._framework import ReplayCommand, add_io_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_io_arguments(parser)
    add_receiver_arguments(parser)


def receiver_config(args: argparse.Namespace) -> ReceiverConfig:
    """The receiver the options name; a missing or meaningless option is a UsageError."""
    return receiver_config_from_args(args)


def build(args: argparse.Namespace) -> AtMostOnceAdapter:
    return AtMostOnceAdapter(AtMostOnceOptions.from_values(vars(args)))


COMMAND = ReplayCommand(
    name="atmostonce",
    help="SCMP at-most-once receivers, fixed or adaptive lifetime, resilient crashes",
    description="""\
Replay messages through SCMP at-most-once receivers (SCMP Figs. 2-1, 2-2; adaptive
lifetime estimation Figs. 1-3). Each receiver (with --classes K, each pair of receiver
and class crc32(utf-8 conn) mod K) starts at time 0 with an empty table and upper = 0.

input rows, in file order (per receiver, `at` never decreases):
  {"type":"msg","receiver":"s1","conn":"c7","ts":1000,"at":1250}     ts >= 1
  {"type":"crash","receiver":"s1","at":5000,"down":2000}            --resilient only
  a msg row may add "marked":true: made after the receiver's current incarnation
  began, decided against its own bound (our extension, docs/replay-atmostonce.md)
output: one row per msg row, its fields plus
  verdict  accepted | duplicate | stale | early | down
  rho      the estimate in force when processed (null when down)
  entries  table size after the message and any GC it triggers (null when down)

estimators:
  --estimator fixed --rho R --gc-every G
  --estimator unlimited --gc-every G
  --estimator limited --window S --spikes H --p P      (GC after every S-th lifetime)
timers fire at absolute multiples (k*G, k*L) before any row at or after their time;
at one instant: recovery, then the latest refresh, then GC.

example:
  timebound replay atmostonce --input trace.jsonl --output verdicts.parquet \\
      --estimator unlimited --gc-every 100 --resilient --beta 500 --latest-every 250
""",
    add_arguments=add_arguments,
    build=build,
    output_types=REPLAY_OUTPUTS["atmostonce"],
    example_file="atmostonce.jsonl",
    example_args=("--estimator", "unlimited", "--gc-every", "50", "--resilient",
                  "--beta", "400", "--latest-every", "100"),
)

__all__ = ["COMMAND", "ROW_TYPES", "add_arguments", "build",
           "receiver_config", "well_formed"]
