"""Group stability: timestamp acks against vector acks, 4 to 32 members, one run.

Run: .venv/bin/python benchmarks/bench_group.py [--smoke]

The stability paper's comparison (section 4): every member multicasts at the same
rate; every ``ack_every`` each member multicasts its ack (timestamp: one scalar;
vector: one entry per sender) in a heartbeat. Reported per group size and ack mode:
ack bytes per message sent (the paper's count: 8 bytes per timestamp, positional
vectors) and on the wire (whole heartbeat frames), and the stability latency (send
-> the member learns every member has it; mean and p99). Two parts, same cores:
(1) the ``timebound.core.group`` members on a simulated link (1 ms +- 0.5 ms,
deterministic, sizes 4-32); (2) live ``timebound.net`` members on loopback UDP
(sizes 4 and 8; wall-clock, so latencies include this machine's scheduling).
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import random
import statistics

from timebound.core.group import Delivered, GroupMember, Stable
from timebound.core.stability import AckMode
from timebound.core.wire import FrameCodec
from timebound.net._group import Group

MS = 1000


def simulate(n: int, acks: AckMode, duration: int, rate: float, seed: int = 1) -> dict[str, float]:
    rng = random.Random(seed)
    names = [f"m{i:02d}" for i in range(n)]
    members = {x: GroupMember("g", x, names, FrameCodec(), incarnation=1, acks=acks,
                              ack_every=20 * MS, now=0) for x in names}
    heap: list[tuple[int, int, str, bytes | None]] = []  # (time, order, dest, frame|None=send)
    order = 0
    gap = int(1e6 / rate)
    for x in names:
        t = rng.randint(0, gap)
        while t < duration:
            heap.append((t, order, x, None))
            order += 1
            t += rng.randint(gap // 2, gap * 3 // 2)
    heapq.heapify(heap)
    latencies: list[int] = []
    now = 0

    def out(src: str, sends: tuple[tuple[str, bytes], ...], events: tuple[object, ...]) -> None:
        nonlocal order
        for dest, frame in sends:
            order += 1
            heapq.heappush(heap, (now + rng.randint(500, 1500), order, dest, frame))
        latencies.extend(e.latency for e in events if isinstance(e, Stable))

    end = duration + 500 * MS
    while now < end:
        t_heap = heap[0][0] if heap else end
        t_timer = min(d for m in members.values() if (d := m.next_deadline()) is not None)
        now = min(t_heap, t_timer, end)
        for x, m in members.items():
            d = m.next_deadline()
            if d is not None and d <= now:
                r = m.handle_timer(now=now)
                out(x, r.sends, r.events)
        while heap and heap[0][0] <= now:
            _, _, dest, frame = heapq.heappop(heap)
            m = members[dest]
            if frame is None:
                if m.can_send():
                    r = m.send(b"x" * 32, now=now)
                    out(dest, r.sends, r.events)
            else:
                r = m.receive(frame, now=now)
                out(dest, r.sends, r.events)
    return summarize([m.statistics() for m in members.values()], latencies)


def summarize(stats: list[object], latencies: list[int]) -> dict[str, float]:
    sent = sum(s.sent for s in stats)  # type: ignore[attr-defined]
    ack = sum(s.ack_bytes for s in stats)  # type: ignore[attr-defined]
    frame = sum(s.ack_frame_bytes for s in stats)  # type: ignore[attr-defined]
    latencies.sort()
    return {
        "sent": sent, "stable": len(latencies),
        "ack_bytes_per_msg": ack / max(sent, 1) * (len(stats) - 1),
        "wire_bytes_per_msg": frame / max(sent, 1),
        "latency_mean_ms": statistics.fmean(latencies) / 1000 if latencies else float("nan"),
        "latency_p99_ms": latencies[int(0.99 * (len(latencies) - 1))] / 1000
        if latencies else float("nan"),
    }


async def live(n: int, acks: str, seconds: float, rate: float) -> dict[str, float]:
    names = [f"m{i:02d}" for i in range(n)]
    local = {x: ("127.0.0.1", 0) for x in names}
    latencies: list[int] = []

    def on_event(name: str, event: object) -> None:
        if isinstance(event, Stable):
            latencies.append(event.latency)
        assert not isinstance(event, Delivered) or event.data

    members = [Group("g", x, local, acks=acks, ack_every=0.02, on_event=on_event)
               for x in names]
    try:
        for m in members:
            await m.start()
        real = {m.name: m.address for m in members}
        for m in members:
            m.addresses.update(real)
        loop = asyncio.get_running_loop()
        start = loop.time()
        rng = random.Random(2)
        while loop.time() - start < seconds:
            await rng.choice(members).send(b"x" * 32)
            await asyncio.sleep(1.0 / (rate * n))
        for m in members:
            await m.wait_stable(timeout=30)
        await asyncio.sleep(0.05)
        return summarize([m.core.statistics() for m in members], latencies)
    finally:
        for m in members:
            m.close(leave=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, runs in seconds")
    args = parser.parse_args()
    sizes = [4, 8] if args.smoke else [4, 8, 16, 32]
    duration = (300 if args.smoke else 2000) * MS
    rate = 50.0  # messages per second per member
    print(f"(1) simulated link, {duration // MS} ms, {rate:g} msg/s per member, acks every 20 ms")
    header = (f"{'members':>7} {'acks':>9} {'sent':>6} {'ack B/msg':>10} {'wire B/msg':>11} "
              f"{'stab. mean ms':>14} {'p99 ms':>8}")
    print(header)
    ratios = []
    for n in sizes:
        rows = {}
        for mode in (AckMode.TIMESTAMP, AckMode.VECTOR):
            r = simulate(n, mode, duration, rate)
            rows[mode] = r
            print(f"{n:>7} {mode.value:>9} {r['sent']:>6.0f} {r['ack_bytes_per_msg']:>10.1f} "
                  f"{r['wire_bytes_per_msg']:>11.1f} {r['latency_mean_ms']:>14.2f} "
                  f"{r['latency_p99_ms']:>8.2f}")
        t, v = rows[AckMode.TIMESTAMP], rows[AckMode.VECTOR]
        ratios.append((n, v["ack_bytes_per_msg"] / t["ack_bytes_per_msg"],
                       v["wire_bytes_per_msg"] / t["wire_bytes_per_msg"],
                       v["latency_mean_ms"] / t["latency_mean_ms"]))
    print("ratios vector/timestamp: " + "; ".join(
        f"n={n}: ack bytes x{a:.1f}, wire bytes x{w:.2f}, latency x{lat:.2f}"
        for n, a, w, lat in ratios))
    seconds = 0.5 if args.smoke else 2.0
    print(f"(2) live loopback UDP, {seconds:g} s, {rate:g} msg/s per member")
    print(header)
    for n in ([4] if args.smoke else [4, 8]):
        for mode in ("timestamp", "vector"):
            r = asyncio.run(live(n, mode, seconds, rate))
            print(f"{n:>7} {mode:>9} {r['sent']:>6.0f} {r['ack_bytes_per_msg']:>10.1f} "
                  f"{r['wire_bytes_per_msg']:>11.1f} {r['latency_mean_ms']:>14.2f} "
                  f"{r['latency_p99_ms']:>8.2f}")


if __name__ == "__main__":
    main()
