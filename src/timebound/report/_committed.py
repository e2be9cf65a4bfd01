"""How a report's runs differ from the committed table's (``docs/reproduction.md``).

The report's verdicts come from ``timebound.claims.evaluate``, the code that writes
the table, on the runs the report was built from; they equal the table's only where
those runs are the table's. This module says where they are not, in one short line
beside a section's verdicts: the seeds, each setting the table's job for the same
scenario sets (``--set k=v``; scale such as ``calls`` or ``duration``, and the
transport) with its value in these runs, and the table's other jobs whose rows these
runs cannot answer (another setting of the scenario, the merge checks, the live
services over loopback UDP).

The table is read back from its own header (``committed``): the line naming its seeds
("Every row is measured on seeds 1, 2, 3") and its list of jobs ("- `label`:
scenario --set k=v ..."), as ``timebound simulate --reproduce`` writes them. Settings
the table leaves at the scenario's defaults are not in that list, so they are not
compared (the line says so).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from timebound.claims import CLAIMS

#: the committed table, relative to the checkout
TABLE = os.path.join("docs", "reproduction.md")

_SEEDS = re.compile(r"Every row is measured on seeds ([0-9, ]+);")
_JOB = re.compile(r"^- `([^`]+)`( \(live\))?: (\S+)(.*)$")
_SET = re.compile(r"--set (\S+?)=(\S+)")


@dataclass(frozen=True)
class Job:
    """One job of the table: its label, the scenario it runs (for a live job, the
    command), its ``--set`` overrides, and whether it is a live job."""

    label: str
    scenario: str
    sets: Mapping[str, str]
    live: bool


@dataclass(frozen=True)
class Committed:
    """The committed table's seeds and jobs."""

    seeds: tuple[int, ...]
    jobs: tuple[Job, ...]


def committed(root: str) -> Committed | None:
    """The seeds and jobs of ``root``'s docs/reproduction.md; None without that file
    (an installed package) or without the header lines it reads."""
    try:
        with open(os.path.join(root, TABLE), encoding="utf-8") as handle:
            text = handle.read()
    except OSError:
        return None
    found = _SEEDS.search(text)
    jobs = []
    for line in text.splitlines():
        job = _JOB.match(line)
        if job:
            label, live, scenario, rest = job.groups()
            jobs.append(Job(label, scenario, dict(_SET.findall(rest)), bool(live)))
    if found is None or not jobs:
        return None
    seeds = tuple(int(s) for s in found.group(1).replace(" ", "").split(",") if s)
    return Committed(seeds, tuple(jobs))


def _same(here: str, there: str) -> bool:
    try:
        return float(here) == float(there)
    except ValueError:
        return here.replace(" ", "") == there.replace(" ", "")


def _settings(manifest: Mapping[str, Any]) -> tuple[dict[str, str], list[str]]:
    """The runs' settings as ``--set`` text (a sweep's swept keys: their grid values,
    comma-separated) and their seeds."""
    params = {k: str(v) for k, v in (manifest.get("params") or {}).items()}
    sweep = manifest.get("sweep") or {}
    for key, values in (sweep.get("grid") or {}).items():
        params[key] = ",".join(map(str, values))
    seeds = sweep.get("seeds") if sweep else [manifest.get("seed", "?")]
    return params, [str(s) for s in seeds or []]


def differences(table: Committed | None, scenario: str, manifest: Mapping[str, Any],
                claims: Sequence[str]) -> str:
    """One line: how the runs of ``manifest`` (scenario ``scenario``) differ from the
    committed table's runs of the rows ``claims`` (their claim texts)."""
    if table is None:
        return (f"No committed table ({TABLE}) to compare these runs with: the verdicts "
                "are those of these runs only.")
    params, seeds = _settings(manifest)
    live_jobs = {c.live.job for c in CLAIMS if c.live is not None and c.claim in claims}
    parts = []
    theirs = [str(s) for s in table.seeds]
    if seeds != theirs:
        parts.append(f"seed{'s' if len(seeds) > 1 else ''} {', '.join(seeds)} here "
                     f"(the table: seeds {', '.join(theirs)})")
    mine = next((j for j in table.jobs if j.label == scenario and not j.live), None)
    if mine is not None:
        for key, value in mine.sets.items():
            if value == "X":  # one table job per value (slotted: per scheme)
                continue
            here = params.get(key)
            if here is None or not _same(here, value):
                parts.append(f"{key}={here if here is not None else '(not set)'} here "
                             f"(the table: {value})")
    others = [j.label for j in table.jobs
              if (not j.live and j.label != scenario
                  and j.label.split("-")[0] == scenario) or j.label in live_jobs]
    if others:
        parts.append("the rows of the table's jobs " + ", ".join(others) + " are not "
                     "measured here (a report reads its datasets' runs under their "
                     "scenario's name only; a live job runs the service over loopback UDP)")
    if not parts:
        return ("These runs are the committed table's (seeds and the settings its job "
                "sets); its other settings are the scenario's defaults, not compared.")
    return ("These runs against the committed table (" + TABLE + "): "
            + "; ".join(parts) + ". Settings the table leaves at the scenario's defaults "
            "are not compared.")
