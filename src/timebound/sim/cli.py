"""``timebound simulate``: run a scenario and write its trace dataset.

``timebound simulate SCENARIO --out DIR [--seed N] [--set key=value ...]``,
``timebound simulate --list``, ``timebound simulate --reproduce FILE``.
Progress goes to stderr as plain text lines; a one-screen summary to stdout.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from timebound.errors import UsageError


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
                     help="scmp | adaptive | slotted | stability | merge")
    sim.add_argument("--out", metavar="DIR", help="dataset folder (written atomically)")
    sim.add_argument("--seed", type=int, default=0, metavar="N", help="random seed (default 0)")
    sim.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     dest="overrides", help="override a scenario parameter (repeatable)")
    sim.add_argument("--list", action="store_true",
                     help="describe every scenario (or only SCENARIO) and exit")
    sim.add_argument("--reproduce", metavar="FILE",
                     help="run the reproduction scenarios and write the paper-vs-measured "
                          "table (docs/reproduction.md)")
    sim.add_argument("--quick", action="store_true",
                     help="with --reproduce: every row at the demo's scale (under a minute)")
    sim.add_argument("--spark", action="store_true",
                     help="with --reproduce: run the jobs as Spark tasks (a sweep)")
    sim.add_argument("--master", metavar="URL",
                     help="with --spark: Spark master (default local[2])")
    sim.add_argument("--conf", action="append", default=[], metavar="K=V",
                     help="with --spark: a Spark configuration entry (repeatable)")
    sim.add_argument("--quiet", action="store_true", help="no progress lines")
    sim.set_defaults(handler=run_simulate)


def _parse_sets(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError("--set", f"expected KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


class _Progress:
    """Plain-text progress on stderr, at most one line per step."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.start = time.perf_counter()

    def __call__(self, label: str, done: int, total: int) -> None:
        if self.quiet:
            return
        width = 30
        filled = width * done // total if total else width
        bar = "#" * filled + "." * (width - filled)
        elapsed = time.perf_counter() - self.start
        print(f"[{bar}] {done}/{total} {elapsed:6.1f}s {label}", file=sys.stderr, flush=True)


def _refuse_contradictions(args: argparse.Namespace) -> None:
    """--list [SCENARIO] and --reproduce FILE are modes of their own: any option of the
    other modes given with them is a contradiction, refused rather than ignored."""
    if args.list and args.reproduce:
        raise UsageError("--list", "cannot be combined with --reproduce")
    mode = "--list" if args.list else "--reproduce" if args.reproduce else None
    if mode != "--reproduce":
        for name, given in (("--quick", args.quick), ("--spark", args.spark),
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
        ("--seed", args.seed != 0)) if given]
    if extra:
        raise UsageError(mode, f"cannot be combined with {', '.join(extra)} "
                         f"({mode} {'runs its own scenarios' if mode == '--reproduce' else 'only describes'})")


def run_simulate(args: argparse.Namespace) -> int:
    from timebound._safety import check_writable, check_writable_folder
    from timebound.sim import SCENARIOS, run_scenario

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
        from timebound.sim._reproduce import write_reproduction

        check_writable(args.reproduce, "--reproduce")  # before the run, not after it
        write_reproduction(args.reproduce, progress=_Progress(args.quiet),
                           quick=args.quick, spark=args.spark, master=args.master,
                           conf=_parse_sets(args.conf))
        print(f"wrote {args.reproduce}")
        return 0
    if not args.scenario:
        raise UsageError("SCENARIO", "required (or --list / --reproduce)")
    if not args.out:
        raise UsageError("--out", "required here")
    check_writable_folder(args.out, "--out")  # before the run, not after it
    progress = _Progress(args.quiet)
    started = time.perf_counter()
    result = run_scenario(args.scenario, args.out, seed=args.seed,
                          params=_parse_sets(args.overrides), progress=progress)
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
