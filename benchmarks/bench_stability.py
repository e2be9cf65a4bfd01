"""Stability: ack bytes and computation per ack, timestamp vs vector acks, for 4 to
1,000 senders (median of repeats).

Run: .venv/bin/python benchmarks/bench_stability.py
Setup: N senders, 8 receivers (static groups). Each round every sender sends one
message, every receiver receives them all and acks, and one sender receives every ack.
Measured separately: the receiver making an ack (min over its timestamp vector, or a
copy of it) and the sender processing it (ack vector update, min, buffer release).
"""

from __future__ import annotations

import argparse
import statistics
import time

from timebound.core.stability import AckMode, StabilityNode

RECEIVERS = 8
ROUNDS = 50
REPEATS = 5


def bench(n_senders: int, mode: AckMode) -> tuple[float, float, float]:
    senders = [f"s{i}" for i in range(n_senders)]
    receivers = [f"r{i}" for i in range(RECEIVERS)]
    make, take = [], []
    ack_bytes = 0.0
    for _ in range(REPEATS):
        snodes = {s: StabilityNode(s, receivers=receivers, acks=mode) for s in senders}
        rnodes = [StabilityNode(r, senders=senders, acks=mode) for r in receivers]
        now = 0
        t_make = t_take = 0.0
        acks = 0
        for _ in range(ROUNDS):
            now += 1
            for s in senders:
                ts = snodes[s].send(now=now).ts
                for r in rnodes:
                    r.receive(s, ts, now=now)
            now += 1
            for r in rnodes:
                start = time.perf_counter()
                acked = r.make_ack(now=now)
                mid = time.perf_counter()
                snodes[senders[0]].receive_ack(acked.ack, now=now)
                t_take += time.perf_counter() - mid
                t_make += mid - start
                acks += 1
        make.append(t_make / acks)
        take.append(t_take / acks)
        stats = [r.receiver.statistics() for r in rnodes if r.receiver]
        ack_bytes = sum(s.ack_bytes for s in stats) / sum(s.acks_sent for s in stats)
    return ack_bytes, statistics.median(make) * 1e6, statistics.median(take) * 1e6


def main() -> None:
    global REPEATS, ROUNDS
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, runs in seconds")
    if parser.parse_args().smoke:
        REPEATS, ROUNDS = 1, 2
    print(f"{RECEIVERS} receivers, {ROUNDS} rounds, median of {REPEATS} runs")
    print(f"{'senders':>8} {'mode':>10} {'bytes/ack':>10} {'make us':>9} {'process us':>11}")
    for n in (4, 16, 64, 256, 1000):
        for mode in AckMode:
            nbytes, make, take = bench(n, mode)
            print(f"{n:>8} {mode.value:>10} {nbytes:>10.0f} {make:>9.2f} {take:>11.2f}")


if __name__ == "__main__":
    main()
