"""Live slotted-FIFO channels on loopback: the Python API
through the fault proxy, back-pressure, floods of malformed and unauthenticated
datagrams. Each test is bounded (seconds) and closes what it opens."""

from __future__ import annotations

import asyncio
import random
import socket

from tests.test_net_channel_core import check_rules
from tests.test_net_support import settled_junk, udp_drops
from timebound.core.slotted import Kind
from timebound.core.wire import KIND_CHANNEL, FrameCodec, Key, Keyring
from timebound.net import FaultProxy, Faults
from timebound.net._channel import Channel, ChannelFailed, ChannelListener

KEY = b"k" * 32


def test_lossy_proxy_keeps_rules_and_never_loses_reliable_data() -> None:
    rng = random.Random(3)
    kinds = [rng.choice([Kind.FR, Kind.R, Kind.F, Kind.N]) for _ in range(1500)]

    async def main() -> None:
        async with ChannelListener() as listener:
            faults = Faults(loss=0.10, duplicate=0.10, reorder=0.10, jitter=0.002,
                            reorder_delay=0.01)
            async with FaultProxy(listener.address, faults, seed=11) as proxy:
                got = []

                async def collect() -> None:
                    async for d in listener:
                        got.append(d)

                reader = asyncio.ensure_future(collect())
                async with Channel(proxy.address, window=64) as channel:
                    for n, kind in enumerate(kinds):
                        assert await channel.send(b"m%d" % n, kind) == n
                await asyncio.sleep(0.05)  # the last unreliable ones in flight
                listener.close()
                await reader
                check_rules(kinds, got)
                assert all(d.data == b"m%d" % d.id for d in got)
                stats = listener.statistics()
                assert stats["opens"] == 1
                assert stats["duplicates"] > 0 and proxy.stats.lost > 0
                assert channel.statistics()["retransmissions"] > 0

    asyncio.run(asyncio.wait_for(main(), 60))


def test_send_waits_while_the_receiver_does_not_read() -> None:
    async def main() -> None:
        async with ChannelListener(max_queue=20) as listener:
            async with Channel(listener.address, window=8, min_rto=0.01,
                               give_up=30) as channel:
                sent = 0

                async def sender() -> None:
                    nonlocal sent
                    for n in range(200):
                        await channel.send(b"%d" % n, "R")
                        sent += 1

                task = asyncio.ensure_future(sender())
                await asyncio.sleep(0.5)
                assert not task.done()
                assert sent < 40  # held by the window: queue 20 + window 8 (+ slack)
                assert channel.core.statistics().in_flight <= 8
                ids = []
                while len(ids) < 200:
                    d = await asyncio.wait_for(listener.get(), 10)
                    ids.append(d.id)
                await asyncio.wait_for(task, 10)
                assert sorted(ids) == list(range(200))
                assert listener.overruns > 0

    asyncio.run(asyncio.wait_for(main(), 40))


def test_floods_are_dropped_and_counted_while_serving() -> None:
    flood = 20_000

    async def main() -> None:
        async with ChannelListener(key=KEY) as listener:
            host, port = listener.address
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.setblocking(False)
            wrong = FrameCodec(Keyring(Key(b"w" * 32)))
            rng = random.Random(5)
            garbage = [bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 60)))
                       for _ in range(64)]
            forged = [wrong.seal(KIND_CHANNEL, g) for g in garbage]
            got: list[int] = []

            async def collect() -> None:
                async for d in listener:
                    got.append(d.id)

            reader = asyncio.ensure_future(collect())

            sent_ok = 0

            async def flooding() -> None:
                nonlocal sent_ok
                for n in range(2 * flood):
                    frame = garbage[n % 64] if n % 2 else forged[n % 64]
                    try:
                        sock.sendto(frame, (host, port))
                        sent_ok += 1
                    except BlockingIOError:
                        pass
                    if n % 64 == 0:
                        await asyncio.sleep(0.001)

            flood_task = asyncio.ensure_future(flooding())
            async with Channel(listener.address, key=KEY, give_up=20) as channel:
                for n in range(300):
                    await channel.send(b"%d" % n, "FR" if n % 10 == 0 else "R")
            await flood_task
            # drain: wait until the counters stop moving, and read the kernel's drop
            # count while the socket still exists (a closed socket reports none)
            await settled_junk(listener.statistics, pause=0.05)
            dropped = udp_drops(port)
            listener.close()
            await reader
            sock.close()
            assert sorted(got) == list(range(300))
            stats = listener.statistics()
            counted = stats["malformed"] + stats["unauthenticated"]
            assert counted >= 0.95 * (sent_ok - dropped) and counted > flood // 2
            assert stats["unauthenticated"] > flood // 4
            assert stats["opens"] == 1 and stats["sessions"] == 1

    asyncio.run(asyncio.wait_for(main(), 60))


def test_unauthenticated_channel_gets_nothing_delivered() -> None:
    async def main() -> None:
        async with ChannelListener(key=KEY) as listener:
            channel = Channel(listener.address, key=b"x" * 32, give_up=0.5)
            await channel.open()
            try:
                await channel.send(b"hi", "R")
                try:
                    await channel.drain(timeout=5)
                except ChannelFailed as exc:
                    assert exc.reason == "timeout"
                else:  # pragma: no cover
                    raise AssertionError("a channel with the wrong key was acknowledged")
            finally:
                channel.close()
            assert listener.statistics()["unauthenticated"] >= 1
            assert listener.statistics()["opens"] == 0

    asyncio.run(asyncio.wait_for(main(), 20))
