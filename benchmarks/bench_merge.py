"""Causal deterministic merger: per-message cost (receive + delivery) against epsilon
and the number of publishers n.

    .venv/bin/python benchmarks/bench_merge.py

A stream of MESSAGES messages from n publishers, one per tick of real time, stamped
with <r, c, kn> by CausalProcess, arriving at one merger within delta; the merger is
driven as the replay does (handle_timer(now=now - 1), receive, flush at the end). Median
of REPEATS runs in microseconds per message, plus the largest buffer and the longest
buffering time seen (Lemma 4.2 bounds the latter by delta + 3*epsilon).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from timebound.core.causal import CausalProcess
from timebound.core.merge import Envelope, Merger

REPEATS = 5
MESSAGES = 20_000
DELTA = 10


def _arrivals(n: int, epsilon: int) -> list[tuple[int, Envelope]]:
    rng = random.Random(2)
    procs = [CausalProcess(epsilon, n) for _ in range(n)]
    offsets = [rng.randint(0, epsilon) for _ in range(n)]
    last = [0] * n
    out = []
    for tick in range(1, MESSAGES + 1):
        j = rng.randrange(n)
        rt = max(tick + offsets[j], last[j] + 1)
        last[j] = rt
        stamp = procs[j].send(now=rt)
        out.append((rt + rng.randint(-epsilon, DELTA), Envelope(f"p{j}", f"m{tick}", stamp)))
    out.sort(key=lambda item: item[0])
    return out


def per_message_us(n: int, epsilon: int) -> tuple[float, int, int]:
    arrivals = _arrivals(n, epsilon)
    runs = []
    for _ in range(REPEATS):
        merger = Merger(epsilon, DELTA)
        start = time.perf_counter()
        now = None
        for at, env in arrivals:
            if now is None or at > now:
                merger.handle_timer(now=at - 1)
                now = at
            merger.receive(env, now=at)
        merger.flush()
        runs.append((time.perf_counter() - start) / MESSAGES * 1e6)
    stats = merger.statistics()
    assert stats.late == 0 and stats.max_buffering <= DELTA + 3 * epsilon
    return statistics.median(runs), stats.max_buffered, stats.max_buffering


def main() -> None:
    global REPEATS, MESSAGES
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, runs in seconds")
    if parser.parse_args().smoke:
        REPEATS, MESSAGES = 1, 300
    print(f"merger cost, median of {REPEATS} x {MESSAGES} messages, delta = {DELTA}")
    print(f"{'epsilon':>8} {'n':>6} {'us/msg':>7} {'max buffer':>11} {'max wait':>9}")
    for epsilon in (1, 4, 16, 64):
        for n in (10, 1000):
            cost, buf, wait = per_message_us(n, epsilon)
            print(f"{epsilon:>8} {n:>6} {cost:>7.2f} {buf:>11} {wait:>9}")


if __name__ == "__main__":
    main()
