"""Slotted-FIFO receiver cost per arrival (median of repeats).

Run: .venv/bin/python benchmarks/bench_slotted.py
Traces: N messages, one FR every SLOT messages, the rest R/F/N in equal shares, 5% of
unreliable messages lost, arrivals reordered within a window (each message displaced
by up to WINDOW positions), so FRs overtake and the resequencing buffer is exercised.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from timebound.core.slotted import Kind, SlottedReceiver, SlottedSender

N = 200_000
REPEATS = 5


def trace(slot: int, window: int, seed: int = 1) -> list[tuple[int, object]]:
    rng = random.Random(seed)
    sender = SlottedSender()
    msgs = []
    for i in range(N):
        kind = Kind.FR if i % slot == slot - 1 else rng.choice([Kind.R, Kind.F, Kind.N])
        stamp = sender.send(kind)
        if kind.reliable or rng.random() >= 0.05:
            msgs.append((i + rng.uniform(0, window), i, stamp))
    msgs.sort(key=lambda m: m[0])
    return [(i, stamp) for _, i, stamp in msgs]


def bench(slot: int, window: int) -> None:
    arrivals = trace(slot, window)
    times = []
    for _ in range(REPEATS):
        receiver: SlottedReceiver[int] = SlottedReceiver()
        start = time.perf_counter()
        for now, (i, stamp) in enumerate(arrivals):
            receiver.receive(i, stamp, now=now)
        times.append(time.perf_counter() - start)
    stats = receiver.statistics()
    per = statistics.median(times) / len(arrivals) * 1e9
    print(f"slot={slot:>4} window={window:>4}  {per:8.0f} ns/arrival  "
          f"max buffered={stats.max_buffered:>5}  mean buffered="
          f"{stats.buffer_area / max(stats.now, 1):7.1f}  discards={stats.discarded}")


def main() -> None:
    global REPEATS, N
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, runs in seconds")
    if parser.parse_args().smoke:
        REPEATS, N = 1, 2_000
    print(f"{N} messages per trace, median of {REPEATS} runs")
    for slot in (4, 32, 256):
        for window in (1, 16, 256):
            bench(slot, window)


if __name__ == "__main__":
    main()
