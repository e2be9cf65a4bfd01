"""Slotted-FIFO channel against a pure reliable-FIFO channel on the same lossy link.

Run: .venv/bin/python benchmarks/bench_channel.py [--smoke] [--n N] [--loss P]

The slotted paper's comparison (section 6, Figs. 5-7): scheme (a) sends a stream of
N messages -- one FR every SLOT messages, the rest R, F, N in equal shares -- on a
slotted-FIFO channel; scheme (b) sends the same stream with every message FIFO and
reliable (FR: a plain reliable FIFO channel, TCP-like). Both run live on loopback
through the same FaultProxy (same loss, reordering, jitter, seed) at the same send
rate, in one run. Reported: FR end-to-end latency (send -> delivery, median and
p99), the receiver's delivery delay T_d of FR messages (arrival -> delivery, mean),
and the receiver's resequencing buffer (max and time-averaged occupancy), with the
ratios (b)/(a).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time

from timebound.core.slotted import Kind
from timebound.net import FaultProxy, Faults
from timebound.net._channel import Channel, ChannelListener

SLOT = 10


def workload(n: int, seed: int) -> list[Kind]:
    rng = random.Random(seed)
    return [Kind.FR if i % SLOT == SLOT - 1 else rng.choice([Kind.R, Kind.F, Kind.N])
            for i in range(n)]


async def run_scheme(kinds: list[Kind], faults: Faults, interval: float,
                     seed: int) -> dict[str, float]:
    sent_at: dict[int, float] = {}
    fr_latency: list[float] = []
    fr_delay: list[float] = []
    samples: list[int] = []
    async with ChannelListener() as listener:
        async with FaultProxy(listener.address, faults, seed=seed) as proxy:
            done = asyncio.Event()
            expected = sum(1 for k in kinds if k.reliable)
            got = 0

            async def collect() -> None:
                nonlocal got
                async for d in listener:
                    now = time.perf_counter()
                    if d.kind is Kind.FR:
                        fr_latency.append(now - sent_at[d.id])
                        fr_delay.append((d.delivered - d.arrived) / 1e6)
                    if d.kind.reliable:
                        got += 1
                        if got == expected:
                            done.set()

            async def sample() -> None:
                while not done.is_set():
                    samples.append(listener.core.statistics().buffered)
                    await asyncio.sleep(0.002)

            tasks = [asyncio.ensure_future(collect()), asyncio.ensure_future(sample())]
            async with Channel(proxy.address, window=1024) as channel:
                start = time.perf_counter()
                for n, kind in enumerate(kinds):
                    pause = start + n * interval - time.perf_counter()
                    if pause > 0:
                        await asyncio.sleep(pause)
                    sent_at[n] = time.perf_counter()
                    await channel.send(b"x" * 64, kind)
                await asyncio.wait_for(done.wait(), 120)
            stats = listener.statistics()
            listener.close()
            for t in tasks:
                t.cancel()
    fr_latency.sort()
    return {
        "fr_median_ms": statistics.median(fr_latency) * 1e3,
        "fr_p99_ms": fr_latency[min(len(fr_latency) - 1, int(0.99 * len(fr_latency)))] * 1e3,
        "fr_delay_ms": statistics.fmean(fr_delay) * 1e3,
        "max_buffer": float(stats["max_buffered"]),
        "mean_buffer": statistics.fmean(samples) if samples else 0.0,
        "delivered": float(sum(stats["delivered"].values())),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny size, runs in seconds")
    parser.add_argument("--n", type=int, default=None, help="messages (default 3000)")
    parser.add_argument("--loss", type=float, default=0.05, help="loss probability")
    parser.add_argument("--interval", type=float, default=0.001, help="seconds between sends")
    args = parser.parse_args()
    n = args.n or (200 if args.smoke else 3000)
    faults = Faults(loss=args.loss, reorder=0.05, jitter=0.001, reorder_delay=0.005)
    kinds = workload(n, seed=1)
    a = asyncio.run(run_scheme(kinds, faults, args.interval, seed=7))
    b = asyncio.run(run_scheme([Kind.FR] * n, faults, args.interval, seed=7))
    print(f"slotted-FIFO (a) vs reliable FIFO (b): {n} messages, one FR every {SLOT}, "
          f"loss {args.loss:g}, reorder 0.05, send every {args.interval * 1e3:g} ms")
    print(f"{'measure':<22}{'(a) slotted':>14}{'(b) reliable FIFO':>20}{'(b)/(a)':>10}")
    for key, label in [("fr_median_ms", "FR latency median ms"), ("fr_p99_ms", "FR latency p99 ms"),
                       ("fr_delay_ms", "FR delay T_d mean ms"), ("max_buffer", "max buffer (msgs)"),
                       ("mean_buffer", "mean buffer (msgs)"), ("delivered", "delivered")]:
        ratio = b[key] / a[key] if a[key] else float("nan")
        print(f"{label:<22}{a[key]:>14.2f}{b[key]:>20.2f}{ratio:>10.2f}")


if __name__ == "__main__":
    main()
