"""End to end: the whole ``timebound pipeline`` command against a plain PySpark job.

One messages dataset (``--rows`` rows, 4 receivers, ``--connections`` connections, the
trace of ``timebound bench pipeline``). Whole processes, timed from the outside,
alternating, median of R:
- ``timebound pipeline DS --out OUT --classes 8 --estimator fixed --rho 500
  --gc-every 100 --master local[2]`` (decision table + metrics table);
- a plain PySpark job on the same session settings: read the same Parquet,
  ``dropDuplicates(["receiver","conn","ts"])``, write Parquet.
The pipeline's own progress lines (seconds per protocol, metrics) are printed too.
With ``--stages`` the last pipeline run also writes a Spark event log (uncompressed,
in the temporary folder) and the script prints each stage it ran: seconds, tasks,
rows read from the input or a shuffle, shuffle rows written, and the line of our code
that launched its job, so extra scans and jobs show up by name.

    .venv/bin/python benchmarks/bench_end_to_end.py [--rows 1000000] [--connections 1000]
        [--repeats 3] [--stages] [--smoke]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from timebound.pipeline.bench import generate

PLAIN = """
import sys
from timebound.pipeline.session import build_session
spark = build_session(sys.argv[3])
spark.read.parquet(sys.argv[1]).dropDuplicates(["receiver", "conn", "ts"]) \\
    .write.parquet(sys.argv[2])
spark.stop()
"""


def run(argv: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return seconds, done.stderr


def stages(log_dir: str) -> list[str]:
    """One line per completed stage of the event log(s) in ``log_dir``: submitted at
    (seconds after the application started), seconds, tasks, rows, the job's call site."""
    jobs: dict[int, str] = {}
    lines = []
    start = 0  # the application's start (each stage line: when it was submitted)
    for path in sorted(glob.glob(os.path.join(log_dir, "**", "events_*"), recursive=True)):
        with open(path, encoding="utf-8") as handle:
            for raw in handle:
                event = json.loads(raw)
                if event["Event"] == "SparkListenerApplicationStart":
                    start = event["Timestamp"]
                elif event["Event"] == "SparkListenerJobStart":
                    site = event.get("Properties", {}).get("callSite.short", "")
                    for stage in event["Stage IDs"]:
                        jobs[stage] = f"job {event['Job ID']}: {site}"
                elif event["Event"] == "SparkListenerStageCompleted":
                    info = event["Stage Info"]
                    seconds = (info["Completion Time"] - info["Submission Time"]) / 1000
                    acc = {a["Name"]: a.get("Value", "") for a in info.get("Accumulables", [])}
                    read = acc.get("internal.metrics.input.recordsRead") or \
                        acc.get("internal.metrics.shuffle.read.recordsRead", "")
                    wrote = acc.get("internal.metrics.shuffle.write.recordsWritten", "")
                    at = (info["Submission Time"] - start) / 1000
                    lines.append(f"  +{at:6.2f} s stage {info['Stage ID']:>3} {seconds:6.2f} s "
                                 f"{info['Number of Tasks']:>3} tasks  rows in {read!s:>9}"
                                 f"  shuffled out {wrote!s:>9}  "
                                 f"{jobs.get(info['Stage ID'], '')[:70]}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--classes", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--stages", action="store_true",
                        help="print the stages of the last pipeline run (Spark event log)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, runs in seconds")
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.connections, args.repeats = 2_000, 100, 1
    timebound = [sys.executable, "-m", "timebound.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        ds = os.path.join(tmp, "ds")
        generate(ds, args.rows, args.connections)
        ours: list[float] = []
        plain: list[float] = []
        progress = ""
        for i in range(args.repeats):
            out = os.path.join(tmp, f"out{i}")
            log: list[str] = []
            if args.stages and i == args.repeats - 1:
                events = os.path.join(tmp, "events")
                os.mkdir(events)
                log = ["--conf", "spark.eventLog.enabled=true",
                       "--conf", "spark.eventLog.compress=false",
                       "--conf", f"spark.eventLog.dir=file://{events}"]
            seconds, progress = run([*timebound, "pipeline", ds, "--out", out,
                                     "--master", args.master, "--classes", str(args.classes),
                                     "--estimator", "fixed", "--rho", "500",
                                     "--gc-every", "100", *log])
            ours.append(seconds)
            shutil.rmtree(out)
            target = os.path.join(tmp, f"plain{i}")
            plain.append(run([sys.executable, "-c", PLAIN, os.path.join(ds, "messages"),
                              target, args.master])[0])
            shutil.rmtree(target)
        print(f"{args.rows:,} rows, {args.connections:,} connections, --classes "
              f"{args.classes}, {args.master}, whole processes, median of {args.repeats}")
        print("last pipeline progress:")
        for line in progress.splitlines():
            if line.startswith("pipeline"):
                print(f"  {line}")
        if args.stages:
            print("stages of the last pipeline run:")
            print("\n".join(stages(os.path.join(tmp, "events"))))
        o, p = statistics.median(ours), statistics.median(plain)
        print(f"timebound pipeline {o:6.1f} s; plain dropDuplicates job {p:6.1f} s; "
              f"speed ratio plain/ours {p / o:.2f}")


if __name__ == "__main__":
    main()
