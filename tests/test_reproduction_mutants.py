"""Every row of docs/reproduction.md can fail: a one-line break of the rule it checks
flips it to ``differs``.

Each case names a row (by the start of its claim text), a named mutant of a core
(``ROW_MUTANTS`` in scripts/mutate.py: one exact line of ``src/timebound/core``
replaced) and the reproduction jobs the row reads. The mutant is applied to a copy of
``src`` (never to the tree; compiled modules removed, ``TIMEBOUND_PURE_PYTHON=1``),
the row's jobs run on that copy through the reproduction's own job runner
(``timebound.sim._reproduce.run_job``) on one seed at the demo's scale or smaller, and
the row's verdict comes from ``timebound.claims.evaluate``, the code that writes the
table. The unmutated copy, on the same jobs, must give ``agrees``.

Rows no mutant here flips say why in the table and in docs/reproduction-coverage.md
(``UNFLIPPED``). Jobs run as subprocesses, two at a time.
"""

from __future__ import annotations

import compileall
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from timebound.claims import CLAIMS, evaluate

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SEED = 1


def _load_mutate() -> Any:
    spec = importlib.util.spec_from_file_location("timebound_mutate", ROOT / "scripts" / "mutate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("timebound_mutate", module)
    spec.loader.exec_module(module)
    return module


MUTATE = _load_mutate()
ROW_MUTANTS: Mapping[str, tuple[str, str, str]] = MUTATE.ROW_MUTANTS

_SLOTTED = {"transport": "paper", "duration": "12000000", "slots": "20000,40000,100000"}
#: label -> [(scenario, --set overrides)]: the reproduction's jobs, small (``source:part``
#: is part of the job ``source``: one slotted scheme, the scmp crash runs)
JOBS: dict[str, list[tuple[str, dict[str, str]]]] = {
    "scmp": [("scmp", {"calls": "3", "clients": "300", "many_calls": "200",
                       "rhos": "50000,200000,800000,3200000"})],
    "scmp:crash": [("scmp", {"experiments": "crash", "calls": "10"})],
    "scmp-reorder": [("scmp", {"experiments": "reorder", "reorder_calls": "60"})],
    "scmp-restart": [("scmp", {"experiments": "restart", "restart_calls": "150"})],
    "adaptive": [("adaptive", {"messages": "3000"})],
    "adaptive-horizon": [("adaptive", {
        "loads": "spikes", "estimators": "limited", "spike": "100000",
        "bounded_values": "10000", "spike_p": "0.2", "window": "200", "spikes": "65",
        "p": "2", "messages": "12000"})],
    "adaptive-reorder": [("adaptive", {"clients": "10", "loads": "bounded",
                                       "estimators": "unlimited,limited",
                                       "messages": "4000", "duplicate": "0.05"})],
    "adaptive-step": [("adaptive", {"loads": "step,step-slow,step-up",
                                    "estimators": "unlimited,limited", "messages": "2000",
                                    "step_at": "1000000"})],
    **{f"slotted:{x}": [("slotted", {"schemes": x, **_SLOTTED})] for x in "abcde"},
    "stability": [("stability", {"sizes": "2,4", "duration": "200000"})],
    "stability-acks": [("stability", {"modes": "sweep", "sizes": "16,32",
                                      "variants": "timestamp,vector", "uneven": "1",
                                      "duration": "50000"})],
    "merge": [("merge", {"duration": "5000"})],
    "merge-checks": [("merge-checks", {"duration": "4000"})],
}

#: (row: the start of its claim text, mutant: a key of ROW_MUTANTS, jobs: JOBS labels)
CASES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("no duplicate accepted, whatever rho", "amo-accept-equal-ts", ("scmp",)),
    ("rho >= eps + delta + RT(N)", "gc-fixed-horizon", ("scmp",)),
    ("table size grows with rho", "gc-fixed-horizon", ("scmp",)),
    ("a slow client clock", "amo-no-early-refusal", ("scmp",)),
    ("a fast server clock", "amo-no-early-refusal", ("scmp",)),
    ("after a crash, all messages sent after", "amo-no-recovery-grace", ("scmp:crash",)),
    ("with incarnation marks", "amo-marks-ignored", ("scmp-restart",)),
    ("no duplicate and no out-of-order message", "amo-accept-equal-ts",
     ("adaptive", "adaptive-reorder")),
    ("(t, X)-bounded: after some time", "est-never-decreases", ("adaptive-step",)),
    ("limited horizon: L/A tends to 1/p", "est-chases-spikes", ("adaptive", "adaptive-horizon")),
    ("unlimited horizon: L/A -> 0", "est-raise-late", ("adaptive", "adaptive-step")),
    ("no bound on the time to converge", "est-never-decreases", ("adaptive-step",)),
    ("fixed rho: too small loses", "amo-no-stale-refusal", ("adaptive",)),
    ("limited horizon: L/A tends to 1/p", "est-every-lifetime-a-spike",
     ("adaptive", "adaptive-horizon")),
    ("FR delivery delay of (a), (d)", "slot-fr-skips-r", ("slotted:a", "slotted:d")),
    ("schemes (b), (c) cut the FR delivery delay", "slot-fr-waits-f-gaps",
     ("slotted:a", "slotted:b", "slotted:c", "slotted:d")),
    ("in-slot delay", "slot-next-slot-taken", ("slotted:b", "slotted:c", "slotted:d")),
    ("slots > 20 ms: queue of (b)", "slot-next-slot-taken", ("slotted:a", "slotted:b")),
    ("slotted FIFO delivery", "slot-fr-skips-r", ("slotted:d",)),
    ("slotted FIFO delivery", "slot-f-reversed", ("slotted:c",)),
    ("Fig. 2, vector acks", "stab-release-strict", ("stability",)),
    ("Fig. 2, timestamp acks", "stab-release-strict", ("stability",)),
    ("t1,s <= t2,s", "stab-ack-max", ("stability",)),
    ("ack bandwidth", "ack-vector-one-entry", ("stability",)),
    ("timestamp latency only slightly", "stab-ack-max", ("stability",)),
    ("logical clocks increase", "stab-lamport-physical", ("stability",)),
    ("clock skew increases", "stab-ack-max", ("stability",)),
    ("a message stable at its sender", "stab-ack-max", ("stability",)),
    ("replicated mergers deliver", "merge-ties-by-arrival", ("merge",)),
    ("causal delivery", "merge-deadline-ignores-c", ("merge-checks",)),
    ("every message that reaches a merger", "merge-deadline-eps-early", ("merge-checks",)),
    ("every message that reaches a merger", "merge-deadline-r-plus-c", ("merge-checks",)),
    ("buffering <= delta + 3 eps", "merge-deadline-delta-twice", ("merge",)),
    ("larger delta, fewer late losses", "merge-wait-ignores-delta", ("merge",)),
    ("bounded timestamp vs vector", "causal-kn-n-bits", ("merge-checks",)),
    ("state corrupted mid-run", "merge-ties-by-arrival", ("merge-checks",)),
    ("a per-connection reorder window", "amo-no-reorder-window", ("scmp-reorder",)),
)

