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

    from timebound.sim.cli import add_simulate_parser
    add_simulate_parser(commands)

    demo = commands.add_parser(
        "demo",
        help="the main job: examples, simulated scenarios, Spark pipeline, report",
        description=(
            "The main job. (1) Replay the bundled example trace of every protocol and "
            "print a summary per protocol; (2) simulate every scenario at a modest "
            "scale into DIR/datasets; (3) run the pipeline on Spark (local by default) "
            "into DIR/pipeline; (4) write DIR/report.html, the paper claims beside our "
            "measurements. Takes a few minutes on 2 cores."
        ),
    )
    demo.add_argument("--out", default=None, metavar="DIR",
                      help="where the datasets, pipeline output and report.html go "
                           "(default: ./timebound-demo)")
    demo.add_argument("--scale", type=float, default=1.0, metavar="F",
                      help="multiply the demo's scenario sizes by F (default 1.0)")
    demo.add_argument("--scenarios", default=None, metavar="A,B",
                      help="only these simulator scenarios (default: all)")
    demo.add_argument("--master", default=None, metavar="URL",
                      help="Spark master (default local[*])")
    demo.add_argument("--seed", type=int, default=0, help="scenario seed (default 0)")
    demo.set_defaults(handler=_run_demo)
    _add_pipeline_commands(commands)
    return parser


def _add_pipeline_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    pipeline = commands.add_parser(
        "pipeline",
        help="run every protocol over a trace dataset on Spark; decisions + metrics",
        description=(
            "Run every protocol whose input table is present in DATASET (messages, events, "
            "arrivals, channel, acks; see docs/pipeline.md) on Spark, the replay's cores "
            "inside each group. Writes DIR/<table>/ decision tables, DIR/metrics/ and "
            "DIR/manifest.json, whole or not at all. Protocol options are defaults; "
            "option columns of a table override them per run."
        ),
    )
    pipeline.add_argument("dataset", metavar="DATASET", help="trace dataset folder")
    pipeline.add_argument("--out", required=True, metavar="DIR", help="output folder")
    pipeline.add_argument("--master", default=None, metavar="URL",
                          help="Spark master: local[*] (default), spark://..., yarn, k8s://...")
    pipeline.add_argument("--conf", action="append", default=[], metavar="K=V",
                          help="Spark setting, passed through (repeatable)")
    at = pipeline.add_argument_group("atmostonce (as timebound replay atmostonce)")
    at.add_argument("--estimator", choices=("fixed", "unlimited", "limited"), default=None)
    for flag in ("--rho", "--gc-every", "--window", "--spikes", "--p", "--beta",
                 "--latest-every", "--classes"):
        at.add_argument(flag, type=int, default=None)
    at.add_argument("--resilient", action="store_true", default=None)
    ca = pipeline.add_argument_group("causal and merge (as their replay commands)")
    ca.add_argument("--epsilon", type=int, default=None)
    ca.add_argument("--delta", type=int, default=None)
    ca.add_argument("--variant", choices=("rckn", "rc"), default=None)
    ca.add_argument("--n", type=int, default=None)
    st = pipeline.add_argument_group("stability (as timebound replay stability)")
    st.add_argument("--acks", default=None, metavar="timestamp|vector",
                    help="default timestamp")
    st.add_argument("--senders", default=None, metavar="S1,S2",
                    help="default: the run's nodes with send rows")
    st.add_argument("--receivers", default=None, metavar="R1,R2",
                    help="default: the run's nodes with recv or ack rows")
    pipeline.set_defaults(handler=_run_pipeline)

    report = commands.add_parser(
        "report",
        help="write DIR/report.html from a pipeline output folder",
        description=(
            "Read DIR/metrics/ and DIR/manifest.json (written by timebound pipeline) and "
            "write DIR/report.html: one self-contained page of figures and tables per "
            "protocol, with the papers' claims beside them."
        ),
    )
    report.add_argument("dir", metavar="DIR", help="pipeline output folder")
    report.set_defaults(handler=_run_report)


PIPELINE_OPTIONS = ("estimator", "rho", "gc_every", "window", "spikes", "p", "beta",
                    "latest_every", "classes", "resilient", "epsilon", "delta", "variant",
                    "n", "acks", "senders", "receivers")


def _run_pipeline(args: argparse.Namespace) -> int:
    from timebound.pipeline import format_summary, parse_conf, run_pipeline

    conf = parse_conf(args.conf)
    options = {dest: getattr(args, dest) for dest in PIPELINE_OPTIONS
               if getattr(args, dest) is not None}
    summary = run_pipeline(args.dataset, args.out, options=options, master=args.master,
                           conf=conf)
    print(format_summary(summary))
    print(f"output: {args.out}")
    return 0


def _run_report(args: argparse.Namespace) -> int:
    from timebound.report import write_report

    print(write_report(args.dir))
    return 0


def _run_replay(args: argparse.Namespace) -> int:
    replayer = replay_rows(args.replay_command, args)
    if args.output != "-" and getattr(args, "stats", False):
        for label, value in replayer.summary():
            print(f"{label:>28}  {value}", file=sys.stderr)
    return 0


def _run_demo(args: argparse.Namespace) -> int:
    from timebound.demo import run_demo

    return run_demo(args.out, scale=args.scale, scenarios=args.scenarios,
                    master=args.master, seed=args.seed)


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
