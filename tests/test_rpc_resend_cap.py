"""A stored reply goes out a bounded number of times (``core/rpc/_server.py``,
``MAX_RESENDS``): once at completion, then at most ``MAX_RESENDS`` times more (the
first at once, the next at least ``resend_pace`` after the one before), to every duplicate and probe of its call together,
whoever sends them and whatever address validated. Anyone can replay a captured CALL
or forge a 15-byte probe from a victim's address; without the bound each copy drew
the whole reply (4,335x per datagram against a validated address).

The core rule, a property over hostile copies, and the live figure: bytes a
validated address receives for a flood of probes of one call, against the bytes
that provoked them."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from timebound.core.rpc import MAX_RESENDS, Call, Reply, ReplyAck, Server, decode
from timebound.core.rpc._messages import TRUNCATED_TYPE

REPLY = b"r" * 1000
#: The documented bound (docs/wire.md, docs/net.md): a reply is re-sent at most 3 times.
RESENDS = 3


def test_the_bound_is_the_documented_one() -> None:
    assert MAX_RESENDS == RESENDS


def _server(pace: int = 0) -> Server[str]:
    return Server(rho=10_000, gc_every=100_000, resend_pace=pace)


def _replies(out: object) -> int:
    return sum(isinstance(decode(o.datagram), Reply) for o in out.sends)  # type: ignore[attr-defined]


def _probe(conn: str, ts: int) -> bytes:
    raw = conn.encode()
    return bytes((TRUNCATED_TYPE, len(raw))) + raw + struct.pack(">Q", ts)


def test_a_reply_is_resent_at_most_max_resends_times() -> None:
    server = _server()
    (start,) = server.receive(Call("c", 10, b"x").encode(), "client", now=20).starts
    assert _replies(server.complete(start, REPLY, now=21)) == 1
    copies = [_replies(server.receive(Call("c", 10, b"x").encode(), "victim", now=22 + i))
              for i in range(10)]
    assert copies == [1] * RESENDS + [0] * (10 - RESENDS)
    assert _replies(server.receive(_probe("c", 10), "victim", now=40)) == 0
    stats = server.statistics()
    assert stats.retransmitted == RESENDS and stats.withheld == 10 - RESENDS + 1


def test_resends_are_paced() -> None:
    server = _server(pace=5)
    (start,) = server.receive(Call("c", 10, b"x").encode(), "client", now=20).starts
    server.complete(start, REPLY, now=20)
    sent = [now for now in range(20, 60)
            if _replies(server.receive(_probe("c", 10), "client", now=now))]
    assert sent == [20, 25, 30]  # the first at once, then 5 apart


def test_a_new_call_on_the_connection_has_its_own_resends() -> None:
    server = _server()
    for ts in (10, 11):
        (start,) = server.receive(Call("c", ts, b"x").encode(), "client", now=ts).starts
        server.complete(start, REPLY, now=ts)
        got = sum(_replies(server.receive(_probe("c", ts), "client", now=ts))
                  for _ in range(6))
        assert got == RESENDS


@given(st.lists(st.tuples(st.sampled_from(["call", "probe", "call", "probe", "ack", "new"]),
                          st.integers(0, 3)), min_size=8, max_size=80))
def test_no_call_draws_more_than_one_plus_max_resends_replies(steps: list[tuple[str, int]]
                                                             ) -> None:
    """Copies, probes, REPLY-ACKs and new calls in any order: every call's reply goes
    out at most 1 + RESENDS times, and each call runs once."""
    server = _server(pace=2)
    sent: dict[int, int] = {}
    ts, now = 1, 1
    runs: dict[int, int] = {}
    for kind, gap in steps:
        now += gap
        if kind == "new":
            ts += 1
        datagram = {"call": Call("c", ts, b"x").encode(), "new": Call("c", ts, b"x").encode(),
                    "probe": _probe("c", ts), "ack": ReplyAck("c", ts).encode()}[kind]
        out = server.receive(datagram, "anyone", now=now)
        for start in out.starts:
            runs[start.ts] = runs.get(start.ts, 0) + 1
            sent[start.ts] = sent.get(start.ts, 0) + _replies(
                server.complete(start, REPLY, now=now))
        sent[ts] = sent.get(ts, 0) + _replies(out)
    assert all(n <= 1 + RESENDS for n in sent.values()), sent
    assert all(n == 1 for n in runs.values()), runs


def _codec(key: bytes | None) -> Any:
    """The frame codec of a client of a server with ``key`` (None: keyless)."""
    from timebound.core.wire import FrameCodec, Key, Keyring

    return FrameCodec(None if key is None else Keyring(Key(key)))


#: The live tests run keyless and keyed: validation is by address in both.
KEYS = [None, b"k" * 32]


async def _validate_by_a_large_reply(server: Any, clock: Any, big: bytes,
                                     key: bytes | None = None
                                     ) -> tuple[socket.socket, int]:
    """A raw socket that made one call ``big`` (its reply ``big``, over 3x its CALL)
    through the real protocol: challenged, it validated its address and got the
    reply. Returns the socket (nothing left to read on it) and the call's ts."""
    from timebound.core.rpc import Answered, Policy, RpcCaller

    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    caller = RpcCaller("v", Policy(interval=50_000, give_up_after=5_000_000), _codec(key))
    ts, frames = caller.call("big", b"", now=clock.now(), conn="victim")
    answer = None
    for _ in range(50):
        for frame in frames:
            await loop.sock_sendto(sock, frame, server.address)
        try:
            data = await asyncio.wait_for(loop.sock_recv(sock, 65536), 0.2)
        except TimeoutError:
            frames = caller.handle_timer(now=clock.now()).datagrams
            continue
        out = caller.receive(data, now=clock.now())
        answer = next((o for o in out.outcomes if isinstance(o, Answered)), answer)
        if answer is not None:
            break
        frames = out.datagrams
    assert answer is not None and answer.data == big
    await asyncio.sleep(0.05)
    _drain(sock)
    return sock, ts


