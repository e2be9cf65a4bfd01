"""Run only the live jobs of the reproduction table and print each live row's verdict.

``python scripts/live_verdicts.py [--seeds 1,2,3] [--quick] [--json FILE]`` runs every
live job (``timebound.claims.LIVE_JOBS``) once per seed, one at a time, as
``timebound simulate --reproduce`` runs them, and evaluates the rows with the table's
own code (``timebound.claims.evaluate``); it prints, per row with a live check, the
live verdict, the verdict the check alone gives on the same runs (their lateness
left out, so ``machine_late`` does not apply) and the lateness of the jobs' own
timers. ``--json`` writes the runs and both verdicts; ``--runs FILE`` evaluates the
runs of such a file again instead of running the jobs. The simulated columns are not
run (their verdicts read "not measured here"). For comparing live verdicts on one
machine in different states (quiet, loaded) without regenerating docs/reproduction.md.
"""

from __future__ import annotations

import argparse
import json
import time

from timebound.claims import LIVE_JOBS, evaluate
from timebound.sim._reproduce import SEEDS, live_plan, parse_seeds, run_live


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", help="also write the runs and verdicts to this file")
    parser.add_argument("--runs", help="evaluate the runs of a --json file, run nothing")
    args = parser.parse_args()
    seeds = parse_seeds(args.seeds)
    started = time.perf_counter()
    per_seed: dict[int, dict[str, dict[str, dict[str, float]]]] = {s: {} for s in seeds}
    if args.runs:
        with open(args.runs, encoding="utf-8") as handle:
            per_seed = {int(k): v for k, v in json.load(handle)["runs"].items()}
    else:
        for job in live_plan(args.quick, seeds):
            per_seed[job.seed][job.label] = run_live(job)
    rows = [r for r in evaluate([per_seed[s] for s in seeds])
            if not r.live_verdict.startswith("not run live")]
    bare = [{label: {k: v for k, v in runs.items() if k != "loop lateness"}
             for label, runs in per_seed[s].items()} for s in seeds]
    checks = {r.claim: r.live_verdict for r in evaluate(bare)}
    for label in LIVE_JOBS:
        late = [per_seed[s][label]["loop lateness"] for s in seeds]
        print(f"{label}: timer late p99 ms " + ", ".join(
            f"{x['lateness_p99_ms']:.1f}" for x in late) + "; max ms " + ", ".join(
            f"{x['lateness_max_ms']:.1f}" for x in late))
    for row in rows:
        print(f"- {row.claim[:60]}: {row.live_verdict[:110]}\n    check alone: "
              f"{checks[row.claim][:110]}")
    print(f"{time.perf_counter() - started:.0f} s")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"runs": per_seed, "verdicts": {r.claim: r.live_verdict for r in rows},
                       "checks": checks}, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
