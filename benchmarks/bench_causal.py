"""Causal timestamps: per-event cost against epsilon and n, and the size of the bounded
wire form against a vector clock as n grows from 10 to 10,000 processes.

    .venv/bin/python benchmarks/bench_causal.py

Cost: a fixed random schedule of local/send/recv events over n processes (clocks
within epsilon), timed with perf_counter, median of REPEATS runs, in microseconds per
event. Size: WireCodec.size (brt, c and 2*epsilon counters of bits(n) bits each,
B = 6*epsilon + delta + 1) against a vector clock of n 32-bit counters.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from timebound.core.causal import CausalProcess, RCProcess, WireCodec

REPEATS = 5
EVENTS = 20_000
DELTA = 10


def _schedule(n: int, epsilon: int, seed: int = 1) -> list[tuple[int, int, int]]:
    """(kind 0 local / 1 send / 2 recv, process, rt); recv takes the last send."""
    rng = random.Random(seed)
    rts = [rng.randint(0, epsilon) for _ in range(n)]
    out = []
    for _ in range(EVENTS):
        j = rng.randrange(n)
        rts[j] += 1
        base = max(rts) - epsilon
        rts[j] = max(rts[j], base)
        out.append((rng.choice((0, 1, 1, 2, 2)), j, rts[j]))
    return out


def per_event_us(n: int, epsilon: int, variant: str) -> float:
    sched = _schedule(n, epsilon)
    runs = []
    for _ in range(REPEATS):
        procs = ([CausalProcess(epsilon, n) for _ in range(n)] if variant == "rckn"
                 else [RCProcess(epsilon) for _ in range(n)])
        last = procs[0].timestamp
        start = time.perf_counter()
        for kind, j, rt in sched:
            p = procs[j]
            if kind == 2:
                p.receive(last, now=rt)  # type: ignore[arg-type]
            elif kind == 1:
                last = p.send(now=rt)
            else:
                p.local(rt)
        runs.append((time.perf_counter() - start) / EVENTS * 1e6)
    return statistics.median(runs)


def main() -> None:
    global REPEATS, EVENTS
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, runs in seconds")
    if parser.parse_args().smoke:
        REPEATS, EVENTS = 1, 300
    print(f"per-event cost, median of {REPEATS} x {EVENTS} events (microseconds)")
    print(f"{'variant':>8} {'epsilon':>8} {'n':>6} {'us/event':>9}")
    for variant in ("rckn", "rc"):
        for epsilon in (1, 4, 16, 64):
            for n in (10, 1000):
                print(f"{variant:>8} {epsilon:>8} {n:>6} {per_event_us(n, epsilon, variant):>9.2f}")
    print()
    print(f"timestamp size in bytes (delta = {DELTA}) vs vector clock (4 bytes/entry)")
    print(f"{'n':>6} {'eps=1':>6} {'eps=4':>6} {'eps=16':>7} {'vector':>7}")
    for n in (10, 100, 1000, 10_000):
        sizes = [WireCodec(e, DELTA, n).size for e in (1, 4, 16)]
        print(f"{n:>6} {sizes[0]:>6} {sizes[1]:>6} {sizes[2]:>7} {4 * n:>7}")


if __name__ == "__main__":
    main()
