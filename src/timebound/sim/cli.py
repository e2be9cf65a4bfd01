"""``timebound simulate``: run a scenario and write its trace dataset.

``timebound simulate SCENARIO --out DIR [--seed N] [--set key=value ...]``,
``timebound simulate --list``, ``timebound simulate --reproduce FILE [--seeds 7,8,9]``.
Progress goes to stderr as plain text lines (between runs and, every ~2 s, within a
run, with an ETA); a one-screen summary to stdout.

Before a scenario starts, its memory and time are estimated from its parameters
(``sim._budget``); what does not fit this machine's available memory (or
``--max-memory``) or the time limit (6 h, or ``--max-time``) is refused in one line
that names the estimate and the option, before anything is written.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from timebound.durations import duration_help, parse_duration
from timebound.errors import UsageError
from timebound.sim._budget import DEFAULT_MAX_SECONDS, parse_size
from timebound.sim._progress import RunProgress


def size_type(option: str) -> Any:
    """An argparse ``type`` for a memory size (``512M``, ``4G``, ``2GiB``)."""
    def parse(text: str) -> int:
        try:
            return parse_size(text, option)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(exc.reason) from None
    parse.__name__ = "size"
    return parse


def seconds_type(option: str) -> Any:
    """An argparse ``type`` for a time limit with its unit (``30s``, ``90m``, ``2h``), in
    seconds (a bare number is refused: ``durations.bare_number_reason``)."""
    def parse(text: str) -> float:
        try:
            return parse_duration(text, option) / 1e6
        except UsageError as exc:
            raise argparse.ArgumentTypeError(exc.reason) from None
    parse.__name__ = "duration"
    return parse


def add_budget_options(parser: argparse.ArgumentParser, what: str) -> None:
    """``--max-memory`` and ``--max-time``: the limits the cost estimate is held to."""
    parser.add_argument(
        "--max-memory", type=size_type("--max-memory"), default=None, metavar="SIZE",
        help=f"refuse {what} whose estimated peak memory is above SIZE (bytes, or with a "
             "unit: 512M, 4G, 2GiB; default: this machine's available memory, "
             "MemAvailable); give a larger SIZE to run a refused one anyway")
    parser.add_argument(
        "--max-time", type=seconds_type("--max-time"), default=None, metavar="DURATION",
        help=duration_help(f"refuse {what} whose estimated wall time is above DURATION; "
                           "give a longer DURATION to run a refused one anyway",
                           int(DEFAULT_MAX_SECONDS * 1e6)))


#: An estimate at least this long (seconds) is printed before the run starts.
LONG_RUN = 30.0


def add_simulate_parser(commands: Any) -> None:
    sim = commands.add_parser(
        "simulate",
        help="simulate a scenario (network, clocks, faults) and write a trace dataset",
        description=(
            "Run one discrete-event scenario (seeded, reproducible) over the protocol "
            "cores and write a trace dataset (Parquet tables + manifest.json + metrics) "
            "that `timebound replay` and `timebound pipeline` can re-decide. "
            "`--list` describes every scenario and parameter."
        ),
    )
    sim.add_argument("scenario", nargs="?", metavar="SCENARIO",
                     help="the scenario to run: scmp | adaptive | slotted | stability | "
                          "merge (required unless --list or --reproduce)")
    sim.add_argument("--out", metavar="DIR",
                     help="dataset folder to write (written whole or not at all; required "
                          "with SCENARIO; no default)")
    sim.add_argument("--seed", type=int, default=0, metavar="N",
                     help="random seed, an integer in [0, 2^63) (default 0): the same seed "
                          "writes the same dataset")
    sim.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     dest="overrides",
                     help="set a scenario parameter, in the parameter's own unit (ticks, "
                          "counts, ...: `--list` names each unit and default; repeatable; "
                          "default: none)")
    sim.add_argument("--list", action="store_true",
                     help="describe every scenario (or only SCENARIO): parameters, units, "
                          "defaults; then exit")
    sim.add_argument("--reproduce", metavar="FILE",
                     help="run the reproduction scenarios, then the live checks of the "
                          "services on loopback UDP, and write the paper-vs-measured "
                          "table with its simulated and live columns to FILE "
                          "(docs/reproduction.md; default: not run)")
    sim.add_argument("--seeds", metavar="S1,S2,S3",
                     help="with --reproduce: the seeds every job runs on, a comma list of at "
                          "least 3 distinct integers >= 1 (a verdict is computed over at "
                          "least 3 runs; it is `agrees` only when every seed agrees); the "
                          "table's header names them (default 1,2,3)")
    sim.add_argument("--quick", action="store_true",
                     help="with --reproduce: every row at the demo's scale (about 1 min 40 s "
                          "on 2 cores, its live jobs included; default off)")
    sim.add_argument("--spark", action="store_true",
                     help="with --reproduce: run the jobs as Spark tasks, a sweep "
                          "(default off: one process)")
    sim.add_argument("--master", metavar="URL",
                     help="with --spark: Spark master URL (default local[2])")
    sim.add_argument("--conf", action="append", default=[], metavar="K=V",
                     help="with --spark: a Spark configuration entry (repeatable; default "
                          "none)")
    add_budget_options(sim, "a scenario")
    sim.add_argument("--quiet", action="store_true",
                     help="no progress lines on stderr (default: progress between runs "
                          "and every ~2 s within a run, with an ETA)")
    sim.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                     help="show the full traceback on an error (default off)")
    sim.set_defaults(handler=run_simulate)


def _parse_sets(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError("--set", f"expected KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def _refuse_contradictions(args: argparse.Namespace) -> None:
    """--list [SCENARIO] and --reproduce FILE are modes of their own: any option of the
    other modes given with them is a contradiction, refused rather than ignored."""
    if args.list and args.reproduce:
        raise UsageError("--list", "cannot be combined with --reproduce")
    mode = "--list" if args.list else "--reproduce" if args.reproduce else None
    if mode != "--reproduce":
        for name, given in (("--quick", args.quick), ("--seeds", args.seeds is not None),
                            ("--spark", args.spark),
                            ("--master", args.master is not None), ("--conf", bool(args.conf))):
            if given:
                raise UsageError(name, "only with --reproduce")
    elif not args.spark and (args.master is not None or args.conf):
        raise UsageError("--master" if args.master is not None else "--conf",
                         "only with --spark")
    if mode is None:
        return
    extra = [name for name, given in (
        ("SCENARIO", args.scenario is not None and mode == "--reproduce"),
        ("--out", args.out is not None), ("--set", bool(args.overrides)),
        ("--seed", args.seed != 0), ("--max-memory", args.max_memory is not None),
        ("--max-time", args.max_time is not None)) if given]
    if extra:
        raise UsageError(mode, f"cannot be combined with {', '.join(extra)} "
                         f"({mode} {'runs its own scenarios' if mode == '--reproduce' else 'only describes'})")


def run_simulate(args: argparse.Namespace) -> int:
    from timebound._safety import check_writable, check_writable_folder
    from timebound.sim import SCENARIOS, check_cost, estimate_cost, run_scenario

    _refuse_contradictions(args)
    if args.list:
        if args.scenario is not None and args.scenario not in SCENARIOS:
            raise UsageError("SCENARIO", f"unknown scenario {args.scenario!r}; choose one "
                             "of " + ", ".join(SCENARIOS))
        for name, scenario in SCENARIOS.items():
            if args.scenario in (None, name):
                print(scenario.describe())
                print()
        return 0
    if args.reproduce:
        from timebound.sim._reproduce import SEEDS, parse_seeds, write_reproduction

        seeds = SEEDS if args.seeds is None else parse_seeds(args.seeds)
        check_writable(args.reproduce, "--reproduce")  # before the run, not after it
        write_reproduction(args.reproduce, progress=RunProgress(getattr(args, "quiet", False)),
                           quick=args.quick, spark=args.spark, master=args.master,
                           conf=_parse_sets(args.conf), seeds=seeds)
        print(f"wrote {args.reproduce}")
        return 0
    if not args.scenario:
        raise UsageError("SCENARIO", "required (or --list / --reproduce)")
    if not args.out:
        raise UsageError("--out", "required here")
    if args.scenario not in SCENARIOS:
        raise UsageError("SCENARIO", f"unknown scenario {args.scenario!r}; choose one of "
                         + ", ".join(SCENARIOS))
    params = _parse_sets(args.overrides)
    cost = estimate_cost(args.scenario, SCENARIOS[args.scenario].resolve(params))
    check_cost(cost, max_memory=args.max_memory, max_time=args.max_time,
               what=f"simulate {args.scenario}")  # before anything is written
    check_writable_folder(args.out, "--out")  # before the run, not after it
    quiet = getattr(args, "quiet", False)
    progress = RunProgress(quiet, cost)
    if not quiet and cost.seconds >= LONG_RUN:
        print(f"simulate {args.scenario}: {cost.describe()} (estimate)", file=sys.stderr,
              flush=True)
    started = time.perf_counter()
    result = run_scenario(args.scenario, args.out, seed=args.seed, params=params,
                          progress=progress)
    elapsed = time.perf_counter() - started
    print(f"scenario {result['scenario']}  seed {result['seed']}  ({elapsed:.1f} s)")
    print(f"dataset  {result['out']}")
    tables = result["tables"]
    assert isinstance(tables, dict)
    print("tables   " + ", ".join(f"{k} {v} rows" for k, v in tables.items()))
    summary = result["summary"]
    assert isinstance(summary, dict)
    for key, value in summary.items():
        print(f"  {key:<22} {value}")
    return 0
