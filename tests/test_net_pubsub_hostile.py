"""Pub-sub on a hostile network.

- A PUB whose stamp counter is out of range used to be accepted, then raised when
  the merger forwarded it (3 such datagrams made 3 legitimate publications
  disappear): decoded stamps, ids and sequence numbers are range-checked at receive
  time, counted (``out_of_range``) and dropped.
- Any source took a subscriber lease with an 8-byte SUB (leases forged for victims
  turned five 60 KB PUBs into 153.7 MB, 497x): a SUB now takes a lease only with a
  token the merger sent to that address (CHAL); an unvalidated address gets at most
  3x the bytes it sent (measured per message type, key or not).
- A fuzz of 20,000 random and mutated frames at a live merger and at a live
  subscriber: no traceback, bounded state, a correct client served afterwards.
- The merger's loopback-only default without a key; service ids.
"""

from __future__ import annotations

import asyncio
import random
import socket
from typing import Any

import pytest

from tests.test_net_support import fake_public
from timebound.core.pubsub import (
    LEASE,
    MAX_SUBSCRIBERS,
    TOKEN_LIFETIME,
    MergerNode,
    Published,
    Publisher,
    Subscriber,
)
from timebound.core.pubsub._wire import codec as stamp_codec
from timebound.core.pubsub._wire import (
    encode_challenge,
    encode_fwd,
    encode_sub,
)
from timebound.core.wire import KIND_PUBSUB, FrameCodec, Key, Keyring, encode_name
from timebound.errors import UsageError
from timebound.net import _pubsub
from timebound.net._pubsub import MergerServer, SubscriberClient
from timebound.net._pubsub import Publisher as PublisherClient

pytestmark = pytest.mark.waits

EPS, DELTA, N = 5, 40, 8
KEY = b"p" * 32
SECRET = b"s" * 32


def raw_stamp(epsilon: int, delta: int, n: int, r: int, c: int, kn: tuple[int, ...]) -> bytes:
    """The wire stamp with no range check (what a forger can write)."""
    w = stamp_codec(epsilon, delta, n)
    value = r % w.modulus
    value = (value << w._cbits) | c
    for k in kn:
        value = (value << w._kbits) | k
    return value.to_bytes(w.size, "big")


def forged_pub(proc: str, msg: int, now: int, *, c: int = 0, kn: int = 0) -> bytes:
    from timebound.core.pubsub._wire import _MSG, PUB
    body = (bytes((PUB,)) + encode_name(proc) + _MSG.pack(msg, EPS, DELTA, N)
            + raw_stamp(EPS, DELTA, N, now, c, (kn,) * (2 * EPS)) + b"forged")
    return FrameCodec().seal(KIND_PUBSUB, body)


def test_out_of_range_stamps_are_dropped_at_receive_not_raised_at_forward() -> None:
    merger: MergerNode[str] = MergerNode("m", EPS, DELTA, N, FrameCodec())
    sub = Subscriber("s", FrameCodec(), now=0)
    merger.receive(sub.subscription(), "s", now=1000)
    pub = Publisher("p", EPS, DELTA, N, FrameCodec())
    got: list[int] = []
    t = 1000
    for i in range(3):
        t += 2
        _, _, frame = pub.publish(b"%d" % i, now=t)
        merger.receive(frame, "p", now=t)
        bad = [forged_pub("x", i, t, c=EPS), forged_pub("y", i, t, kn=N + 1),
               forged_pub("z", (1 << 63) + i, t)][i]
        merger.receive(bad, "attacker", now=t)
    for frame in [f for _, f in merger.handle_timer(now=t + 10 * DELTA).sends]:
        got.extend(d.msg for d in sub.receive(frame, now=t + 10 * DELTA).delivered
                   if d.proc == "p")
    assert got == [0, 1, 2]
    assert merger.statistics().out_of_range == 3


def test_subscriber_drops_out_of_range_forwards() -> None:
    sub = Subscriber("s", FrameCodec(), max_waiting=16, now=0)
    pub = Publisher("p", EPS, DELTA, N, FrameCodec())
    _, stamp, _ = pub.publish(b"x", now=1000)
    message = Published("p", 0, EPS, DELTA, N, stamp, b"x")
    out_delta = DELTA + 3 * EPS

    def fwd(seq: int) -> bytes:
        return FrameCodec().seal(KIND_PUBSUB, encode_fwd("m", seq, message, out_delta))

    assert len(sub.receive(fwd(0), now=1001).delivered) == 1
    sub.receive(fwd(1 << 62), now=1001)  # beyond SEQ_LIMIT
    sub.receive(fwd(17), now=1001)  # beyond max_waiting past the next one
    assert sub.statistics().out_of_range == 2 and sub.statistics().waiting == 0
    assert len(sub.receive(fwd(1), now=1002).delivered) == 1


