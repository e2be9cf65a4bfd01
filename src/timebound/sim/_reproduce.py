"""``timebound simulate --reproduce FILE``: the paper-vs-measured table.

Runs every reproduction job (a scenario at the reproduction scale below, or the merge
checks of ``_merge_checks``) for each seed (``SEEDS`` by default; ``--seeds 7,8,9``
names others, at least ``MIN_SEEDS`` of them: a verdict needs that many runs), reads each run's scalar metrics and
hands them to ``timebound.claims.evaluate`` -- the same code the report uses -- which
measures every claim on every seed and gives its verdict (``agrees`` only when all
seeds agree). Nothing in the table is typed by hand except, in ``timebound.claims``,
the papers' published claims and the causes of the differences our runs confirm.

Execution: one job per (label, seed) -- a simulator run is single-threaded and
deterministic, so the table does not depend on how jobs are spread: locally over
``workers`` processes (results are gathered by job, never by completion order), or
with ``spark=True`` as Spark tasks (``_spark.map_tasks``), the way ``timebound sweep``
runs. ``quick=True`` is the demo's scale (1 min 37 s on 2 idle cores, live jobs
included). Its slotted runs last 30 s and its stability runs 1 s: with 10 s and 0.3 s,
three rows (the FR delay band of (a) and (d), the (a)/(b) queue, buffer ~ latency) said
"differs" where the full table agrees; at these sizes ``--quick`` gives the full table's
verdicts on seeds 1-3 and 7-9.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from timebound.claims import LIVE_JOBS, Row, evaluate
from timebound.errors import TimeboundError, UsageError
from timebound.sim._dataset import read_table

SEEDS = (1, 2, 3)
#: a verdict is computed over at least this many seeds (runs) per row
MIN_SEEDS = 3


def parse_seeds(text: str) -> tuple[int, ...]:
    """``--seeds 7,8,9``: distinct integers in [1, 2^63), at least ``MIN_SEEDS``, in the
    order given (the table's header names them in that order)."""
    seeds: list[int] = []
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit() or not item.isascii():
            raise UsageError("--seeds", f"expected a comma list of positive integers "
                             f"such as 7,8,9, got {text!r}")
        seed = int(item)
        if not 1 <= seed < 2**63:
            raise UsageError("--seeds", f"a seed must be in [1, 2^63), got {seed}")
        if seed in seeds:
            raise UsageError("--seeds", f"seed {seed} is given twice")
        seeds.append(seed)
    if len(seeds) < MIN_SEEDS:
        raise UsageError("--seeds", f"a verdict needs at least {MIN_SEEDS} seeds, got "
                         f"{len(seeds)} ({text})")
    return tuple(seeds)

#: the ack bandwidth at larger N: timestamp and vector runs only, short (an ack's size
#: depends only on N, so the ratios do not depend on the run's length)
_STABILITY_ACKS = {"modes": "sweep", "sizes": "16,32", "variants": "timestamp,vector",
                   "uneven": "1", "duration": "50000"}

#: (label, scenario or "merge-checks", --set overrides): the full reproduction
FULL: tuple[tuple[str, str, dict[str, str]], ...] = (
    ("scmp", "scmp", {"calls": "10"}),
    ("scmp-reorder", "scmp", {"experiments": "reorder"}),
    ("scmp-restart", "scmp", {"experiments": "restart"}),
    ("adaptive", "adaptive", {"messages": "20000"}),
    ("adaptive-horizon", "adaptive", {
        "loads": "spikes", "estimators": "limited", "spike": "100000",
        "bounded_values": "10000", "spike_p": "0.2", "window": "200", "spikes": "65",
        "p": "2", "messages": "40000"}),
    ("adaptive-step", "adaptive", {"loads": "step,step-slow,step-up",
                                   "estimators": "unlimited,limited", "messages": "10000"}),
    ("adaptive-reorder", "adaptive", {"clients": "10", "loads": "bounded",
                                      "estimators": "unlimited,limited",
                                      "messages": "20000", "duplicate": "0.05"}),
    *(("slotted", "slotted", {"schemes": s, "transport": "paper", "duration": "100000000",
                              "slots": "2000,10000,20000,40000,100000"}) for s in "abcde"),
    ("stability", "stability", {"sizes": "2,4,8", "duration": "1000000"}),
    ("stability-acks", "stability", _STABILITY_ACKS),
    ("merge", "merge", {}),
    ("merge-checks", "merge-checks", {}),
)


def _full(label: str) -> dict[str, str]:
    return next(params for name, _, params in FULL if name == label)


#: the demo's scale: every row, smaller runs (the module docstring says why the slotted
#: and stability runs are not shorter)
QUICK: tuple[tuple[str, str, dict[str, str]], ...] = (
    ("scmp", "scmp", {"calls": "3", "clients": "300", "many_calls": "200",
                      "rhos": "50000,200000,800000,3200000"}),
    ("scmp-reorder", "scmp", {"experiments": "reorder", "reorder_calls": "60"}),
    ("scmp-restart", "scmp", {"experiments": "restart", "restart_calls": "150"}),
    ("adaptive", "adaptive", {"messages": "6000"}),
    ("adaptive-horizon", "adaptive", {**_full("adaptive-horizon"), "messages": "12000"}),
    ("adaptive-reorder", "adaptive", {**_full("adaptive-reorder"), "messages": "4000"}),
    ("adaptive-step", "adaptive", {**_full("adaptive-step"), "messages": "4000",
                                   "step_at": "1000000"}),
    *(("slotted", "slotted", {"schemes": s, "transport": "paper", "duration": "30000000",
                              "slots": "2000,20000,40000,100000"}) for s in "abcde"),
    ("stability", "stability", {"sizes": "2,4", "duration": "1000000"}),
    ("stability-acks", "stability", _STABILITY_ACKS),
    ("merge", "merge", {"duration": "5000"}),
    ("merge-checks", "merge-checks", {"duration": "4000"}),
)


@dataclass(frozen=True)
class Job:
    label: str
    scenario: str
    params: tuple[tuple[str, str], ...]
    seed: int

    @property
    def name(self) -> str:
        extra = dict(self.params).get("schemes", "")
        return f"{self.label}{'/' + extra if self.label == 'slotted' else ''} seed {self.seed}"


def plan(quick: bool = False, seeds: Sequence[int] = SEEDS) -> list[Job]:
    spec = QUICK if quick else FULL
    return [Job(label, scenario, tuple(sorted(params.items())), seed)
            for seed in seeds for label, scenario, params in spec]


def live_plan(quick: bool = False, seeds: Sequence[int] = SEEDS) -> list[Job]:
    """The live jobs (``claims.LIVE_JOBS``), one per seed: the table's live column."""
    return [Job(label, "live", (("kind", kind), ("quick", "1" if quick else "0")), seed)
            for seed in seeds for label, kind in LIVE_JOBS.items()]


#: the longest a live job may take before it counts as hung (seconds)
LIVE_TIMEOUT = 300


def run_live(job: Job) -> dict[str, dict[str, float]]:
    """One live job: ``python -m timebound.net.live KIND --seed N`` in a process of its
    own (its sockets and event loop die with it); the runs it prints as JSON."""
    params = dict(job.params)
    argv = [sys.executable, "-m", "timebound.net.live", params["kind"], "--seed",
            str(job.seed), *(["--quick"] if params.get("quick") == "1" else [])]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=LIVE_TIMEOUT,
                              check=False)
    except subprocess.TimeoutExpired:
        raise TimeboundError(f"live check {job.name}: no result in {LIVE_TIMEOUT} s") from None
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or [f"exit status {done.returncode}"]
        raise TimeboundError(f"live check {job.name} failed: {lines[-1]}")
    runs: dict[str, dict[str, float]] = json.loads(done.stdout)
    return runs


