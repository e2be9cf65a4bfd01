"""Measure the times the README quotes, on a fresh clone of this repository.

Run: .venv/bin/python scripts/measure_times.py [--steps setup,demo,loaded,suite]
[--out benchmarks/times.json]

Each step runs in a fresh clone (``git clone`` of this checkout's HEAD into a
temporary folder, removed at the end), as a new user would, and is timed by the wall
clock:

- ``setup``: ``bash scripts/setup.sh`` (creates ``.venv``, installs every extra from
  the package registry, compiles the core, runs the demo: the README's first command);
- ``demo``: ``timebound demo`` again in that ``.venv`` (the main job alone);
- ``loaded``: the demo once more with two CPU-bound processes beside it, one per core
  of a 2-core machine (what a loaded machine does to the figures);
- ``suite``: ``bash scripts/test.sh`` with ``HYPOTHESIS_PROFILE=ci`` (the README's
  second command, as CI runs it).

The figures, the date, the machine's cores and the commit go to ``--out`` (JSON);
the README quotes them, and ``tests/test_readme_times.py`` holds the README's figures
to that file. Run it on a quiet machine: every step's time depends on what else runs.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STEPS = ("setup", "demo", "loaded", "suite")
#: Each step's bound (s): a step over it is stopped and reported as not measured.
TIMEOUT = 3600


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> float | None:
    """Wall seconds of ``cmd`` in ``cwd`` (its output to a log beside it), or None if
    it failed or ran over ``TIMEOUT``."""
    log = cwd.parent / f"{Path(cmd[-1]).name}-{int(time.time())}.log"
    began = time.monotonic()
    with log.open("w") as out:
        try:
            done = subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  timeout=TIMEOUT, check=False)
        except subprocess.TimeoutExpired:
            print(f"  {' '.join(cmd)}: over {TIMEOUT} s, stopped", flush=True)
            return None
    took = time.monotonic() - began
    if done.returncode != 0:
        print(f"  {' '.join(cmd)}: exit {done.returncode} after {took:.0f} s; its last "
              f"lines:\n{_tail(log)}", flush=True)
        return None
    return round(took, 1)


def _tail(log: Path, lines: int = 15) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def _burners(count: int) -> list[subprocess.Popen[bytes]]:
    """``count`` CPU-bound processes (a busy loop each), killed by the caller."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(count)]


def measure(steps: list[str]) -> dict[str, object]:
    figures: dict[str, object] = {
        "date": datetime.date.today().isoformat(), "cores": os.cpu_count(),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                 capture_output=True, text=True, check=True).stdout.strip(),
        "load_before": round(os.getloadavg()[0], 2),
    }
    with tempfile.TemporaryDirectory(prefix="timebound-times-") as tmp:
        clone = Path(tmp) / "timebound"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        timebound = str(clone / ".venv" / "bin" / "timebound")
        for step in steps:
            print(f"{step} ...", flush=True)
            if step == "setup":
                took = _run(["bash", "scripts/setup.sh"], clone)
            elif step == "demo":
                took = _run([timebound, "demo", "--out", str(Path(tmp) / "demo")], clone)
            elif step == "loaded":
                burners = _burners(2)
                try:
                    took = _run([timebound, "demo", "--out", str(Path(tmp) / "loaded")], clone)
                finally:
                    for proc in burners:
                        proc.kill()
                        proc.wait()
            else:
                took = _run(["bash", "scripts/test.sh", "-q", "-p", "no:cacheprovider"], clone,
                            env=dict(os.environ, HYPOTHESIS_PROFILE="ci"))
            figures[f"{step}_s"] = took
            print(f"{step}: {'not measured' if took is None else f'{took:.0f} s'}", flush=True)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", default=",".join(STEPS),
                        help=f"comma list of steps, in order (default: {','.join(STEPS)}; "
                             "every step but setup needs setup first)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "times.json",
                        help="the JSON file written (default: benchmarks/times.json)")
    args = parser.parse_args(argv)
    steps = [s for s in args.steps.split(",") if s]
    unknown = sorted(set(steps) - set(STEPS))
    if unknown or not steps:
        parser.error(f"--steps: unknown step(s) {unknown}; choose from {', '.join(STEPS)}")
    if steps[0] != "setup":
        parser.error("--steps: the first step must be setup (every step runs in a fresh "
                     "clone)")
    figures = measure(steps)
    args.out.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures))
    return 0 if all(figures.get(f"{s}_s") is not None for s in steps) else 1


if __name__ == "__main__":
    sys.exit(main())