def test_a_sub_takes_a_lease_only_with_a_token_for_its_address() -> None:
    merger: MergerNode[str] = MergerNode("m", EPS, DELTA, N, FrameCodec(), secret=SECRET,
                                         max_subscribers=2)
    sub = Subscriber("s", FrameCodec(), now=0)
    first = merger.receive(sub.subscription(), "s", now=1000)
    assert merger.statistics().subscribers == 0
    [(dest, chal)] = first.sends
    assert dest == "s" and len(chal) <= 3 * len(sub.subscription())
    answer = sub.receive(chal, now=1000).sends  # the subscriber sends the token at once
    echo = sub.subscription()
    assert answer == (echo,)
    assert merger.receive(echo, "victim", now=1001).sends  # another address: CHAL again
    assert merger.statistics().subscribers == 0
    assert merger.receive(echo, "s", now=1001).sends == ()
    assert merger.statistics().subscribers == 1
    assert merger.receive(echo, "s", now=1000 + TOKEN_LIFETIME + 1).sends  # expired
    forged = FrameCodec().seal(KIND_PUBSUB, encode_sub(1, "s", b"\x00" * 16))
    merger.receive(forged, "t", now=1002)
    for peer in ("t", "u", "v"):  # leases bounded: max_subscribers
        [(_, c)] = merger.receive(FrameCodec().seal(KIND_PUBSUB, encode_sub(1, peer)), peer,
                                  now=1003).sends
        token = c[-16:]
        merger.receive(FrameCodec().seal(KIND_PUBSUB, encode_sub(1, peer, token)), peer,
                       now=1003)
    stats = merger.statistics()
    assert stats.subscribers == 2 and stats.refused == 2  # "s" and "t" hold both
    assert merger.handle_timer(now=1003 + LEASE).sends == ()
    assert merger.statistics().subscribers == 0


def test_a_replayed_sub_keeps_a_lease_at_most_a_token_lifetime_and_a_lease() -> None:
    """A SUB can be replayed (captured on the path, or forged keyless from the
    subscriber's own address) after its subscriber left: it renews the lease only
    while its token is valid, so forwarding aimed at that address by replays stops
    at most ``TOKEN_LIFETIME + LEASE`` ms after the token was issued; a SUB frame
    draws no answer but a CHAL (at most 3x, tested above)."""
    merger: MergerNode[str] = MergerNode("m", EPS, DELTA, N, FrameCodec(), secret=SECRET)
    sub = Subscriber("s", FrameCodec(), now=0)
    [(_, chal)] = merger.receive(sub.subscription(), "s", now=1000).sends
    (captured,) = sub.receive(chal, now=1000).sends  # the SUB with the token, issued at 1000
    sub.leave()
    leased_until = 0
    for now in range(1000, 1000 + 2 * TOKEN_LIFETIME, 500):  # replayed every 0.5 s
        merger.receive(captured, "s", now=now)
        merger.handle_timer(now=now)
        if merger.statistics().subscribers:
            leased_until = now
    assert 1000 + TOKEN_LIFETIME - 500 <= leased_until <= 1000 + TOKEN_LIFETIME + LEASE


def _lease(merger: MergerNode[str], codec: FrameCodec, peer: str, now: int) -> None:
    """``peer`` subscribes through the token round trip, as a real address can."""
    out = merger.receive(codec.seal(KIND_PUBSUB, encode_sub(1, peer)), peer, now=now)
    for _dest, chal in out.sends:
        opened = codec.open(chal, now=now)
        assert opened is not None
        merger.receive(codec.seal(KIND_PUBSUB, encode_sub(1, peer, opened.body[-16:])),
                       peer, now=now)


