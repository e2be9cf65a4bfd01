"""Simulator benchmark: engine events/s on one core; a 1,000,000-message scmp run.

    .venv/bin/python benchmarks/bench_sim.py [--messages N] [--repeats R]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time

from timebound.sim import Engine, run_scenario


def engine_events(n: int) -> float:
    engine = Engine()
    left = [n]

    def tick(_: object) -> None:
        left[0] -= 1
        if left[0] > 0:
            engine.schedule(1 + (left[0] * 7919) % 97, tick, None)

    for i in range(1000):
        engine.at(i, tick, None)
    start = time.perf_counter()
    engine.run()
    return engine.events / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, runs in seconds")
    args = parser.parse_args()
    events = 1_000_000
    if args.smoke:
        args.messages, args.repeats, events = 2_000, 1, 20_000
    rates = [engine_events(events) for _ in range(args.repeats)]
    print(f"engine: median {statistics.median(rates):,.0f} events/s "
          f"({args.repeats} repeats of {events:,} events)")
    clients = 1000
    calls = args.messages // clients
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = run_scenario("scmp", f"{tmp}/ds", seed=1, params={
            "experiments": "once" if calls == 1 else "sweep", "clients": str(clients),
            "calls": str(calls), "rhos": "1000000"})
        elapsed = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"scmp: {clients * calls:,} messages, {result['tables']['messages']:,} rows in "
          f"{elapsed:.1f} s ({result['tables']['messages'] / elapsed:,.0f} rows/s); "
          f"peak RSS {peak_mb:.0f} MB")


if __name__ == "__main__":
    main()