def _drain(sock: socket.socket) -> int:
    """Bytes waiting on ``sock``, read and counted."""
    received = 0
    while True:
        try:
            received += len(sock.recv(65536))
        except BlockingIOError:
            return received


@pytest.mark.parametrize("key", KEYS)
def test_a_validated_address_flooded_with_probes_gets_the_reply_four_times(
        key: bytes | None) -> None:
    """Live, keyless, on loopback: a raw socket makes one call with a 30 KB reply
    through the real protocol (the server challenges it, it validates its address,
    gets the reply); then 1,000 probes of that call come from its address (what a
    spoofer of a validated address sends). Back come at most the reply's
    ``RESENDS`` resends, not one reply per probe."""
    from timebound.core.wire import KIND_RPC
    from timebound.net import Clock, RpcServer

    big = b"z" * 30_000

    async def main() -> tuple[int, int, int, int, int]:
        clock = Clock()
        async with RpcServer({"big": lambda _: big}, key=key) as server:
            loop = asyncio.get_running_loop()
            sock, ts = await _validate_by_a_large_reply(server, clock, big, key)
            validations = server.service.statistics().validations
            probe = _codec(key).seal(KIND_RPC, _probe("victim", ts))
            seen = server.service.calls
            for i in range(1000):
                await loop.sock_sendto(sock, probe, server.address)
                if i % 20 == 19:
                    await asyncio.sleep(0.002)  # the server's socket buffer keeps up
            await asyncio.sleep(0.3)
            received = _drain(sock)
            sock.close()
            withheld = server.service.server.statistics().withheld
            return (received, (server.service.calls - seen) * len(probe), withheld,
                    validations, len(probe))

    received, sent, withheld, validations, size = asyncio.run(main())
    assert validations >= 1  # the address proved it receives: no 3x rule applies to it
    assert sent >= 500 * size  # the server read at least half the probes
    assert 0 < received <= RESENDS * (len(big) + 200)
    assert withheld >= sent // size - RESENDS
    print(f"validated address, {'keyed' if key else 'keyless'}, {sent // size:,} probes read: {sent:,} B in, {received:,} B out "
          f"({received / sent:.1f}x over the flood, at most {RESENDS} replies)")