def test_lease_exhaustion_needs_the_key_where_there_is_one() -> None:
    """Leases are bounded (``max_subscribers``). Without a key, whoever controls that
    many source addresses (each validated: they really receive) holds every lease
    and an honest subscriber is refused until they lapse; with a key, SUBs without
    it take no lease and the honest subscriber gets one (docs/net.md says so)."""
    cap = 64
    for key in (None, Keyring(Key(KEY))):
        merger: MergerNode[str] = MergerNode("m", EPS, DELTA, N, FrameCodec(key),
                                             secret=SECRET, max_subscribers=cap)
        for i in range(2 * cap):  # the attacker's addresses, keyless frames
            _lease(merger, FrameCodec(), f"attacker-{i}", now=1000 + i)
        _lease(merger, FrameCodec(key), "honest", now=2000)
        stats = merger.statistics()
        if key is None:
            assert stats.subscribers == cap and stats.refused == cap + 1
        else:
            assert stats.subscribers == 1 and stats.refused == 0
            assert stats.unauthenticated >= 2 * cap


def test_a_chal_is_answered_only_from_an_upstream_merger() -> None:
    upper: MergerNode[str] = MergerNode("top", EPS, DELTA + 3 * EPS, N, FrameCodec(),
                                        secret=SECRET, upstream=["low"])
    chal = FrameCodec().seal(KIND_PUBSUB, encode_challenge(b"t" * 16))
    assert upper.receive(chal, "victim", now=5).sends == ()
    [(dest, frame)] = upper.receive(chal, "low", now=5).sends
    assert dest == "low" and frame.endswith(b"t" * 16)
    assert upper.upstream_subscription("low").endswith(b"t" * 16)


def test_challenge_with_a_key_stays_within_3x() -> None:
    merger: MergerNode[str] = MergerNode("m", EPS, DELTA, N, FrameCodec(Keyring(Key(KEY))),
                                         secret=SECRET)
    sub = FrameCodec(Keyring(Key(KEY))).seal(KIND_PUBSUB, encode_sub(1, "s"))
    [(_, chal)] = merger.receive(sub, "s", now=1).sends
    assert len(chal) <= 3 * len(sub)


# -- live -----------------------------------------------------------------------------


def collect_errors() -> list[Any]:
    errors: list[Any] = []
    asyncio.get_running_loop().set_exception_handler(lambda _l, ctx: errors.append(ctx))
    return errors


def mutate(rng: random.Random, frame: bytes) -> bytes:
    choice = rng.randrange(4)
    if choice == 0:
        return frame[:rng.randrange(len(frame))]
    if choice == 1:
        return bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 100)))
    data = bytearray(frame)
    if choice == 2:
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    else:
        at = rng.randrange(len(data))
        data[at:at + 4] = bytes(rng.choice([0xFF, 0x7F, 0x00, 0x80]) for _ in range(4))
    return bytes(data)


def templates(now: int) -> list[bytes]:
    """Valid frames of every type, from names the real client never uses."""
    pub = Publisher("fz", EPS, DELTA, N, FrameCodec())
    frames = []
    for i in range(3):
        _, stamp, frame = pub.publish(b"f" * 10, now=now + i)
        frames.append(frame)
        message = Published("fz", i, EPS, DELTA, N, stamp, b"f")
        frames.append(FrameCodec().seal(KIND_PUBSUB, encode_fwd("fm", 10**7 + i, message,
                                                                DELTA + 3 * EPS)))
    frames.append(FrameCodec().seal(KIND_PUBSUB, encode_sub(1, "fs", b"q" * 16)))
    frames.append(FrameCodec().seal(KIND_PUBSUB, encode_sub(2, "fs")))
    frames.append(FrameCodec().seal(KIND_PUBSUB, encode_challenge(b"c" * 16)))
    frames += [forged_pub("fx", 1, now, c=EPS), forged_pub("fy", 2, now, kn=N + 1)]
    return frames


