"""Causal pub-sub: merger throughput and end-to-end latency at 2 and 8 publishers.

Run: .venv/bin/python benchmarks/bench_pubsub.py [--smoke]

One run, side by side for 2 and 8 publishers: (1) merger throughput -- messages per
second through one ``MergerNode`` (decode the bounded ⟨r, c, kn⟩, buffer, deliver at
the deadline, forward to one subscriber), CPU only, median of repeats; (2) live
loopback UDP: publishers (processes of ``ds(ε, δ)``) -> one merger -> one subscriber,
end-to-end latency from publish to the subscriber's delivery (median, p99) next to
the merger's wait ``δ + ε`` that the paper's deadline imposes, and the merger's
maximum buffering (bounded by ``δ + 3ε``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from timebound.core.pubsub import MergerNode, Publisher, Subscriber
from timebound.core.wire import FrameCodec
from timebound.net._pubsub import MergerServer, MsClock, SubscriberClient
from timebound.net._pubsub import Publisher as LivePublisher

EPS, DELTA = 5, 40  # ms


def throughput(publishers: int, count: int, repeats: int) -> float:
    pubs = [Publisher(f"p{i}", EPS, DELTA, 64, FrameCodec()) for i in range(publishers)]
    frames = []
    t = 1000
    for i in range(count):
        t = 1000 + i // publishers  # every publisher publishes once per ms
        frames.append((t, pubs[i % publishers].publish(b"x" * 32, now=t)[2]))
    rates = []
    for _ in range(repeats):
        merger: MergerNode[str] = MergerNode("m", EPS, DELTA, 64, FrameCodec())
        sub = Subscriber("s", FrameCodec())
        merger.receive(sub.subscription(), "s", now=0)
        start = time.perf_counter()
        for now, frame in frames:
            merger.receive(frame, "p", now=now)
            if now % 500 == 0:
                merger.receive(sub.subscription(), "s", now=now)
        merger.handle_timer(now=t + 10 * DELTA)
        rates.append(count / (time.perf_counter() - start))
        assert merger.statistics().delivered == count
    return statistics.median(rates)


async def live(publishers: int, seconds: float, rate: float) -> dict[str, float]:
    clock = MsClock()
    sent: dict[tuple[str, int], float] = {}
    latencies: list[float] = []
    async with MergerServer("m", epsilon=EPS, delta=DELTA) as merger:
        async with SubscriberClient(merger.address) as sub:
            await asyncio.sleep(0.05)

            async def read() -> None:
                async for d in sub:
                    latencies.append((time.perf_counter() - sent[(d.proc, d.msg)]) * 1e3)

            reader = asyncio.ensure_future(read())
            pubs = [LivePublisher(f"p{i}", [merger.address], epsilon=EPS, delta=DELTA,
                                  clock=clock) for i in range(publishers)]
            for p in pubs:
                await p.__aenter__()

            async def run(p: LivePublisher) -> None:
                loop = asyncio.get_running_loop()
                end = loop.time() + seconds
                while loop.time() < end:
                    msg = p.core.published
                    sent[(p.core.name, msg)] = time.perf_counter()
                    await p.publish(b"x" * 32)
                    await asyncio.sleep(1.0 / rate)

            await asyncio.gather(*(run(p) for p in pubs))
            await asyncio.sleep((DELTA + 4 * EPS) / 1000 + 0.1)
            for p in pubs:
                p.close()
            sub.close()
            await reader
            stats = merger.statistics()
    latencies.sort()
    return {"sent": len(sent), "delivered": len(latencies),
            "median": statistics.median(latencies),
            "p99": latencies[int(0.99 * (len(latencies) - 1))],
            "late": stats["late"], "max_buffering": stats["max_buffering"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, runs in seconds")
    args = parser.parse_args()
    count = 2000 if args.smoke else 50_000
    repeats = 1 if args.smoke else 3
    seconds = 0.3 if args.smoke else 2.0
    rate = 200.0  # messages per second per publisher
    print(f"causal pub-sub, epsilon {EPS} ms, delta {DELTA} ms (merger wait delta+epsilon = "
          f"{DELTA + EPS} ms, buffering bound delta+3epsilon = {DELTA + 3 * EPS} ms)")
    print(f"{'publishers':>10} {'merger msg/s':>13} {'live sent':>10} {'delivered':>10} "
          f"{'e2e median ms':>14} {'e2e p99 ms':>11} {'late':>5} {'max buffering ms':>17}")
    rows = {}
    for publishers in (2, 8):
        tput = throughput(publishers, count, repeats)
        r = asyncio.run(live(publishers, seconds, rate))
        rows[publishers] = (tput, r)
        print(f"{publishers:>10} {tput:>13,.0f} {r['sent']:>10.0f} {r['delivered']:>10.0f} "
              f"{r['median']:>14.2f} {r['p99']:>11.2f} {r['late']:>5.0f} "
              f"{r['max_buffering']:>17.0f}")
    (t2, r2), (t8, r8) = rows[2], rows[8]
    print(f"ratios 8/2 publishers: merger throughput x{t8 / t2:.2f}, "
          f"e2e median latency x{r8['median'] / r2['median']:.2f}")


if __name__ == "__main__":
    main()
