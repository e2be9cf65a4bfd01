"""Live checks: the papers' claims measured on the live services over loopback UDP.

``simulate --reproduce`` fills the table's live column from these: for
each kind and seed it runs ``python -m timebound.net.live KIND --seed N [--quick]``
in a process of its own (one event loop, its own sockets, nothing left behind) and
reads the runs it prints, ``{run: {measure: value}}`` as one JSON object on stdout,
the same shape as a simulated job's scalar metrics. Everything binds to 127.0.0.1 on
ports the system picks; a seed fixes the workload and the fault proxy's draws (the
timing is the machine's: that is the point of a live check).

Kinds (``KINDS``; each module's ``measure(seed, quick)`` says what it runs):

- ``channel``: slotted-FIFO channels (``timebound.net`` channel, slotted paper §6);
- ``group``: stable multicast groups, timestamp vs vector acks (stability paper §4);
- ``pubsub``: replicated mergers and subscribers (causal merge, Thm 4.4, Lemma 4.2);
- ``rpc``: at-most-once RPC under loss and a SIGKILL of the server (SCMP §2.3, §2.4, §3).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from typing import NoReturn

from timebound._safety import Terminated, sigterm_raises
from timebound.claims import LATENESS
from timebound.net._lateness import probing

#: kind -> the module whose ``measure(seed: int, quick: bool)`` runs it
KINDS = {
    "channel": "timebound.net._live_channel",
    "group": "timebound.net._live_group",
    "pubsub": "timebound.net._live_pubsub",
    "rpc": "timebound.net._live_rpc",
}

Runs = dict[str, dict[str, float]]


def measure(kind: str, seed: int, quick: bool = False) -> Runs:
    """Run the live check ``kind`` once on ``seed``; its runs' scalar measures."""
    if kind not in KINDS:
        raise ValueError(f"unknown live check {kind!r} (one of {', '.join(KINDS)})")
    module = importlib.import_module(KINDS[kind])
    with probing() as probe:  # how late this process's loops fire a timer (_lateness)
        runs: Runs = module.measure(seed, quick)
    runs[LATENESS.run] = probe.measures()
    return {run: {name: float(value) for name, value in values.items()}
            for run, values in runs.items()}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """A bad argument: one line, exit status 2 (as every timebound command)."""
        sys.stderr.write(f"timebound: error: {message}\n")
        sys.exit(2)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one check; its runs on stdout. Errors are one line on stderr: exit 2 for an
    argument, 130 for Ctrl-C, 143 for SIGTERM (the check's sockets, server processes
    and temporary files are closed and removed first)."""
    parser = _Parser(
        prog="python -m timebound.net.live",
        description="Run one live check of the papers' claims on loopback UDP and print "
                    "its runs as JSON ({run: {measure: value}}); simulate --reproduce "
                    "runs these for the table's live column.")
    parser.add_argument("kind", choices=sorted(KINDS), help="the service to check")
    parser.add_argument("--seed", type=int, default=1,
                        help="the workload's and the fault proxy's seed, >= 1 (default 1)")
    parser.add_argument("--quick", action="store_true",
                        help="the smaller size simulate --reproduce --quick uses "
                             "(default off)")
    args = parser.parse_args(argv)
    if args.seed < 1:
        parser.error(f"--seed: expected an integer >= 1, got {args.seed}")
    try:
        with sigterm_raises():
            runs = measure(args.kind, args.seed, args.quick)
    except KeyboardInterrupt:
        sys.stderr.write("timebound: interrupted\n")
        return 130
    except Terminated:
        sys.stderr.write("timebound: terminated\n")
        return 143
    json.dump(runs, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