def test_live_merger_survives_a_fuzz_and_serves_afterwards(
        capfd: pytest.CaptureFixture[str]) -> None:
    count = 20_000

    async def main() -> None:
        errors = collect_errors()
        merger = MergerServer("m", epsilon=EPS, delta=DELTA, n=N)
        await merger.start()
        sub = SubscriberClient(merger.address, name="s")
        await sub.start()
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setblocking(False)
        try:
            await asyncio.sleep(0.05)  # lease in place
            rng = random.Random(3)
            frames = templates(merger.clock.now())
            for i in range(count):
                if i % 500 == 0:
                    frames = templates(merger.clock.now())
                try:
                    sock.sendto(mutate(rng, rng.choice(frames)), merger.address)
                except BlockingIOError:
                    pass
                if i % 50 == 0:  # paced: the point is what is read, not dropped
                    await asyncio.sleep(0.001)
            await asyncio.sleep(0.3)
            core = merger.core
            stats = core.statistics()
            assert stats.malformed + stats.out_of_range + stats.mismatched > count // 10
            assert stats.out_of_range > 0
            assert len(core._messages) <= core.max_pending
            assert len(core._subs) <= core.max_subscribers
            assert len(core._subs) == 1  # the fuzz never took a lease
            async with PublisherClient("real", [merger.address], epsilon=EPS, delta=DELTA,
                                       n=N) as pub:
                for i in range(20):
                    await pub.publish(b"%d" % i)
            got: list[int] = []
            while len(got) < 20:
                d = await asyncio.wait_for(sub.get(), 5)
                if d.proc == "real":
                    got.append(d.msg)
            assert got == list(range(20))
        finally:
            sock.close()
            sub.close()
            merger.close()
        assert errors == []

    asyncio.run(asyncio.wait_for(main(), 60))
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception" not in err


def test_live_subscriber_survives_a_fuzz_and_serves_afterwards(
        capfd: pytest.CaptureFixture[str]) -> None:
    """The subscriber's socket is connected to its merger: the fuzz comes from that
    address (a spoofed merger); the merger's real stream then goes on, in order."""
    count = 20_000

    async def main() -> None:
        errors = collect_errors()
        fake = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        fake.bind(("127.0.0.1", 0))
        fake.setblocking(False)
        sub = SubscriberClient(fake.getsockname(), name="s")
        await sub.start()
        try:
            pub = Publisher("real", EPS, DELTA, N, FrameCodec())
            seq = 0

            def next_fwd() -> bytes:
                nonlocal seq
                _, stamp, _ = pub.publish(b"%d" % seq, now=sub.clock.now())
                message = Published("real", seq, EPS, DELTA, N, stamp, b"%d" % seq)
                seq += 1
                return FrameCodec().seal(KIND_PUBSUB, encode_fwd("m", seq - 1, message,
                                                                 DELTA + 3 * EPS))

            await asyncio.sleep(0.02)
            peer = sub._transport.get_extra_info("sockname") if sub._transport else None
            assert peer is not None
            fake.sendto(next_fwd(), peer)
            rng = random.Random(4)
            frames = templates(sub.clock.now())
            for i in range(count):
                try:
                    fake.sendto(mutate(rng, rng.choice(frames)), peer)
                except BlockingIOError:
                    pass
                if i % 50 == 0:  # paced: the point is what is read, not dropped
                    await asyncio.sleep(0.001)
            await asyncio.sleep(0.3)
            core = sub.core
            assert core.statistics().waiting <= core.max_waiting
            for _ in range(20):
                fake.sendto(next_fwd(), peer)
                await asyncio.sleep(0.001)
            got: list[int] = []
            while len(got) < 21:
                d = await asyncio.wait_for(sub.get(), 5)
                if d.proc == "real":
                    got.append(d.msg)
            assert got == list(range(21))
        finally:
            sub.close()
            fake.close()
        assert errors == []

    asyncio.run(asyncio.wait_for(main(), 60))
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception" not in err


def drain_bytes(sock: socket.socket) -> int:
    total = 0
    while True:
        try:
            total += len(sock.recv(65536))
        except BlockingIOError:
            return total


