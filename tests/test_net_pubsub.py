"""Live causal pub-sub on loopback: two publishers (one
replying causally to the other), two replicated mergers behind lossy, duplicating,
reordering proxies, a second-level merger over both, three subscribers. Every two
subscribers see their common messages in the same order, causally consistent; merger
buffering stays within delta + 3 epsilon; garbage is counted and dropped. Bounded."""

from __future__ import annotations

import asyncio
import itertools
import random
import socket

from tests.test_net_support import settled_junk, udp_drops
from timebound.core.pubsub import SubscriberDelivery
from timebound.core.wire import KIND_PUBSUB, FrameCodec, Key, Keyring
from timebound.net import FaultProxy, Faults
from timebound.net._pubsub import MergerServer, Publisher, SubscriberClient

EPS, DELTA = 5, 60  # ms
FLOOD = 4000  # junk datagrams at a merger


def test_replicated_and_stacked_mergers_agree_and_respect_causality() -> None:
    seen: dict[str, list[SubscriberDelivery]] = {}

    async def main() -> None:
        m1 = MergerServer("m1", epsilon=EPS, delta=DELTA)
        m2 = MergerServer("m2", epsilon=EPS, delta=DELTA)
        await m1.start()
        await m2.start()
        top = MergerServer("top", epsilon=EPS, delta=DELTA + 3 * EPS,
                           upstream=[m1.address, m2.address])
        await top.start()
        faults = Faults(loss=0.1, duplicate=0.1, reorder=0.1, jitter=0.002,
                        reorder_delay=0.01)
        proxies = [FaultProxy(m.address, faults, seed=i) for i, m in enumerate((m1, m2))]
        for p in proxies:
            await p.start()
        subs = {name: SubscriberClient(m.address, name=name)
                for name, m in (("s1", m1), ("s2", m2), ("s3", top))}
        for s in subs.values():
            await s.start()
        await asyncio.sleep(0.1)  # leases in place
        p1 = Publisher("p1", [p.address for p in proxies], epsilon=EPS, delta=DELTA)
        p2 = Publisher("p2", [p.address for p in proxies], epsilon=EPS, delta=DELTA)
        await p1.__aenter__()
        await p2.__aenter__()
        replies: list[int] = []

        async def reply() -> None:  # p2 reads s1's stream and answers p1's messages
            async for d in subs["s1"]:
                seen.setdefault("s1", []).append(d)
                if d.proc == "p1" and d.msg % 5 == 0:
                    p2.observe(d.stamp)
                    await p2.publish(b"re %d" % d.msg)
                    replies.append(d.msg)

        async def collect(name: str) -> None:
            async for d in subs[name]:
                seen.setdefault(name, []).append(d)

        tasks = [asyncio.ensure_future(reply())]
        tasks += [asyncio.ensure_future(collect(n)) for n in ("s2", "s3")]
        try:
            rng = random.Random(4)
            for i in range(150):
                await (p1 if rng.random() < 0.6 else p2).publish(b"m%d" % i)
                await asyncio.sleep(0.002)
            await asyncio.sleep(0.6)
        finally:
            for s in subs.values():
                s.close()
            await asyncio.gather(*tasks, return_exceptions=True)
            for p in proxies:
                p.close()
            p1.close()
            p2.close()
            stats = [m.statistics() for m in (m1, m2, top)]
            for m in (m1, m2, top):
                m.close()
        assert replies
        for s, m in zip(stats, (m1, m2, top), strict=True):
            assert s["max_buffering"] <= m.core.delta + 3 * EPS, s
            assert s["delivered"] > 50
        assert stats[2]["duplicates"] > 0  # the replicas' copies met at the top

    asyncio.run(asyncio.wait_for(main(), 60))
    orders = {name: [(d.proc, d.msg) for d in ds] for name, ds in seen.items()}
    assert set(orders) == {"s1", "s2", "s3"}
    for a, b in itertools.combinations(orders, 2):
        common = set(orders[a]) & set(orders[b])
        assert len(common) > 50
        assert [x for x in orders[a] if x in common] == [x for x in orders[b] if x in common]
    for name, order in orders.items():
        position = {x: n for n, x in enumerate(order)}
        for proc in ("p1", "p2"):  # each publisher's messages in its causal order
            mine = [x[1] for x in order if x[0] == proc]
            assert mine == sorted(mine), name
        for d in seen[name]:  # a reply comes after what it answers
            if d.proc == "p2" and d.data.startswith(b"re "):
                cause = ("p1", int(d.data.split()[1]))
                assert cause not in position or position[cause] < position[("p2", d.msg)]


