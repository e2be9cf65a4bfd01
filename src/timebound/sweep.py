"""``timebound sweep SCENARIO --grid key=v1,v2 [--grid ...] [--seeds N] --out DIR``.

A parameter sweep over the simulator, distributed by Spark: every grid point x seed is
one simulator run (seeded, single-threaded, deterministic) executed in one Spark task
(``sim.map_tasks``); the runs' datasets are then merged into ONE dataset folder
that ``timebound pipeline`` and ``timebound report`` read like any other:

- every table holds every run's rows, the ``run`` column prefixed with the grid point
  and the seed: ``<k1=v1,k2=v2>/seed=<s>/<run>`` (one Parquet part per run);
- ``manifest.json`` lists every run with its parameters plus the grid keys, ``seed``
  and ``base_run`` (the run's name inside its scenario), and ``sweep`` =
  ``{"grid": {key: [values]}, "seeds": [...]}`` so the report can plot a measure
  against a swept key with the spread across seeds.

Orchestration (top layer): imports the simulator, never the pipeline; PySpark lazily.
Seeds are 1..N. Output written whole or not at all (a temporary folder beside DIR).

Cost: before Spark starts, every grid point is priced by the simulator's estimate
(``sim.estimate_cost``): the memory of the largest run times the runs that execute at
once (the cores of a ``local[N]`` master), plus the Spark JVM; the time of all runs
over those cores. What does not fit this machine (or ``--max-memory`` /
``--max-time``) is refused in one line naming the estimate and the option. Each
progress line after a finished run carries an ETA measured from the runs finished so
far (each weighed by its estimated size). Within a run: each task writes how far it
is (``TaskProgress``: a one-line file ``progress/<n>`` in the staging folder, replaced
at most every second) and the driver prints the runs in progress every ~2 s
(``SweepProgress.poll``); with a cluster master whose workers do not share this
machine's disk, only the lines between runs appear.

Spark: ``--master`` is checked before anything starts; the session is started here
(``sparkutil.start_session``: a failure to start is one line naming ``--master`` or the
``--conf`` item to blame; without ``--verbose`` the JVM's stderr stays off the
terminal) and the simulator's ``map_tasks`` runs on it. On Ctrl-C, SIGTERM or a failure
the session is stopped before the staging folder is removed, so no task still writes
into it.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from timebound._safety import check_writable_folder, require_extra
from timebound.errors import UsageError
from timebound.sparkutil import build_session, check_master, stopped_after

MAX_RUNS = 10_000
#: Resident memory of the local Spark JVM and the sweep's driver (bytes): PySpark 4's
#: default driver heap is 1 GiB; a small sweep measured 0.6-0.9 GiB of JVM RSS.
SPARK_BYTES = 3 * 2**29
#: Starting the Spark session and merging (seconds, measured 8-15 s on 2 cores).
SPARK_SECONDS = 15.0
#: The sweep's own session settings (a ``--conf`` of the same key wins).
#: The sweep's settings besides ``sparkutil.BASE_CONF`` (none yet).
SWEEP_CONF: dict[str, str] = {}


@dataclass(frozen=True)
class Point:
    scenario: str
    values: tuple[tuple[str, str], ...]
    seed: int
    staging: str
    #: the point's position in the sweep (its progress file)
    number: int = 0

    @property
    def label(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.values) or "default"

    @property
    def name(self) -> str:
        return f"grid point {self.label} seed {self.seed}"


def parse_grid(items: list[str], scenario: str) -> list[tuple[str, list[str]]]:
    from timebound.sim import SCENARIOS

    if scenario not in SCENARIOS:
        raise UsageError("SCENARIO", f"unknown scenario {scenario!r}; choose one of "
                         + ", ".join(SCENARIOS))
    grid: list[tuple[str, list[str]]] = []
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip()
        parts = [v.strip() for v in values.split(",")] if sep else []
        if not key or not parts:
            raise UsageError("--grid", f"expected KEY=V1,V2,..., got {item!r}")
        if "" in parts:
            raise UsageError("--grid", f"an empty value in {item!r} (value "
                                       f"{parts.index('') + 1} of {len(parts)})")
        if len(set(parts)) < len(parts):
            twice = next(v for v in parts if parts.count(v) > 1)
            raise UsageError("--grid", f"value {twice!r} given twice in {item!r}")
        if any(k == key for k, _ in grid):
            raise UsageError("--grid", f"key '{key}' given twice")
        param = SCENARIOS[scenario].param(key)
        for value in parts:
            param.parse(value)  # range-checked before any work
        grid.append((key, parts))
    return grid


def points(scenario: str, grid: list[tuple[str, list[str]]], seeds: int,
           staging: str) -> list[Point]:
    keys = [k for k, _ in grid]
    combos = list(itertools.product(*[vs for _, vs in grid])) if grid else [()]
    pts = [(tuple(zip(keys, combo, strict=True)), seed)
           for combo in combos for seed in range(1, seeds + 1)]
    return [Point(scenario, values, seed, staging, number)
            for number, (values, seed) in enumerate(pts)]


#: Seconds between two writes of a task's progress file, and between two polls of the
#: driver (a poll prints a line per run in progress).
TASK_WRITE_EVERY = 1.0
POLL_EVERY = 2.0


class TaskProgress:
    """The progress of one grid point inside its Spark task, written to
    ``<staging>/progress/<number>`` as ``<fraction of the point> <text>``."""

    def __init__(self, point: Point, every: float = TASK_WRITE_EVERY) -> None:
        folder = os.path.join(point.staging, "progress")
        os.makedirs(folder, exist_ok=True)
        self.path = os.path.join(folder, str(point.number))
        self.every = every
        self.last = 0.0
        self.run = 0
        self.runs = 1

    def __call__(self, label: str, done: int, total: int) -> None:
        self.run, self.runs = done, max(1, total)

    def within(self, done: int, total: int, unit: str) -> None:
        now = time.perf_counter()
        if now - self.last < self.every or total <= 0:
            return
        self.last = now
        done = min(done, total)
        fraction = (self.run + done / total) / self.runs
        text = (f"run {self.run + 1}/{self.runs} {100 * done // total}% "
                f"({done:,}/{total:,} {unit})")
        tmp = f"{self.path}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(f"{fraction:.6f} {text}\n")
        os.replace(tmp, self.path)


def run_point(point: Point) -> dict[str, Any]:
    """One Spark task: simulate one grid point and seed into the staging folder."""
    from timebound.sim import run_scenario

    index = hashlib.sha1(point.label.encode()).hexdigest()[:16]
    out = os.path.join(point.staging, f"run-{point.seed}-{index}")
    result = run_scenario(point.scenario, out, seed=point.seed, params=dict(point.values),
                          progress=TaskProgress(point) if point.staging else None)
    return {"out": out, "runs": result["runs"]}


def merge(out_dir: str, scenario: str, pts: list[Point], results: list[dict[str, Any]],
          grid: list[tuple[str, list[str]]], seeds: int) -> dict[str, int]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    parent = os.path.dirname(out_dir)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(out_dir)}.tmp-", dir=parent)
    try:
        counts: dict[str, int] = {}
        runs: list[dict[str, Any]] = []
        base_params: dict[str, Any] = {}
        for number, (pt, res) in enumerate(zip(pts, results, strict=True)):
            src = res["out"]
            with open(os.path.join(src, "manifest.json"), encoding="utf-8") as fh:
                manifest = json.load(fh)
            base_params = manifest.get("params", {})
            prefix = f"{pt.label}/seed={pt.seed}/"
            for run in manifest.get("runs", []):
                params = {**run.get("params", {}), **dict(pt.values), "seed": pt.seed,
                          "base_run": run["run"]}
                runs.append({"run": prefix + run["run"], "params": params})
            for table in sorted(os.listdir(src)):
                folder = os.path.join(src, table)
                if not os.path.isdir(folder):
                    continue
                data = pq.read_table(folder)
                column = data.schema.get_field_index("run")
                renamed = pc.binary_join_element_wise(pa.scalar(prefix), data["run"], "")
                data = data.set_column(column, "run", renamed.cast(pa.string()))
                os.makedirs(os.path.join(tmp, table), exist_ok=True)
                pq.write_table(data, os.path.join(tmp, table, f"part-{number:05d}.parquet"),
                               compression="snappy")
                counts[table] = counts.get(table, 0) + data.num_rows
        manifest_out = {
            "scenario": scenario,
            "seed": None,
            "params": base_params,
            "runs": runs,
            "claims": [],
            "sweep": {"grid": {k: vs for k, vs in grid}, "seeds": list(range(1, seeds + 1))},
            "created_by": "timebound sweep",
        }
        with open(os.path.join(tmp, "manifest.json"), "w", encoding="utf-8") as fh:
            json.dump(manifest_out, fh, indent=2, sort_keys=True)
            fh.write("\n")
        old = tmp + ".old"
        try:
            if os.path.exists(out_dir):
                os.rename(out_dir, old)
            os.rename(tmp, out_dir)
        except BaseException:  # Ctrl-C between the renames: the previous DIR is put back
            if os.path.isdir(old) and not os.path.exists(out_dir):
                os.rename(old, out_dir)
            raise
        shutil.rmtree(old, ignore_errors=True)
        return counts
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def sweep_session(master: str | None, conf: dict[str, str], *, quiet: bool) -> Any:
    """The sweep's session (``local[2]`` unless ``--master``; ``sparkutil.build_session``):
    a failure to start is one line naming the option to blame; ``quiet``: the JVM's
    output stays off the terminal."""
    level = {"timebound.logLevel": "OFF" if quiet else "ERROR"}
    return build_session(master, conf, app_name="timebound-sweep", default_master="local[2]",
                         defaults={**SWEEP_CONF, **level})


def parallelism(master: str | None) -> int:
    """Runs executing at once on this machine: N of ``local[N]`` (``local``: 1,
    ``local[*]``: the cores; a cluster's runs are not on this machine: 1)."""
    spec = master or "local[2]"
    if spec == "local":
        return 1
    if spec.startswith("local["):
        count = spec[len("local["):].split(",")[0].rstrip("]")
        if count == "*":
            return os.cpu_count() or 1
        return int(count) if count.isdigit() and int(count) > 0 else 1
    return 1


def cost(scenario: str, pts: list[Point]) -> Any:
    """The sweep's estimate: one ``RunPlan`` per grid point and seed (its runs' units),
    the memory of the largest point's runs, the time of all of them."""
    from timebound.sim import SCENARIOS, Estimate, RunPlan, estimate_cost

    each = [estimate_cost(scenario, SCENARIOS[scenario].resolve(dict(pt.values)))
            for pt in pts]
    unit = each[0].unit if each else "runs"
    return Estimate(scenario, unit,
                    tuple(RunPlan(pt.name, e.units) for pt, e in zip(pts, each, strict=True)),
                    max((e.memory for e in each), default=0),
                    sum(e.seconds for e in each))


def check_cost_of(scenario: str, pts: list[Point], master: str | None, *,
                  max_memory: int | None, max_time: float | None) -> Any:
    """Refuse a sweep that does not fit (before Spark starts); its estimate otherwise."""
    from timebound.sim import Estimate, check_cost

    est = cost(scenario, pts)
    at_once = min(parallelism(master), max(1, len(pts)))
    whole = Estimate(est.scenario, est.unit, est.runs,
                     est.memory * at_once + SPARK_BYTES,
                     est.seconds / at_once + SPARK_SECONDS)
    check_cost(whole, max_memory=max_memory, max_time=max_time,
               what=f"sweep {scenario} ({at_once} run(s) at once)")
    return whole


class SweepProgress:
    """``sweep [3/12] <run> ETA 1m20s`` on stderr after each finished run, and from
    ``poll()`` a line per run in progress (``TaskProgress``). The ETA is the wall time
    so far over the estimated work done (finished runs, and the fractions of those in
    progress), applied to the work left."""

    def __init__(self, weights: list[int], write: Callable[[str], None] | None = None,
                 names: list[str] | None = None, staging: str | None = None) -> None:
        self.weights = [max(1, w) for w in weights]
        self.names = names or []
        self.folder = os.path.join(staging, "progress") if staging else None
        self.start = time.perf_counter()
        self.write = write or (lambda line: print(line, file=sys.stderr, flush=True))
        self.done = 0
        self.finished: set[str] = set()
        self.running: dict[int, float] = {}  # point -> fraction done

    def _eta(self) -> str:
        from timebound.sim import format_eta

        whole = sum(self.weights)
        finished: float = sum(self.weights[:self.done]) if not self.finished else sum(
            w for n, w in zip(self.names, self.weights, strict=False) if n in self.finished)
        finished += sum(self.weights[i] * f for i, f in self.running.items()
                        if i < len(self.weights))
        elapsed = time.perf_counter() - self.start
        if finished <= 0 or finished >= whole or elapsed <= 0:
            return ""
        return f" ETA {format_eta(elapsed * (whole - finished) / finished)}"

    def __call__(self, label: str, done: int, total: int) -> None:
        self.done = done
        if label in self.names:
            self.finished.add(label)
            self.running.pop(self.names.index(label), None)
        eta = self._eta() if 0 < done < total else ""
        self.write(f"sweep [{done}/{total}] {label}{eta}")

    def poll(self) -> None:
        """A line per run in progress, from the tasks' progress files."""
        if self.folder is None or not os.path.isdir(self.folder):
            return
        lines = []
        for entry in sorted(os.listdir(self.folder)):
            if not entry.isdigit() or int(entry) >= len(self.names):
                continue
            index = int(entry)
            if self.names[index] in self.finished:
                continue
            try:
                with open(os.path.join(self.folder, entry), encoding="utf-8") as fh:
                    fraction, _, text = fh.read().strip().partition(" ")
                self.running[index] = min(1.0, max(0.0, float(fraction)))
            except (OSError, ValueError):  # replaced while read: the next poll sees it
                continue
            lines.append((self.names[index], text))
        if lines:
            eta = self._eta()
            for name, text in lines:
                self.write(f"sweep [{self.done}/{len(self.weights)}] {name}: {text}{eta}")

    def watch(self, stop: threading.Event, every: float = POLL_EVERY) -> threading.Thread:
        """Poll every ``every`` seconds in a thread until ``stop`` is set."""
        def loop() -> None:
            while not stop.wait(every):
                self.poll()
        thread = threading.Thread(target=loop, name="sweep-progress", daemon=True)
        thread.start()
        return thread


def run_sweep(scenario: str, grid_items: list[str], *, seeds: int, out: str,
              master: str | None = None, conf: dict[str, str] | None = None,
              progress: Any = None, quiet: bool = False, max_memory: int | None = None,
              max_time: float | None = None) -> dict[str, Any]:
    """Run the sweep. ``progress``: ``progress(label, done, total)`` after each run,
    None (no lines) or True (the command's lines, with an ETA)."""
    grid = parse_grid(grid_items, scenario)
    check_master(master)
    if not 1 <= seeds <= 1000:
        raise UsageError("--seeds", f"must be in [1, 1000], got {seeds}")
    out = os.path.abspath(out)
    parent = os.path.dirname(out)
    if not os.path.isdir(parent):
        raise UsageError("--out", f"parent folder '{parent}' does not exist")
    if os.path.exists(out) and (not os.path.isdir(out) or (
            os.listdir(out) and not os.path.exists(os.path.join(out, "manifest.json")))):
        raise UsageError("--out", f"'{out}' exists and is not a timebound dataset")
    check_writable_folder(out, "--out")  # '/proc/x': name the option, not a temp folder
    total = len(points(scenario, grid, seeds, ""))
    if total > MAX_RUNS:  # before Spark starts
        raise UsageError("--grid", f"{total} runs; at most {MAX_RUNS}")
    est = check_cost_of(scenario, points(scenario, grid, seeds, ""), master,
                        max_memory=max_memory, max_time=max_time)
    if progress is True and est.seconds >= 30:
        print(f"sweep {scenario}: {est.describe()} (estimate)", file=sys.stderr, flush=True)
    require_extra("spark", "pyspark", "timebound sweep")
    from pyspark.sql import SparkSession

    from timebound.sim import map_tasks

    active = SparkSession.getActiveSession()
    owned = active is None  # a caller's session is left running
    spark = (active if active is not None and master is None and not conf
             else sweep_session(master, dict(conf or {}), quiet=quiet))
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.sweep-", dir=parent)
    try:
        pts = points(scenario, grid, seeds, staging)
        started = time.perf_counter()
        stop = threading.Event()
        watcher = None
        if progress is True:  # the command's own lines, with the ETA, within runs too
            progress = SweepProgress([r.units for r in est.runs], names=[p.name for p in pts],
                                     staging=staging)
            watcher = progress.watch(stop)
        with stopped_after(spark, owned):  # stopped before the staging folder goes
            try:
                results = map_tasks(run_point, pts, [p.name for p in pts],
                                    progress=progress or None, command="timebound sweep")
            finally:
                stop.set()
                if watcher is not None:
                    watcher.join()
            counts = merge(out, scenario, pts, results, grid, seeds)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return {"out": out, "runs": len(pts), "tables": counts,
            "seconds": round(time.perf_counter() - started, 1)}


def add_sweep_parser(commands: Any) -> None:
    sweep = commands.add_parser(
        "sweep",
        help="a parameter sweep of a scenario on Spark, into one dataset folder",
        description=(
            "Run SCENARIO for every grid point x seed (seeds 1..N), each run one Spark "
            "task, and merge the runs into one dataset folder (runs named "
            "'<grid point>/seed=<s>/<run>') that `timebound pipeline` and `timebound "
            "report` read; the report plots each measure against a swept key with the "
            "spread across seeds. Example: timebound sweep merge --grid deltas=5,10,20 "
            "--seeds 3 --out sweep-merge"),
    )
    from timebound.sim.cli import add_budget_options

    sweep.add_argument("scenario", metavar="SCENARIO",
                       help="the scenario to sweep: scmp | adaptive | slotted | stability | "
                            "merge")
    sweep.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2",
                       help="a scenario parameter and its values, in the parameter's own "
                            "unit (see simulate --list; repeatable: the grid is the "
                            "product; default: none, one grid point)")
    sweep.add_argument("--seeds", type=int, default=3, metavar="N",
                       help="seeds 1..N per grid point, a count (default 3, range "
                            "[1, 1000])")
    sweep.add_argument("--out", required=True, metavar="DIR",
                       help="dataset folder to write (required; written whole or not at "
                            "all)")
    sweep.add_argument("--master", metavar="URL",
                       help="Spark master URL (default local[2]: two runs at once)")
    sweep.add_argument("--conf", action="append", default=[], metavar="K=V",
                       help="a Spark configuration entry (repeatable; default none)")
    add_budget_options(sweep, "a sweep")
    sweep.add_argument("--quiet", action="store_true",
                       help="no progress lines on stderr (default: a line per finished "
                            "run, with an ETA)")
    sweep.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                       help="show the full traceback and Spark's log on an error (default "
                            "off)")
    sweep.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    conf: dict[str, str] = {}
    for item in args.conf:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError("--conf", f"expected K=V, got {item!r}")
        conf[key.strip()] = value.strip()
    result = run_sweep(args.scenario, args.grid, seeds=args.seeds, out=args.out,
                       master=args.master, conf=conf,
                       progress=not getattr(args, "quiet", False),
                       quiet=not getattr(args, "verbose", False),
                       max_memory=args.max_memory, max_time=args.max_time)
    with open(os.path.join(result["out"], "manifest.json"), encoding="utf-8") as handle:
        written = len(json.load(handle).get("runs", []))
    # a scenario run can write several runs of the dataset (one per experiment or
    # level): say both counts, since timebound pipeline counts the dataset's
    print(f"sweep {args.scenario}: {result['runs']} run(s) (grid points x seeds) in "
          f"{result['seconds']} s, {written} dataset run(s) (what timebound pipeline "
          f"counts)")
    print(f"dataset  {result['out']}")
    print("tables   " + ", ".join(f"{k} {v} rows" for k, v in result["tables"].items()))
    return 0