#: rows no mutant flips here, and why (docs/reproduction-coverage.md says so too)
UNFLIPPED: dict[str, str] = {
    "at-most-once RPC costs little": "a benchmark of the built service "
    "(benchmarks/rpc_bench.md), not a simulated job; it reads differs already",
    "one call from each of many clients": "a benchmark of the built service "
    "(benchmarks/rpc_bench.md), not a simulated job; no one-line break of a rule makes "
    "a call cost more",
    "up to 40 ms, (c)'s queue": "differs already on the committed table",
    "discards always below 10%": "differs already on the committed table",
    "buffer grows linearly with the stability latency": "Little's law holds for any ack "
    "rule: no break of the protocol moves it",
    "runs with different seeds within 4%": "a spread of the simulator's runs across seeds, "
    "not a rule of the core; judged on two seeds or more (this test runs one)",
}


def base_copy(tmp: Path) -> Path:
    """A copy of ``src`` under ``tmp`` without compiled modules, its bytecode written
    (once for every mutant: ``_copy`` links its files)."""
    src = tmp / "src"
    shutil.copytree(ROOT / "src", src,
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.egg-info"))
    assert compileall.compile_dir(src, quiet=1, workers=1)
    return src


def _link(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system
        shutil.copy2(source, target)


def _copy(tmp: Path, base: Path, mutant: str | None) -> Path:
    """``base`` (``base_copy``) as hard links under ``tmp``, with ``mutant`` applied to
    a file of its own (never to ``base``), that file's bytecode left out."""
    src = tmp / "src"
    shutil.copytree(base, src, copy_function=_link)
    if mutant is not None:
        rel, original, replacement = ROW_MUTANTS[mutant]
        path = src / "timebound" / "core" / rel
        lines = path.read_text(encoding="utf-8").split("\n")
        hits = [i for i, line in enumerate(lines) if line == original]
        assert len(hits) == 1, f"mutant {mutant}: {len(hits)} matches of {original!r}"
        lines[hits[0]] = replacement
        path.unlink()  # a link to base's file: written anew, not through the link
        path.write_text("\n".join(lines), encoding="utf-8")
        for compiled in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
            compiled.unlink()
    return src


_RUNNER = """
import json, sys
from timebound.sim._reproduce import Job, run_job
jobs, seed = json.loads(sys.argv[1]), int(sys.argv[2])
out = {}
for label, scenario, params in jobs:
    runs = run_job(Job(label.split(":")[0], scenario, tuple(sorted(params.items())), seed))
    out.setdefault(label, {}).update(runs)
print(json.dumps(out))
"""


def run_jobs(base: Path, mutant: str | None, labels: Sequence[str], seed: int = SEED
             ) -> dict[str, Any]:
    """The runs of ``labels``' jobs (label -> runs), run on a copy of ``base`` (a
    ``base_copy``) with ``mutant`` applied (None: unmutated)."""
    jobs = [(label, scenario, params)
            for label in labels for scenario, params in JOBS[label]]
    tmp = Path(tempfile.mkdtemp(prefix="timebound-rowmutant-"))
    try:
        src = _copy(tmp, base, mutant)
        env = dict(os.environ, PYTHONPATH=str(src), TIMEBOUND_PURE_PYTHON="1",
                   PYTHONDONTWRITEBYTECODE="1")
        done = subprocess.run([sys.executable, "-c", _RUNNER, json.dumps(jobs), str(seed)],
                              env=env, capture_output=True, text=True, timeout=300,
                              cwd=tmp, check=False)
        assert done.returncode == 0, f"{mutant}: {done.stderr[-2000:]}"
        out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def sources(per_label: Mapping[str, Any], labels: Sequence[str]) -> dict[str, Any]:
    """The reproduction's sources (job label -> runs) of ``labels``' runs: the parts of
    a job (``source:part``) merged under its label."""
    out: dict[str, dict[str, Any]] = {}
    for label in labels:
        out.setdefault(label.split(":")[0], {}).update(per_label[label])
    return out


def verdict(sources: Mapping[str, Any], row: str) -> tuple[str, str]:
    """The verdict and measured text of the row whose claim starts with ``row``."""
    [found] = [r for r in evaluate([sources]) if r.claim.startswith(row)]
    return found.verdict, found.measured


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[dict[str, dict[str, Any]]]:
    """The runs per job label unmutated (key ``""``) and per mutant (over its rows'
    jobs)."""
    copied = base_copy(tmp_path_factory.mktemp("rowmutants"))
    base_labels = sorted({label for _, _, labels in CASES for label in labels})
    per_mutant: dict[str, list[str]] = {}
    for _, mutant, labels in CASES:
        per_mutant.setdefault(mutant, [])
        per_mutant[mutant] += [x for x in labels if x not in per_mutant[mutant]]
    slotted = [label for label in base_labels if label.startswith("slotted")]
    others = [label for label in base_labels if label not in slotted]
    with ThreadPoolExecutor(2) as pool:
        base = [pool.submit(run_jobs, copied, None, group) for group in (slotted, others)]
        mut = {m: pool.submit(run_jobs, copied, m, labels) for m, labels in per_mutant.items()}
        yield {"": {k: v for f in base for k, v in f.result().items()},
               **{m: f.result() for m, f in mut.items()}}


@pytest.mark.parametrize(("row", "mutant", "labels"), CASES,
                         ids=[f"{m}-{r[:30]}" for r, m, _ in CASES])
def test_row_flips_under_its_mutant(results: dict[str, dict[str, Any]], row: str,
                                    mutant: str, labels: tuple[str, ...]) -> None:
    got, measured = verdict(sources(results[""], labels), row)
    assert got == "agrees", f"unmutated: {got} ({measured})"
    got, measured = verdict(sources(results[mutant], labels), row)
    assert got.startswith("differs"), f"{mutant}: {got} ({measured})"


def test_every_row_has_a_mutant_or_says_why_not() -> None:
    flipped = {row for row, _, _ in CASES}
    for claim in CLAIMS:
        if claim.kind != "measured":
            continue
        has = any(claim.claim.startswith(row) for row in flipped)
        why = [w for row, w in UNFLIPPED.items() if claim.claim.startswith(row)]
        assert has or why, f"no mutant flips {claim.claim!r}, and no reason is given"
