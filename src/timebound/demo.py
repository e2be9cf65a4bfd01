"""``timebound demo [--out DIR]``: the main job.

1. Quick replay of the example trace bundled with every replay command (a summary
   table per protocol; decisions kept in ``DIR/examples/``).
2. Every scenario the simulator offers (``timebound.sim.SCENARIOS``), at the modest
   demo scale of ``DEMO_PARAMS`` (times ``--scale``): datasets in ``DIR/datasets/``.
3. The Spark pipeline over each dataset, one local session for all:
   ``DIR/pipeline/<scenario>/``.
4. The report: ``DIR/report.html``.

DIR defaults to ``./timebound-demo``. Every option is checked, and the optional
dependencies it needs (the ``spark`` and ``report`` extras) are looked for, before
step 1 runs: a bad one is one line and exit status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import time
from importlib import resources
from typing import TYPE_CHECKING, Any

from timebound._safety import check_writable_folder, require_extra
from timebound.errors import TimeboundError, UsageError
from timebound.replay import load_commands, replay_rows

if TYPE_CHECKING:
    from timebound.sim import Scenario

DEFAULT_OUT = "timebound-demo"


class DemoError(TimeboundError):
    """A part the demo needs is missing."""


def example_path(name: str) -> str:
    """Filesystem path of a bundled example trace."""
    return str(resources.files("timebound.examples").joinpath(name))


def replay_examples(target: str) -> None:
    commands = load_commands()
    os.makedirs(target, exist_ok=True)
    for index, command in enumerate(commands, start=1):
        output = os.path.join(target, f"{command.name}.decisions.jsonl")
        parser = argparse.ArgumentParser(prog=f"timebound replay {command.name}")
        command.add_arguments(parser)
        args = parser.parse_args(
            ["--input", example_path(command.example_file), "--output", output,
             *command.example_args]
        )
        print(f"[{index}/{len(commands)}] {command.name}: {command.help}")
        print(f"    timebound replay {command.name} --input {command.example_file} "
              f"{' '.join(command.example_args)}")
        replayer = replay_rows(command, args)
        rows = replayer.summary()
        width = max(len(label) for label, _ in rows)
        for label, value in rows:
            print(f"    {label:<{width}}  {value}")
        print()


def scaled(params: dict[str, str], scale: float,
           scenario: Scenario | None = None) -> dict[str, str]:
    """Multiply the single-integer parameters of 10 or more by ``scale`` (at least 10,
    and at least the parameter's own lower bound when ``scenario`` is given, so that
    every ``--scale`` in range gives a run the scenario accepts); small counts
    (publishers, servers) and lists stay as they are."""
    if scale == 1.0:
        return dict(params)
    out = {}
    for key, value in params.items():
        try:
            number = int(value)
        except ValueError:
            out[key] = value
            continue
        if number < 10:
            out[key] = value
            continue
        lowest = scenario.param(key).lo if scenario is not None else None
        floor = 10 if lowest is None else max(10, math.ceil(lowest))
        out[key] = str(max(floor, round(number * scale)))
    return out


def _simulator() -> tuple[dict[str, Any], dict[str, dict[str, str]], Any]:
    try:
        from timebound.sim import DEMO_PARAMS, SCENARIOS, run_scenario
    except ImportError as exc:
        raise DemoError(f"the simulator (timebound.sim) is not available: {exc}; "
                        "the demo needs it to generate datasets") from None
    return SCENARIOS, DEMO_PARAMS, run_scenario


def choose_scenarios(scenarios: str | None, available: dict[str, Any]) -> list[str]:
    """The scenarios named by ``--scenarios`` (None: all); empty or unknown names refused."""
    if scenarios is None:
        return list(available)
    names = [n.strip() for n in scenarios.split(",")]
    if not any(names) or not all(names):
        raise UsageError("--scenarios", f"expected a comma list of scenario names, got "
                         f"{scenarios!r}; choose from {', '.join(available)}")
    unknown = [n for n in names if n not in available]
    if unknown:
        raise UsageError("--scenarios", f"unknown {', '.join(unknown)}; choose from "
                         f"{', '.join(available)}")
    return list(dict.fromkeys(names))


#: What the demo writes in its folder (a folder holding anything else is refused).
DEMO_NAMES = ("examples", "datasets", "pipeline", "report.html")


def check_demo_folder(out: str) -> None:
    """``out`` is new, empty, or a demo folder (only ``DEMO_NAMES``): the demo never
    writes among a user's own files (as ``sweep`` and ``pipeline`` refuse to)."""
    if not os.path.isdir(out):
        return
    foreign = sorted(name for name in os.listdir(out) if name not in DEMO_NAMES)
    if foreign:
        raise UsageError("--out", f"'{out}' holds files the demo did not write "
                                  f"({', '.join(repr(n) for n in foreign[:3])}"
                                  f"{', ...' if len(foreign) > 3 else ''}); give a new or "
                                  f"empty folder")


