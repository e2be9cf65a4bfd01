"""Per-message cost of the at-most-once receiver, and replay throughput.

Side by side in one run: a bare dict connection-table check (the floor any receiver
pays in Python), then ``Receiver.receive`` with each estimator, plain and resilient,
then ``timebound replay atmostonce`` end to end: JSON Lines (row path) and Parquet,
the row path and the record-batch path alternating in one run (each line names the
path that ran). ``--replay-only`` skips the receiver micro-benchmarks.

    .venv/bin/python benchmarks/bench_atmostonce.py [--messages N] [--repeats R]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time

import pyarrow as pa
import pyarrow.parquet as pq

import timebound.replay as replay_module
from timebound.cli import main as cli_main
from timebound.core.atmostonce import (
    Fixed,
    LimitedHorizon,
    MemoryStorage,
    Receiver,
    StableLatest,
    UnlimitedHorizon,
)
from timebound.replay import _batch


def workload(n: int, conns: int, seed: int = 1) -> list[tuple[str, int, int]]:
    rng = random.Random(seed)
    names = [f"c{i}" for i in range(conns)]
    last = dict.fromkeys(names, 0)
    out = []
    now = 0
    for _ in range(n):
        now += rng.randint(0, 2)
        conn = rng.choice(names)
        if rng.random() < 0.1:
            ts = last[conn] or 1  # a duplicate
        else:
            ts = max(last[conn] + 1, now - rng.randint(1, 200))
            last[conn] = ts
        out.append((conn, ts, now))
    return out


def time_per_message(make, messages, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        receive = make()
        start = time.perf_counter()
        for conn, ts, now in messages:
            receive(conn, ts, now=now)
        samples.append((time.perf_counter() - start) / len(messages))
    return statistics.median(samples) * 1e6


def bare_table():
    table: dict[str, int] = {}
    upper = 0

    def check(conn: str, ts: int, *, now: int) -> bool:
        last = table.get(conn)
        if last is not None:
            if ts <= last:
                return False
        elif ts <= upper:
            return False
        table[conn] = ts
        return True

    return check


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--conns", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, runs in seconds")
    parser.add_argument("--replay-only", action="store_true",
                        help="only the end-to-end replay rates")
    args = parser.parse_args()
    if args.smoke:
        args.messages, args.conns, args.repeats = 2_000, 100, 1
    messages = workload(args.messages, args.conns)
    cases = {
        "bare dict check (floor)": bare_table,
        "Receiver fixed": lambda: Receiver(Fixed(256), gc_every=100).receive,
        "Receiver unlimited": lambda: Receiver(UnlimitedHorizon(), gc_every=100).receive,
        "Receiver limited S=1000 H=10": lambda: Receiver(LimitedHorizon(1000, 10, 4)).receive,
        "Receiver unlimited resilient": lambda: Receiver(
            UnlimitedHorizon(), gc_every=100,
            resilience=StableLatest(MemoryStorage(), 10**9, 1000)).receive,
    }
    print(f"{args.messages} messages over {args.conns} connections, median of {args.repeats}")
    floor = None
    for name, make in cases.items():
        if args.replay_only:
            break
        us = time_per_message(make, messages, args.repeats)
        floor = floor or us
        print(f"  {name:<32} {us:6.3f} us/message  ({us / floor:4.2f}x floor)")

    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "trace.jsonl")
        with open(src, "w") as handle:
            for conn, ts, now in messages:
                handle.write(json.dumps({"type": "msg", "receiver": "s1", "conn": conn, "ts": ts, "at": now}) + "\n")
        psrc = os.path.join(tmp, "trace.parquet")
        pq.write_table(pa.Table.from_pylist(
            [{"type": "msg", "receiver": "s1", "conn": c, "ts": t, "at": n} for c, t, n in messages]), psrc)
        # Both paths alternate in one run (median of each); JSON Lines always take the
        # row path, at-most-once Parquet -> Parquet the record-batch path by default.
        cases = (("jsonl -> jsonl", src, "o.jsonl", True),
                 ("parquet -> parquet", psrc, "o.parquet", False),
                 ("parquet -> parquet", psrc, "o.parquet", True))
        samples: dict[int, list[float]] = {i: [] for i in range(len(cases))}
        for _ in range(max(1, args.repeats // 2)):
            for i, (_label, inp, out, fast) in enumerate(cases):
                start = time.perf_counter()
                code = replay(["replay", "atmostonce", "-i", inp, "-o", os.path.join(tmp, out),
                               "--estimator", "unlimited", "--gc-every", "100"], fast)
                samples[i].append(time.perf_counter() - start)
                assert code == 0
        rates = {}
        print(f"  replay: median of {len(samples[0])} runs each, the three cases alternating")
        for i, (label, inp, _out, fast) in enumerate(cases):
            path = _batch.path_batch() if fast and inp == psrc else _batch.PATH_ROW
            rates[i] = len(messages) / statistics.median(samples[i])
            print(f"  replay {label:<26} {rates[i]:10,.0f} rows/s  path: {path}")
        print(f"  parquet -> parquet, batch / row path: {rates[2] / rates[1]:.1f}x")


def replay(argv: list[str], fast: bool) -> int:
    """``timebound replay`` as a user runs it; ``fast=False`` forces the row path."""
    if fast:
        return cli_main(argv)
    original = replay_module.replay_rows
    replay_module.replay_rows = lambda command, args: original(command, args, fast=False)
    try:
        return cli_main(argv)
    finally:
        replay_module.replay_rows = original

if __name__ == "__main__":
    main()
