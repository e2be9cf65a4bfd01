"""The one ``timebound`` command.

Every failure that is the user's doing (a bad option, a malformed trace row, a bad
dataset) prints one line ``timebound: error: ...`` and exits with status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from timebound import __version__
from timebound.errors import TimeboundError
from timebound.replay import load_commands, replay_rows

EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="timebound",
        description=(
            "Delivery guarantees from loosely synchronized clocks: at-most-once messages "
            "without handshakes (with adaptive lifetime estimation), slotted-FIFO "
            "channels, timestamp acknowledgments and causal deterministic merge. "
            "Clocks are a hint for performance, never for correctness."
        ),
    )
    parser.add_argument("--version", action="version", version=f"timebound {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    replay = commands.add_parser(
        "replay",
        help="run one protocol over a trace file and write its decisions",
        description=(
            "Replay a trace (JSON Lines or Parquet, by extension; '-' for stdin/stdout) "
            "through the protocol's core and write one decision row per the contract "
            "in the README. The output is written whole or not at all. Malformed rows "
            "stop the replay with exit status 2 naming file, line and field."
        ),
    )
    protocols = replay.add_subparsers(dest="protocol", metavar="PROTOCOL", required=True)
    for command in load_commands():
        sub = protocols.add_parser(
            command.name,
            help=command.help,
            description=command.description,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.add_arguments(sub)
        sub.set_defaults(handler=_run_replay, replay_command=command)

    demo = commands.add_parser(
        "demo",
        help="the main job: run every protocol on its bundled example and summarise",
        description=(
            "Replay the bundled example trace of every protocol and print a summary "
            "table per protocol."
        ),
    )
    demo.add_argument("--out", default=None, metavar="DIR",
                      help="also keep each replay's decisions in DIR (JSON Lines)")
    demo.set_defaults(handler=_run_demo)
    return parser


def _run_replay(args: argparse.Namespace) -> int:
    replayer = replay_rows(args.replay_command, args)
    if args.output != "-" and getattr(args, "stats", False):
        for label, value in replayer.summary():
            print(f"{label:>28}  {value}", file=sys.stderr)
    return 0


def _run_demo(args: argparse.Namespace) -> int:
    from timebound.demo import run_demo

    return run_demo(args.out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except TimeboundError as exc:
        print(f"timebound: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("timebound: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