def test_the_counters_fit_three_times_a_padded_stats_call() -> None:
    """Every counter at its largest (20 digits), keyed (the longest frames): the
    ``timebound.stats`` REPLY is at most 3x the padded CALL of the shortest
    connection id, so a caller's stats call is always answered at once."""
    from timebound.core.rpc import AMPLIFICATION, STATS_PROCEDURE, Policy, RpcCaller
    from timebound.core.rpc._live import _padding_needed
    from timebound.core.rpc._live_messages import INCARNATION_BYTES
    from timebound.core.wire import KIND_RPC, FrameCodec, Key, Keyring
    from timebound.net import RpcServer

    async def counters() -> dict[str, int]:
        async with RpcServer({}) as server:
            return dict.fromkeys(server.statistics(), 2**64 - 1)

    largest = json.dumps(asyncio.run(counters())).encode()
    codec = FrameCodec(Keyring(Key(b"k" * 32)))
    _ts, (call,) = RpcCaller("c", Policy(1000, 10**6), codec).call(
        STATS_PROCEDURE, b"", now=5, conn="c")
    reply = codec.seal(KIND_RPC, bytes((4, 1)) + b"c" + bytes(8 + 4 + 1) + largest
                       + bytes(INCARNATION_BYTES))
    assert len(reply) <= AMPLIFICATION * len(call), (len(reply), len(call))
    # The short answer to an unpadded CALL fits 3x the shortest such CALL too.
    from timebound.core.rpc import Call, encode_call_payload
    bare = codec.seal(KIND_RPC, Call("c", 5, encode_call_payload(STATS_PROCEDURE, b"")).encode())
    short = codec.seal(KIND_RPC, bytes((4, 1)) + b"c" + bytes(8 + 4 + 1)
                       + _padding_needed(STATS_PROCEDURE) + bytes(INCARNATION_BYTES))
    assert len(short) <= AMPLIFICATION * len(bare), (len(short), len(bare))


@pytest.mark.parametrize("key", KEYS)
def test_stats_calls_to_a_validated_address_stay_within_3x(key: bytes | None) -> None:
    """Live, keyless, on loopback. An address validated (a large reply) is then sent
    ``timebound.stats`` CALLs from its address (what anyone forging it, or replaying
    its captured CALL, can send: the built-in keeps no entry, so nothing caps its
    copies). Every answer stays within 3x of its CALL: unpadded CALLs get the short
    error, padded ones the counters (what ``RpcClient`` sends)."""
    from timebound.core.rpc import (
        AMPLIFICATION,
        STATS_PROCEDURE,
        Answered,
        Call,
        Policy,
        RpcCaller,
        Status,
        encode_call_payload,
    )
    from timebound.core.wire import KIND_RPC
    from timebound.net import Clock, RpcClient, RpcServer

    async def main() -> dict[str, tuple[int, int, int]]:
        clock = Clock()
        figures: dict[str, tuple[int, int, int]] = {}
        async with RpcServer({"big": lambda _: b"z" * 30_000}, key=key) as server:
            loop = asyncio.get_running_loop()
            sock, _ts = await _validate_by_a_large_reply(server, clock, b"z" * 30_000, key)
            assert server.service.validated(sock.getsockname(), clock.now())
            caller = RpcCaller("v", Policy(50_000, 5_000_000), _codec(key))
            for name in ("unpadded", "padded"):
                if name == "unpadded":
                    frame = _codec(key).seal(KIND_RPC, Call(
                        "victim", clock.now(), encode_call_payload(STATS_PROCEDURE, b"")
                    ).encode())
                else:
                    _t, (frame,) = caller.call(STATS_PROCEDURE, b"", now=clock.now(),
                                               conn="victim")
                answers = biggest = 0
                ok = name == "unpadded"
                for _ in range(200):
                    await loop.sock_sendto(sock, frame, server.address)
                    await asyncio.sleep(0.001)
                    while True:
                        try:
                            data = sock.recv(65536)
                        except BlockingIOError:
                            break
                        answers += 1
                        biggest = max(biggest, len(data))
                        if not ok:  # the caller hears the counters (once: one call)
                            out = caller.receive(data, now=clock.now())
                            ok = any(isinstance(o, Answered) and o.status == Status.OK
                                     for o in out.outcomes)
                assert ok
                figures[name] = (len(frame), answers, biggest)
            sock.close()
            async with RpcClient(server.address, key=key) as client:  # the library's own call
                assert json.loads(await client.call(STATS_PROCEDURE))["readonly"] >= 400
        return figures

    figures = asyncio.run(main())
    for name, (size, answers, biggest) in figures.items():
        print(f"validated address, {'keyed' if key else 'keyless'}, {name} stats CALL of {size} B: {answers} answers, "
              f"largest {biggest} B ({biggest / size:.2f}x)")
        assert answers >= 150 and biggest <= AMPLIFICATION * size, figures