def run_demo(out_dir: str | None = None, *, scale: float = 1.0,
             scenarios: str | None = None, master: str | None = None, seed: int = 0,
             verbose: bool = False, quiet: bool = False) -> int:
    """The four steps (module docstring). ``quiet``: only the closing lines (the time
    taken and the report's path), no step headers or progress lines."""
    started = time.perf_counter()
    out = os.path.abspath(out_dir or DEFAULT_OUT)
    # every option and every optional part is checked before step 1
    if not (math.isfinite(scale) and 0.01 <= scale <= 100):
        raise UsageError("--scale", f"must be a number in [0.01, 100], got {scale}")
    if not 0 <= seed < 2**63:
        raise UsageError("--seed", f"must be in [0, 2^63-1], got {seed}")
    available, demo_params, run_scenario = _simulator()
    names = choose_scenarios(scenarios, available)
    # the scaled sizes too, so that no scenario refuses its run after step 1
    sizes = {name: scaled(demo_params.get(name, {}), scale, available[name]) for name in names}
    for name in names:
        available[name].resolve(sizes[name])
    require_extra("spark", "pyspark", "timebound demo")
    require_extra("report", "matplotlib", "timebound demo")
    from timebound.pipeline.session import check_master

    check_master(master)
    check_writable_folder(out, "--out")
    check_demo_folder(out)
    os.makedirs(out, exist_ok=True)
    with contextlib.redirect_stdout(io.StringIO()) if quiet else contextlib.nullcontext():
        report = _steps(out, names, sizes, run_scenario, seed, master, verbose)
    print(f"demo finished in {time.perf_counter() - started:.0f} s")
    print(f"report: {report}")
    return 0


def _steps(out: str, names: list[str], sizes: dict[str, dict[str, str]], run_scenario: Any,
           seed: int, master: str | None, verbose: bool) -> str:
    print("== 1. bundled examples through timebound replay ==\n")
    replay_examples(os.path.join(out, "examples"))

    print(f"== 2. simulate {len(names)} scenario(s): {', '.join(names)} ==")
    datasets = os.path.join(out, "datasets")
    os.makedirs(datasets, exist_ok=True)
    for name in names:
        t0 = time.perf_counter()
        summary = run_scenario(name, os.path.join(datasets, name), seed=seed,
                               params=sizes[name])
        tables = summary.get("tables", {})
        print(f"  {name}: {len(summary.get('runs', []))} run(s), "
              f"{', '.join(f'{t} {n}' for t, n in tables.items())} "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)

    print("\n== 3. the Spark pipeline (one local session) ==")
    from pyspark.sql import SparkSession

    from timebound.pipeline import build_session, format_summary, run_pipeline
    from timebound.pipeline.session import stopped_after

    owned = SparkSession.getActiveSession() is None  # a caller's session is left running
    spark = build_session(master, {} if verbose else {"timebound.logLevel": "OFF"})
    pipeline = os.path.join(out, "pipeline")
    os.makedirs(pipeline, exist_ok=True)
    with stopped_after(spark, owned):
        for name in names:
            summary = run_pipeline(os.path.join(datasets, name), os.path.join(pipeline, name),
                                   spark=spark, progress=lambda line: print("  " + line,
                                                                            flush=True))
            print("\n".join("    " + line for line in format_summary(summary).splitlines()))

    print("\n== 4. report ==")
    from timebound.report import write_report

    return str(write_report(out, source=pipeline))
