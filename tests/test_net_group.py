"""Live multicast groups on loopback: members behind lossy,
duplicating, reordering proxies; at every ``Stable`` event every other member has
delivered the message; buffers drain; floods are counted and dropped. Bounded."""

from __future__ import annotations

import asyncio
import random
import socket

import pytest

from tests.test_net_support import udp_drops
from timebound.core.group import Delivered, Event, Stable
from timebound.core.wire import KIND_GROUP, FrameCodec, Key, Keyring
from timebound.net import FaultProxy, Faults
from timebound.net._group import Group

KEY = b"g" * 32


@pytest.mark.parametrize("acks", ["timestamp", "vector"])
def test_lossy_group_never_releases_a_message_some_member_lacks(acks: str) -> None:
    names = ["a", "b", "c", "d"]
    delivered: dict[str, set[tuple[str, int]]] = {n: set() for n in names}
    stable: dict[str, set[int]] = {n: set() for n in names}
    violations: list[str] = []

    def on_event(name: str, event: Event) -> None:
        if isinstance(event, Delivered):
            delivered[name].add((event.sender, event.seq))
        elif isinstance(event, Stable):
            stable[name].add(event.seq)
            for other in names:
                if other != name and (name, event.seq) not in delivered[other]:
                    violations.append(f"{name}:{event.seq} released before {other} had it")

    async def main() -> None:
        local = {n: ("127.0.0.1", 0) for n in names}
        # check_sources=False: the proxies relay from their own sockets (a
        # NACK is otherwise answered only from its member's configured address)
        members = {n: Group("g", n, local, acks=acks, ack_every=0.01, nack_every=0.01,
                            on_event=on_event, check_sources=False) for n in names}
        proxies: list[FaultProxy] = []
        try:
            for m in members.values():
                await m.start()
            faults = Faults(loss=0.1, duplicate=0.1, reorder=0.1, jitter=0.002)
            routes = {}
            for n, m in members.items():
                proxy = FaultProxy(m.address, faults, seed=len(proxies))
                await proxy.start()
                proxies.append(proxy)
                routes[n] = proxy.address
            for n, m in members.items():
                m.addresses.update({o: routes[o] for o in names if o != n})
            rng = random.Random(2)
            sent = {n: 0 for n in names}
            for i in range(300):
                n = rng.choice(names[:3])  # d stays idle
                await members[n].send(b"%d" % i)
                sent[n] += 1
                if i % 20 == 0:
                    await asyncio.sleep(0.005)
            for n in names:
                await members[n].wait_stable(timeout=30)
            for n in names:
                for s in names:
                    assert {q for src, q in delivered[n] if src == s} == set(range(sent[s]))
                assert stable[n] == set(range(sent[n]))
                assert members[n].core.buffered == 0
            assert not violations, violations[:3]
            assert sum(m.core.statistics().retransmissions for m in members.values()) > 0
        finally:
            for p in proxies:
                p.close()
            for m in members.values():
                m.close(leave=False)

    asyncio.run(asyncio.wait_for(main(), 60))


def test_flood_at_a_keyed_member_is_counted_while_the_group_works() -> None:
    flood = 10_000

    async def main() -> None:
        names = ["a", "b", "c"]
        local = {n: ("127.0.0.1", 0) for n in names}
        members = {n: Group("g", n, local, key=KEY, ack_every=0.01) for n in names}
        try:
            for m in members.values():
                await m.start()
            real = {n: m.address for n, m in members.items()}
            for m in members.values():
                m.addresses.update(real)
            host, port = real["b"]
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.setblocking(False)
            wrong = FrameCodec(Keyring(Key(b"w" * 32)))
            rng = random.Random(1)
            junk = [bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 40)))
                    for _ in range(32)]
            forged = [wrong.seal(KIND_GROUP, j) for j in junk]
            sent_ok = 0
            for i in range(2 * flood):
                try:
                    sock.sendto(junk[i % 32] if i % 2 else forged[i % 32], (host, port))
                    sent_ok += 1
                except BlockingIOError:
                    pass
                if i % 640 == 0:
                    await members["a"].send(b"%d" % i)
                if i % 64 == 0:
                    await asyncio.sleep(0.001)
            await members["a"].wait_stable(timeout=20)
            seen, still = -1, 0  # drain: wait until the counters stop moving
            while still < 3:
                await asyncio.sleep(0.05)
                stats = members["b"].statistics()
                count = stats["malformed"] + stats["unauthenticated"]
                still = still + 1 if count == seen else 0
                seen = count
            sock.close()
            stats = members["b"].statistics()
            counted = stats["malformed"] + stats["unauthenticated"]
            assert counted >= 0.95 * (sent_ok - udp_drops(port)) and counted > flood // 2
            assert stats["unauthenticated"] > flood // 4
            assert stats["delivered"] == members["a"].statistics()["sent"]
        finally:
            for m in members.values():
                m.close()

    asyncio.run(asyncio.wait_for(main(), 40))