def test_garbage_at_a_merger_is_counted_and_it_keeps_merging() -> None:
    async def main() -> None:
        key = b"p" * 32
        async with MergerServer("m", epsilon=EPS, delta=DELTA, key=key) as merger:
            async with SubscriberClient(merger.address, key=key) as sub:
                await asyncio.sleep(0.05)
                sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                wrong = FrameCodec(Keyring(Key(b"w" * 32)))
                rng = random.Random(3)
                port = merger.address[1]

                def handled() -> int:  # counted by the merger, or dropped by the kernel
                    stats = merger.statistics()
                    return stats["malformed"] + stats["unauthenticated"] + udp_drops(port)

                for i in range(FLOOD):
                    junk = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 40)))
                    sock.sendto(junk if i % 2 else wrong.seal(KIND_PUBSUB, junk),
                                merger.address)
                    if i % 100 == 99:
                        # flow control: at most 200 datagrams in the socket buffer, so
                        # a slow (loaded) event loop does not make the kernel drop them
                        end = asyncio.get_running_loop().time() + 10
                        while handled() < i + 1 - 100:
                            assert asyncio.get_running_loop().time() < end, handled()
                            await asyncio.sleep(0.001)
                sock.close()
                # let the merger drain the flood first: pub-sub datagrams are not
                # retransmitted, and a socket buffer still full of junk would make the
                # kernel drop the publisher's messages (not what this test is about)
                await settled_junk(merger.statistics)
                async with Publisher("p", [merger.address], epsilon=EPS, delta=DELTA,
                                     key=key) as pub:
                    for i in range(20):
                        await pub.publish(b"%d" % i)
                got = [await asyncio.wait_for(sub.get(), 5) for _ in range(20)]
                assert [d.msg for d in got] == list(range(20))
                stats = merger.statistics()
                dropped = udp_drops(port)
                counted = stats["malformed"] + stats["unauthenticated"]
                # every junk datagram was counted or dropped by the kernel (whose drop
                # count may include other datagrams at the port)
                assert counted <= FLOOD <= counted + dropped, (counted, dropped)
                assert counted > 0.9 * FLOOD, (counted, dropped)
                assert stats["unauthenticated"] > 0.45 * FLOOD

    asyncio.run(asyncio.wait_for(main(), 30))


def test_a_publisher_to_loopback_mergers_binds_loopback_only() -> None:
    from timebound.net._pubsub import _local_host

    assert _local_host([("127.0.0.1", 1), ("127.0.0.2", 2)]) == "127.0.0.1"
    assert _local_host([("::1", 1)]) == "::1"
    assert _local_host([("127.0.0.1", 1), ("192.0.2.7", 2)]) == "0.0.0.0"
    assert _local_host([("2001:db8::1", 1)]) == "::"
    assert _local_host([("merger.example", 1)]) == "0.0.0.0"

    async def bound() -> str:
        async with Publisher("p", [("127.0.0.1", 9)], epsilon=5, delta=40) as publisher:
            assert publisher._transport is not None
            return str(publisher._transport.get_extra_info("sockname")[0])

    assert asyncio.run(bound()) == "127.0.0.1"