def scalars(dataset: str) -> dict[str, dict[str, float]]:
    """``{run: {measure: value}}`` of a dataset's scalar metrics."""
    got: dict[str, dict[str, float]] = {}
    for row in read_table(dataset, "metrics").to_pylist():
        if row["t"] is None:
            got.setdefault(row["run"], {})[row["measure"]] = row["value"]
    return got


def run_job(job: Job) -> dict[str, dict[str, float]]:
    """Run one job; its scalar metrics (picklable: runs in a worker or a Spark task)."""
    params = dict(job.params)
    if job.scenario == "merge-checks":
        from timebound.sim._merge_checks import run_checks

        return run_checks(job.seed, duration=int(params.get("duration", 10_000)))
    from timebound.sim import run_scenario

    tmp = tempfile.mkdtemp(prefix=".timebound-reproduce-")
    try:
        out = os.path.join(tmp, "ds")
        run_scenario(job.scenario, out, seed=job.seed, params=params)
        return scalars(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _sources(jobs: Sequence[Job], results: Sequence[dict[str, dict[str, float]]],
             seeds: Sequence[int]) -> list[dict[str, dict[str, dict[str, float]]]]:
    per_seed: dict[int, dict[str, dict[str, dict[str, float]]]] = {s: {} for s in seeds}
    for job, runs in zip(jobs, results, strict=True):
        per_seed[job.seed].setdefault(job.label, {}).update(runs)
    return [per_seed[s] for s in seeds]


def root_of(target: str) -> str:
    """The root the claims read bench files under: the folder above the table's folder
    (the checkout, for docs/reproduction.md)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(target)))


def rows_of(jobs: Sequence[Job], results: Sequence[dict[str, dict[str, float]]],
            seeds: Sequence[int], *, root: str) -> list[Row]:
    """The table's rows: ``timebound.claims.evaluate`` over the jobs' metrics, one source
    per job label and seed (what the report does for one dataset: ``report.claim_rows``)."""
    return evaluate(_sources(jobs, results, seeds), root=root)


def check_target(target: str) -> None:
    """Refuse an unwritable target before any work (one line, exit 2)."""
    folder = os.path.dirname(os.path.abspath(target))
    if os.path.isdir(target):
        raise UsageError("--reproduce", f"'{target}' is a folder")
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise UsageError("--reproduce", f"cannot write into '{folder}'")


def run_local(jobs: Sequence[Job], workers: int,
              progress: Callable[[str, int, int], None] | None) -> list[Any]:
    if workers <= 1:
        out = []
        for index, job in enumerate(jobs):
            if progress:
                progress(job.name, index, len(jobs))
            out.append(run_job(job))
        return out
    # biggest jobs first for balance; results are put back in job order
    order = sorted(range(len(jobs)), key=lambda i: jobs[i].label != "slotted")
    results: list[Any] = [None] * len(jobs)
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    with multiprocessing.get_context(method).Pool(workers, initializer=_worker_init) as pool:
        for done, (index, res) in enumerate(pool.imap_unordered(
                _indexed, [(i, jobs[i]) for i in order])):
            results[index] = res
            if progress:
                progress(jobs[index].name, done + 1, len(jobs))
    return results


def _worker_init() -> None:
    # a worker is ended by the pool with SIGTERM: quietly (the parent reports errors)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _indexed(arg: tuple[int, Job]) -> tuple[int, dict[str, dict[str, float]]]:
    return arg[0], run_job(arg[1])


def table(rows: Sequence[Row], *, quick: bool, seeds: Sequence[int], seconds: float,
          spark: bool) -> str:
    spec = QUICK if quick else FULL
    cmd = "timebound simulate --reproduce docs/reproduction.md" + (" --quick" if quick else "")
    if tuple(seeds) != SEEDS:
        cmd += " --seeds " + ",".join(map(str, seeds))
    lines = [
        "# Reproduction: published claims vs measured",
        "",
        f"Generated by `{cmd}` (add `--spark` to run the simulated jobs as Spark tasks); "
        f"do not edit by hand. Every row is measured on seeds {', '.join(map(str, seeds))}; "
        "a range `a-b` is the min-max over the seeds, and a verdict is `agrees` only when "
        "every seed agrees."
        + (" `computed`: the figure comes from a formula, not from data."
           if any(row.verdict == "computed" for row in rows) else "")
        + " The verdicts and the causes of differences come from `src/timebound/claims/` "
        "(one module per paper), which the report page (`timebound report`) uses too. "
        "Every theorem, lemma and figure of the five papers, with the row that checks it "
        "or why none does: [reproduction-coverage.md](reproduction-coverage.md).",
        "",
        "The live columns check the same claim on the live service (`timebound.net`) over "
        "loopback UDP, on the same seeds: each live job runs `python -m timebound.net.live "
        "KIND --seed N` in a process of its own, after the simulated jobs and one at a "
        "time; its `where` says what ran and what would make it differ. Live timing is "
        "this machine's: a loaded machine wakes event loops late. `not run live`: the row "
        "has no live check.",
        "",
        "Jobs (label: scenario and its `--set` overrides; one run per seed):",
        "",
    ]
    seen = set()
    for label, scenario, params in spec:
        shown = " ".join(f"--set {k}={v}" for k, v in params.items()) or "(defaults)"
        if label == "slotted":
            shown = shown.replace(f"--set schemes={params['schemes']}", "--set schemes=X")
            shown += " (one job per scheme X in a-e)"
            if label in seen:
                continue
        seen.add(label)
        lines.append(f"- `{label}`: {scenario} {shown}")
    for label, kind in LIVE_JOBS.items():
        lines.append(f"- `{label}` (live): python -m timebound.net.live {kind}"
                     f"{' --quick' if quick else ''}")
    lines += [
        "",
        "Slotted runs use the paper's transport (`transport=paper`: T_tra = alpha T_to + "
        "T_ntw, resent only on loss); the scenario's default `race` transport resends on "
        "every timeout and keeps the first copy, which cuts the delay tail and with it the "
        "FR delay (about 40 ms instead of 70-80 ms).",
        "",
        f"Wall time of this generation: {seconds:.0f} s"
        f"{' (Spark)' if spark else ''}.",
        "",
        "| paper | claim | published | measured (min-max over seeds) | scenario / run | "
        "verdict | live: measured | live: service / run | live: verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        cells = (row.paper, row.claim, row.published, row.measured, row.where, row.verdict,
                 row.live_measured, row.live_where or "-", row.live_verdict)
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def write_reproduction(target: str,
                       progress: Callable[[str, int, int], None] | None = None, *,
                       quick: bool = False, spark: bool = False, master: str | None = None,
                       conf: dict[str, str] | None = None, workers: int = 2,
                       seeds: Sequence[int] = SEEDS) -> list[Row]:
    check_target(target)
    started = time.perf_counter()
    jobs = plan(quick, seeds)
    if spark:
        from timebound.sim._spark import map_tasks

        results = map_tasks(run_job, jobs, [j.name for j in jobs], master=master,
                            conf=conf or {}, progress=progress)
    else:
        results = run_local(jobs, workers, progress)
    # the live checks after the simulated jobs, one at a time, here: their timing is
    # the machine's, so nothing of ours runs beside them
    live = live_plan(quick, seeds)
    for index, job in enumerate(live):
        if progress:
            progress(job.name, index, len(live))
        results.append(run_live(job))
    jobs = [*jobs, *live]
    rows = rows_of(jobs, results, seeds, root=root_of(target))
    text = table(rows, quick=quick, seeds=seeds, seconds=time.perf_counter() - started,
                 spark=spark)
    tmp = target + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise UsageError("--reproduce", f"cannot write '{target}': {exc.strerror}") from None
    return rows
