"""The one ``timebound`` command.

Every failure that is the user's doing (a bad option, a malformed trace row, a bad
dataset, an output path that cannot be written, a missing optional dependency) prints
one line ``timebound: error: ...`` and exits with status 2; so does a failure Spark
reports on the driver (a JVM error, the JVM gone: ``sparkutil.spark_failure``), with
Spark's reason; anything else is a bug and exits 1 with one line (the traceback with
``--verbose``). SIGTERM and Ctrl-C remove every temporary output before exiting (143,
130), in one line. The network commands have their own statuses for what the network
did (3 to 7: a timeout, a refusal, a remote error, a failed channel). All are named in
``timebound.exitcodes``; docs/errors.md lists them all.
"""

from __future__ import annotations

import argparse
import errno
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from timebound import __version__
from timebound._safety import Terminated, float_range, int_range, sigterm_raises
from timebound.contract import ESTIMATORS, OPTION_LIMITS, VARIANTS
from timebound.errors import TimeboundError, UsageError
from timebound.exitcodes import (
    EXIT_BUG,
    EXIT_CHANNEL_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
)


class _Parser(argparse.ArgumentParser):
    """argparse with the house's one-line errors (``timebound: error: ...``, exit 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        where = self.prog.removeprefix("timebound").strip()
        prefix = f"{where}: " if where else ""
        self.exit(EXIT_USAGE, f"timebound: error: {prefix}{message} "
                              f"(see '{self.prog} --help')\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with ``command`` (a top-level command's name), only that
    command's subcommands are built in full (the others are names), so a command
    does not import every other command's modules: ``main`` builds it so."""
    parser = _Parser(
        prog="timebound",
        description=(
            "Delivery guarantees from loosely synchronized clocks: at-most-once messages "
            "without handshakes (with adaptive lifetime estimation), slotted-FIFO "
            "channels, timestamp acknowledgments and causal deterministic merge. "
            "Clocks are a hint for performance, never for correctness."
        ),
    )
    parser.add_argument("--version", action="version", version=f"timebound {__version__}")
    parser.add_argument("--verbose", action="store_true",
                        help="show the full traceback (and Spark's log) on an error")
    parser.add_argument("--quiet", action="store_true",
                        help="no progress lines (results and errors are still printed)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    only = COMMANDS.get(command or "")
    built: list[Callable[[Any], None]] = []
    for name, build in COMMANDS.items():
        if only is not None and build is not only:
            commands.add_parser(name)  # a name among argparse's choices, never parsed
        elif build not in built:
            built.append(build)
            build(commands)
    verbose_everywhere(parser)
    quiet_everywhere(parser)
    return parser


def _add_replay(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from timebound.replay import load_commands

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


def _add_simulate(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from timebound.sim.cli import add_simulate_parser

    add_simulate_parser(commands)


def _add_sweep(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from timebound.sweep import add_sweep_parser

    add_sweep_parser(commands)


def _add_bench(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from timebound.pipeline.bench_cli import add_bench_parser
    from timebound.stream.bench_cli import add_bench_stream_parser

    add_bench_stream_parser(add_bench_parser(commands))


def _add_network(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from timebound.net.cli import (
        add_key_parser,
        add_net_parser,
        add_rpc_parser,
        add_service_parsers,
    )

    add_rpc_parser(commands)
    add_net_parser(commands)
    add_service_parsers(commands)
    add_key_parser(commands)


def _add_stream(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from timebound.stream.cli import add_stream_parser

    add_stream_parser(commands)


def _add_examples(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from timebound.examples_cli import add_parser as add_examples_parser

    add_examples_parser(commands)


def _add_compare(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from timebound.stream.compare_cli import add_compare_parser

    add_compare_parser(commands, _write_compare_page)


def _add_demo(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    demo = commands.add_parser(
        "demo",
        help="the main job: examples, simulated scenarios, Spark pipeline, report",
        description=(
            "The main job. (1) Replay the bundled example trace of every protocol and "
            "print a summary per protocol; (2) simulate every scenario at a modest "
            "scale into DIR/datasets; (3) run the pipeline on Spark (local by default) "
            "into DIR/pipeline; (4) write DIR/report.html, the paper claims beside our "
            "measurements. Takes about a minute on 2 cores (most of it starting Spark). "
            "Every option is checked before step 1."
        ),
    )
    demo.add_argument("--out", default=None, metavar="DIR",
                      help="where the datasets, pipeline output and report.html go "
                           "(default: ./timebound-demo)")
    demo.add_argument("--scale", type=float_range(0.01, 100.0), default=1.0, metavar="F",
                      help="multiply the demo's scenario sizes by F, in [0.01, 100] "
                           "(default 1.0)")
    demo.add_argument("--scenarios", default=None, metavar="A,B",
                      help="only these simulator scenarios, a non-empty comma list "
                           "(default: all)")
    demo.add_argument("--master", default=None, metavar="URL",
                      help="Spark master: local[*] (default), spark://..., yarn, k8s://...")
    demo.add_argument("--seed", type=int_range(0, 2**63 - 1), default=0,
                      help="scenario seed in [0, 2^63-1] (default 0)")
    _add_verbose(demo)
    demo.set_defaults(handler=_run_demo)


def subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parsers of ``parser``'s subcommands (one level)."""
    found: list[argparse.ArgumentParser] = []
    for action in parser._actions:  # argparse keeps them only here
        if isinstance(action, argparse._SubParsersAction):
            found.extend(dict.fromkeys(action.choices.values()))
    return found


def verbose_everywhere(parser: argparse.ArgumentParser) -> None:
    """``--verbose`` after any command and subcommand, not only before them (it sets the
    same flag as the top-level one)."""
    for sub in subparsers(parser):
        if "--verbose" not in sub._option_string_actions:
            _add_verbose(sub)
        verbose_everywhere(sub)


def quiet_everywhere(parser: argparse.ArgumentParser) -> None:
    """``--quiet`` after any command and subcommand, as ``--verbose``: it sets the same
    flag as the top-level one. A command with its own ``--quiet`` keeps its help, but
    its default no longer resets the top-level flag (``timebound --quiet simulate ...``).
    Where a command prints no progress lines, it is accepted and changes nothing."""
    for sub in subparsers(parser):
        own = sub._option_string_actions.get("--quiet")
        if own is None:
            _add_quiet(sub)
        else:
            own.default = argparse.SUPPRESS
        quiet_everywhere(sub)


def _add_quiet(parser: argparse.ArgumentParser) -> None:
    # SUPPRESS: the top-level --quiet is not reset by the subcommand's default
    parser.add_argument("--quiet", action="store_true", default=argparse.SUPPRESS,
                        help="no progress lines (results and errors are still printed)")


def _add_pipeline_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    pipeline = commands.add_parser(
        "pipeline",
        help="run every protocol over a trace dataset on Spark; decisions + metrics",
        description=(
            "Run every protocol whose input table is present in DATASET (messages, events, "
            "arrivals, channel, acks; see docs/pipeline.md) on Spark, the replay's cores "
            "inside each group. Writes DIR/<table>/ decision tables, DIR/metrics/ and "
            "DIR/manifest.json, whole or not at all. Protocol options are defaults for "
            "the runs whose table has no column of that name; one that a run's option "
            "column contradicts is refused. Option ranges: docs/errors.md."
        ),
    )
    pipeline.add_argument("dataset", metavar="DATASET", help="trace dataset folder")
    pipeline.add_argument("--out", required=True, metavar="DIR",
                          help="output folder: new, empty, or an earlier pipeline output "
                               "(never DATASET, inside it, or a folder of other files)")
    pipeline.add_argument("--master", default=None, metavar="URL",
                          help="Spark master: local[*] (default), spark://..., yarn, k8s://...")
    pipeline.add_argument("--conf", action="append", default=[], metavar="K=V",
                          help="Spark setting, passed through (repeatable)")
    at = pipeline.add_argument_group(
        "atmostonce (as timebound replay atmostonce; times in trace ticks)")
    at.add_argument("--estimator", choices=ESTIMATORS, default=None,
                    help="lifetime estimator: fixed rho, unlimited horizon (adaptive Fig. 2) "
                         "or limited horizon (adaptive Fig. 3) (default: the run's, else "
                         "fixed)")
    for flag, what in _ATMOSTONCE_HELP:
        _limited(at, flag, what)
    at.add_argument("--resilient", action="store_true", default=None,
                    help="keep latest on (simulated) stable storage, so the trace's crash "
                         "rows are allowed (default: the run's, else off)")
    ca = pipeline.add_argument_group(
        "causal and merge (as their replay commands; times in trace ticks)")
    _limited(ca, "--epsilon", "clock-difference bound epsilon (G1), ticks")
    _limited(ca, "--delta", "merge: message-delay bound delta (G2), ticks")
    ca.add_argument("--variant", choices=VARIANTS, default=None,
                    help="rckn: rows carry r, c, kn; rc: rows carry r, c (default: the "
                         "run's, else rckn)")
    _limited(ca, "--n", "causal rckn: the process bound of Lemma 3.4")
    st = pipeline.add_argument_group("stability (as timebound replay stability)")
    st.add_argument("--acks", default=None, metavar="timestamp|vector",
                    help="acknowledgment scheme: one scalar (timestamp) or a vector "
                         "(default timestamp)")
    st.add_argument("--senders", default=None, metavar="S1,S2",
                    help="comma-separated sender nodes (default: the run's nodes with "
                         "send rows)")
    st.add_argument("--receivers", default=None, metavar="R1,R2",
                    help="comma-separated receiver nodes (default: the run's nodes with "
                         "recv or ack rows)")
    _add_verbose(pipeline)
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
    report.add_argument("dir", metavar="DIR",
                        help="pipeline output folder, or a folder of them (report.html "
                             "is written into it unless --out)")
    report.add_argument("--out", metavar="FILE", default=None,
                        help="where the page goes, a .html file (default DIR/report.html; "
                             "required when DIR is a dataset of simulate or sweep, an "
                             "input that is never written into)")
    report.set_defaults(handler=_run_report)


#: Each top-level command and what builds its parser (one builder may add several).
COMMANDS: dict[str, Callable[[Any], None]] = {
    "replay": _add_replay, "simulate": _add_simulate, "sweep": _add_sweep,
    "bench": _add_bench, **dict.fromkeys(("rpc", "net", "channel", "group", "pubsub", "key"),
                                         _add_network),
    "stream": _add_stream, "examples": _add_examples, "compare": _add_compare,
    "demo": _add_demo, "pipeline": _add_pipeline_commands, "report": _add_pipeline_commands,
}


def command_of(argv: Sequence[str]) -> str | None:
    """The top-level command ``argv`` names (its first word not an option), if any."""
    return next((word for word in argv if not word.startswith("-")), None)


def _add_verbose(parser: argparse.ArgumentParser) -> None:
    # SUPPRESS: the top-level --verbose is not reset by the subcommand's default
    parser.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="show the full traceback and Spark's log on an error")


#: The pipeline's atmostonce options and what each sets (as the replay's help says).
_ATMOSTONCE_HELP = (
    ("--rho", "fixed: the lifetime rho, ticks"),
    ("--gc-every", "fixed, unlimited: GC at every multiple of this many ticks"),
    ("--window", "limited: lifetimes per GC period"),
    ("--spikes", "limited: spikes ignored per period (below --window)"),
    ("--p", "limited: lost/accepted target 1/P"),
    ("--beta", "resilient: latest = time + beta, ticks"),
    ("--latest-every", "resilient: refresh latest at every multiple of this many ticks"),
    ("--recovery-grace", "after a recovery, GC forgets nothing for this many ticks "
                         "(SCMP 2.4; 0 is the figures' behaviour)"),
    ("--reorder-window", "accept a genuine message overtaken on its connection if it is "
                         "among this many most recent timestamps the connection keeps (1 "
                         "is SCMP's rule)"),
    ("--classes", "hash classes per receiver: crc32(utf-8 conn) mod K"),
)


def _limited(group: argparse._ArgumentGroup, flag: str, what: str) -> None:
    low, high = OPTION_LIMITS[flag[2:].replace("-", "_")]
    group.add_argument(flag, type=int_range(low, high), default=None,
                       help=f"{what}; in [{low}, {high}] (default: the run's option "
                            f"column, else the replay's default)")


PIPELINE_OPTIONS = ("estimator", "rho", "gc_every", "window", "spikes", "p", "beta",
                    "latest_every", "recovery_grace", "reorder_window", "classes",
                    "resilient", "epsilon", "delta", "variant", "n", "acks", "senders",
                    "receivers")


def _run_pipeline(args: argparse.Namespace) -> int:
    from timebound._safety import require_extra

    require_extra("spark", "pyspark", "timebound pipeline")
    from timebound.pipeline import format_summary, parse_conf, run_pipeline

    conf = parse_conf(args.conf)
    if not args.verbose:  # a failed task's Spark/Java/Python traces only with --verbose
        conf.setdefault("timebound.logLevel", "OFF")
    options = {dest: getattr(args, dest) for dest in PIPELINE_OPTIONS
               if getattr(args, dest) is not None}
    if getattr(args, "quiet", False):  # no progress line, and no watching for one
        summary = run_pipeline(args.dataset, args.out, options=options, master=args.master,
                               conf=conf, progress=_silent, progress_every=0)
    else:
        summary = run_pipeline(args.dataset, args.out, options=options, master=args.master,
                               conf=conf)
    print(format_summary(summary))
    print(f"output: {args.out}")
    return 0


def _silent(line: str) -> None:
    """Progress lines under ``--quiet``: dropped."""


def _run_report(args: argparse.Namespace) -> int:
    from timebound._safety import require_extra

    require_extra("report", "matplotlib", "timebound report")
    require_extra("report", "pandas", "timebound report")
    from timebound.report import is_dataset, write_report

    if args.out is None and is_dataset(args.dir):
        raise UsageError("--out", f"'{args.dir}' is a dataset of simulate or sweep (an "
                                  "input, never written into): give --out FILE.html, or "
                                  "run timebound pipeline on it and report on its output")
    print(write_report(args.dir, out=args.out))
    return 0


def _write_compare_page(table: Any, out: str, source: str) -> str:
    """``timebound compare``'s page (the report layer's; the command is the stream
    driver's, which does not import the report)."""
    from timebound.report.compare import write_compare_report

    return write_compare_report(table, out, source=source)


def _run_replay(args: argparse.Namespace) -> int:
    from timebound.replay import replay_rows

    replayer = replay_rows(args.replay_command, args)
    if getattr(args, "stats", False):  # stderr, so also with --output -
        summary = replayer.summary()
        width = max([28, *(len(label) for label, _ in summary)])  # one column of values
        for label, value in summary:
            print(f"{label:>{width}}  {value}", file=sys.stderr)
    return 0


def _run_demo(args: argparse.Namespace) -> int:
    from timebound.demo import run_demo

    return run_demo(args.out, scale=args.scale, scenarios=args.scenarios,
                    master=args.master, seed=args.seed, verbose=args.verbose,
                    quiet=bool(getattr(args, "quiet", False)))


def _os_error(exc: OSError) -> str:
    """One line for an OS error: the file(s) and the system's reason."""
    names = " -> ".join(f"'{name}'" for name in (exc.filename, exc.filename2)
                        if name is not None)
    reason = exc.strerror or str(exc) or type(exc).__name__
    if names:
        return f"{names}: {reason}"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO):
        return f"cannot write the output: {reason}"
    return reason


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(command_of(words))
    try:
        args = parser.parse_args(words)
    except SystemExit as stop:  # --help, --version, or a one-line argparse error
        return stop.code if isinstance(stop.code, int) else EXIT_USAGE
    verbose = bool(getattr(args, "verbose", False))
    try:
        with sigterm_raises():
            return int(args.handler(args))
    except TimeboundError as exc:
        _trace(verbose)
        network = _network_status(exc)
        if network is not None:  # what the network did, not the input
            print(f"timebound: {exc}", file=sys.stderr)
            return network
        print(f"timebound: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK
    except OSError as exc:  # an output path not writable, a full device, a vanished file
        _trace(verbose)
        _quiet_stdout()
        lost = _spark_failure(exc, getattr(args, "conf", None))  # or the JVM gone
        print(f"timebound: error: {lost or _os_error(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("timebound: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated:
        print("timebound: terminated", file=sys.stderr)
        return EXIT_TERMINATED
    except Exception as exc:  # a bug: one line, the traceback with --verbose
        _trace(verbose)
        typed = _typed_from_spark(exc)
        if typed is not None:  # a worker's typed error the operator did not translate
            print(f"timebound: error: {typed}", file=sys.stderr)
            return EXIT_USAGE
        failed = _spark_failure(exc, getattr(args, "conf", None))
        if failed is not None:  # Spark's own failure: its reason, the rest with --verbose
            print(f"timebound: error: {failed}"
                  + ("" if verbose else " (run with --verbose for Spark's log)"),
                  file=sys.stderr)
            return EXIT_USAGE
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        print(f"timebound: internal error: {type(exc).__name__}: {first}"
              + ("" if verbose else " (run with --verbose for the traceback)"),
              file=sys.stderr)
        return EXIT_BUG


def _network_status(exc: TimeboundError) -> int | None:
    """The status of a network outcome that a command did not end itself (a call's
    ``RpcError``, a ``ChannelFailed``): the same as ``rpc call``'s and ``channel
    send``'s (``timebound.exitcodes``); None for any other error."""
    errors = sys.modules.get("timebound.net._errors")
    if errors is not None and isinstance(exc, errors.RpcError):
        from timebound.net.cli.rpc_client import failure_status

        return failure_status(exc)
    channel = sys.modules.get("timebound.net._channel")
    if channel is not None and isinstance(exc, channel.ChannelFailed):
        return EXIT_CHANNEL_FAILED
    return None


def _typed_from_spark(exc: BaseException) -> TimeboundError | None:
    """Our typed error carried anywhere in a Spark exception (message, JVM trace, causes)."""
    if "pyspark" not in sys.modules and "py4j" not in sys.modules:
        return None
    from timebound.sparkutil import rebuild

    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        item = todo.pop()
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        for text in (str(item), getattr(item, "_desc", None), getattr(item, "_stackTrace", None)):
            typed = rebuild(text) if isinstance(text, str) else None
            if typed is not None:
                return typed
        todo += [getattr(item, "_cause", None), item.__cause__, item.__context__]
    return None


def _spark_failure(exc: BaseException, items: object) -> TimeboundError | None:
    """Spark's failure in one line, naming the ``--conf K=V`` item its reason names."""
    if "pyspark" not in sys.modules and "py4j" not in sys.modules:
        return None
    from timebound.sparkutil import spark_failure

    given = items if isinstance(items, list) else []
    conf = dict(str(item).partition("=")[::2] for item in given)
    return spark_failure(exc, conf)


def _quiet_stdout() -> None:
    """After stdout failed (e.g. a full device), send what is still buffered to
    /dev/null so that the interpreter's final flush prints no second error."""
    try:
        sys.stdout.flush()
    except OSError:
        import os

        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass


def _trace(verbose: bool) -> None:
    if verbose:
        traceback.print_exc()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