@pytest.mark.parametrize("key", [None, KEY])
def test_worst_ratio_to_an_unvalidated_address_is_at_most_3(key: bytes | None) -> None:
    """Per message type, frames sent to a live merger from victim sockets (a spoofed
    source: another local socket), sealed as a replayed capture would be; then a
    60 KB publication. Bytes that reach the victims over bytes they sent."""

    async def main() -> dict[str, float]:
        merger = MergerServer("m", epsilon=EPS, delta=DELTA, n=N, key=key)
        await merger.start()
        codec = FrameCodec(Keyring(Key(key))) if key else FrameCodec()
        victims = []
        for _ in range(5):
            v = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            v.bind(("127.0.0.1", 0))
            v.setblocking(False)
            victims.append(v)
        ratios: dict[str, float] = {}
        try:
            now = merger.clock.now()
            pub = Publisher("p", EPS, DELTA, N, codec)
            _, stamp, pub_frame = pub.publish(b"x" * 100, now=now)
            message = Published("p", 0, EPS, DELTA, N, stamp, b"x")
            kinds = {
                "SUB": codec.seal(KIND_PUBSUB, encode_sub(1, "s")),
                "SUB long name": codec.seal(KIND_PUBSUB, encode_sub(1, "s" * 64)),
                "SUB merger role": codec.seal(KIND_PUBSUB, encode_sub(2, "s")),
                "SUB bad token": codec.seal(KIND_PUBSUB, encode_sub(1, "s", b"t" * 16)),
                "PUB": pub_frame,
                "FWD": codec.seal(KIND_PUBSUB, encode_fwd("l", 0, message, DELTA)),
                "CHAL": codec.seal(KIND_PUBSUB, encode_challenge(b"c" * 16)),
                "junk": b"\x01\x04\x00\x00\x03",
            }
            for kind, frame in kinds.items():
                for v in victims:
                    for _ in range(4):
                        v.sendto(frame, merger.address)
                await asyncio.sleep(0.05)
                back = max(drain_bytes(v) for v in victims)
                ratios[kind] = back / (4 * len(frame))
            # the attack of the finding: leases asked for the victims, then 60 KB PUBs
            sent = 0
            for v in victims:
                frame = kinds["SUB"]
                v.sendto(frame, merger.address)
                sent += len(frame)
            async with PublisherClient("big", [merger.address], epsilon=EPS, delta=DELTA,
                                       n=N, key=key) as big:
                for _ in range(5):
                    await big.publish(b"B" * 60_000)
            await asyncio.sleep(DELTA / 1000 * 3)
            ratios["SUB then 60 KB PUBs"] = sum(drain_bytes(v) for v in victims) / sent
            assert merger.statistics()["subscribers"] == 0
        finally:
            for v in victims:
                v.close()
            merger.close()
        return ratios

    ratios = asyncio.run(asyncio.wait_for(main(), 30))
    print("worst bytes-out/bytes-in per type", "key" if key else "no key", ratios)
    assert max(ratios.values()) <= 3, ratios
    assert ratios["SUB"] > 0  # the challenge did go back


def test_merger_refuses_a_public_address_without_a_key(
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    fake_public(monkeypatch, _pubsub)

    async def main() -> None:
        m = MergerServer("m", epsilon=EPS, delta=DELTA, host="192.0.2.1")
        with pytest.raises(UsageError, match="--host"):
            await m.start()
        assert m._transport is None
        for kwargs in ({"insecure": True}, {"key": KEY}):
            m = MergerServer("m", epsilon=EPS, delta=DELTA, host="192.0.2.1", **kwargs)
            await m.start()
            m.close()

    asyncio.run(main())
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("timebound: warning: pubsub merge listens")


def test_service_id_is_passed_to_every_codec() -> None:
    assert MergerServer("m", epsilon=EPS, delta=DELTA, key=KEY,
                        service="feed").core.codec.service == "feed"
    assert SubscriberClient(("127.0.0.1", 9), key=KEY,
                            service="feed").core.codec.service == "feed"
    assert PublisherClient("p", [("127.0.0.1", 9)], epsilon=EPS, delta=DELTA, key=KEY,
                           service="feed").core.codec.service == "feed"
    pub = Publisher("p", EPS, DELTA, N, FrameCodec(Keyring(Key(KEY)), "feed"))
    _, _, frame = pub.publish(b"x", now=1000)
    other: MergerNode[str] = MergerNode("m", EPS, DELTA, N, FrameCodec(Keyring(Key(KEY)),
                                                                      "other"))
    other.receive(frame, "p", now=1000)
    assert other.statistics().unauthenticated == 1 and other.statistics().received == 0
    assert MAX_SUBSCRIBERS == 1024  # the documented default bound on leases


def test_pending_messages_are_bounded() -> None:
    merger: MergerNode[str] = MergerNode("m", EPS, DELTA, N, FrameCodec(), max_pending=2)
    pub = Publisher("p", EPS, DELTA, N, FrameCodec())
    for i in range(3):
        _, _, frame = pub.publish(b"%d" % i, now=1000 + i)
        merger.receive(frame, "p", now=1000 + i)
    stats = merger.statistics()
    assert stats.buffered == 2 and stats.overflow == 1
