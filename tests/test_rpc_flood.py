"""Floods that cannot lock callers out: the RPC table forgets its oldest finished
calls early instead of refusing new callers, within an entry bound and a byte bound
that counts stored replies (``core/rpc/_server.py``, "A full table forgets ...";
``core/atmostonce/_table.py``, "Bounds").

- A property of the core ``Server`` over hostile executions (floods of new
  connection ids, duplicates and late copies, completions with replies of any size,
  REPLY-ACKs, crashes of a resilient server, hash classes, a clock stepping back):
  no call ever starts twice; every class stays within its entries and its bytes,
  and its byte count is exactly its entries' estimate plus their stored replies;
  the RPC state and the receiver's table hold the same connections; a new call is
  refused ``FULL`` only when every entry of its class is a call still computing.
- Live, on loopback, a real keyless ``RpcServer``: a flood of calls from new
  connection ids at 1.5x the capacity leaves new honest callers served; large
  replies never take more than the byte bound.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from timebound.core.atmostonce import (
    ClassifiedReceiver,
    Fixed,
    MemoryStorage,
    Receiver,
    ReceiverConfig,
    StableLatest,
    Verdict,
    crc32_classifier,
)
from timebound.core.rpc import Call, ConnState, Policy, ReplyAck, RpcCaller, Server
from timebound.core.rpc._server import ENTRY_BYTES
from timebound.core.wire import FrameCodec
from timebound.errors import UsageError
from timebound.net import RpcClient, RpcServer
from timebound.net._defaults import DEFAULT_MAX_BYTES, default_receiver
from timebound.net.cli import add_rpc_parser, receiver_options

MS = 1000  # ticks (µs) per millisecond


# -- the core: a property over hostile executions ----------------------------------


def _check_bounds(server: Server[str], receivers: list[Receiver]) -> None:
    entries = server._entries
    in_tables: set[str] = set()
    for receiver in receivers:
        table = receiver._table
        in_tables |= set(table)
        if receiver.capacity is not None:
            assert receiver.entries <= receiver.capacity
        if receiver.max_bytes is not None:
            assert receiver.bytes_used <= receiver.max_bytes
        expected = sum(ENTRY_BYTES + len(conn) + len(entries[conn].reply or b"")
                       for conn in table if conn in entries)
        assert receiver.bytes_used == expected
    # Same connections on both sides (no RPC state left behind by an eviction; an
    # entry the receiver holds without RPC state would be one never started).
    assert set(entries) == in_tables


@settings(max_examples=200, deadline=None)
@given(data=st.data(), classes=st.integers(1, 2), resilient=st.booleans())
def test_flood_never_starts_a_call_twice_and_stays_within_bounds(
        data: st.DataObject, classes: int, resilient: bool) -> None:
    capacity = data.draw(st.integers(1, 4), label="capacity")
    max_bytes = data.draw(st.integers(ENTRY_BYTES + 4, 3 * ENTRY_BYTES + 400),
                          label="max_bytes")
    storages = [MemoryStorage() for _ in range(classes)]
    receivers = [Receiver(Fixed(data.draw(st.integers(5, 80), label="rho")),
                          gc_every=data.draw(st.integers(1, 20), label="gc"),
                          resilience=StableLatest(storage, 50, 10) if resilient else None,
                          capacity=capacity, max_bytes=max_bytes) for storage in storages]
    refused: list[tuple[str, Verdict]] = []

    def on_refused(conn: str, ts: int, verdict: Verdict, now: int, peer: str) -> None:
        refused.append((conn, verdict))

    node = receivers[0] if classes == 1 else ClassifiedReceiver(
        receivers, crc32_classifier(classes))
    server: Server[str] = Server(receiver=node, on_refused=on_refused,
                                 kappa=data.draw(st.integers(0, 30), label="kappa"))
    started: set[tuple[str, int]] = set()
    running: list[Any] = []  # StartCalls not yet completed
    sent: list[tuple[str, int]] = []
    fresh = 0
    now = 100
    for _ in range(data.draw(st.integers(1, 60), label="steps")):
        now += data.draw(st.integers(-10, 25), label="dt")
        action = data.draw(st.sampled_from(
            ["flood", "flood", "flood", "honest", "copy", "complete", "complete",
             "reply_ack", "tick", "crash"]), label="action")
        if action == "tick":
            server.handle_timer(now=now)
        elif action == "crash":
            server.handle_timer(now=now)
            if any(receiver.down for receiver in receivers):
                for receiver in receivers:  # each class recovers at its own time
                    if receiver.down:
                        receiver.restart(now=now)
            elif resilient:
                server.crash(now=now, down=data.draw(st.one_of(st.none(), st.integers(1, 30))))
                running.clear()
        elif action == "complete" and running:
            call = running.pop(data.draw(st.integers(0, len(running) - 1), label="which"))
            size = data.draw(st.integers(0, 500), label="reply size")
            server.complete(call, b"r" * size, now=now)
        elif action == "reply_ack" and sent:
            conn, ts = data.draw(st.sampled_from(sent), label="acked")
            server.receive(ReplyAck(conn, ts).encode(), "p", now=now)
        elif action in ("flood", "honest", "copy"):
            if action == "copy" and sent:
                conn, ts = data.draw(st.sampled_from(sent), label="copy of")
            else:
                if action == "flood":
                    conn = f"f{fresh}"
                    fresh += 1
                else:
                    conn = data.draw(st.sampled_from(["a", "b", "c"]), label="conn")
                ts = max(1, now + data.draw(st.integers(-30, 30), label="skew"))
            refused.clear()
            out = server.receive(Call(conn, ts, b"p").encode(), "p", now=now)
            sent.append((conn, ts))
            for call in out.starts:
                assert (call.conn, call.ts) not in started, ("started twice", call)
                started.add((call.conn, call.ts))
                running.append(call)
            if refused and refused[0][1] is Verdict.FULL:
                owner = (node if isinstance(node, Receiver)
                         else node.receiver_for(conn))
                assert all(server.state(c) is not None
                           and server.state(c)[0] is ConnState.COMPUTING  # type: ignore[index]
                           for c in owner._table), "FULL with an entry that may go"
        _check_bounds(server, receivers)


def test_full_table_forgets_the_oldest_finished_call_keeps_running_ones() -> None:
    server: Server[str] = Server(rho=1000, gc_every=100, capacity=2)
    first = server.receive(Call("a", 10, b"").encode(), "p", now=10).starts[0]
    server.receive(Call("b", 11, b"").encode(), "p", now=11)
    server.complete(first, b"done", now=12)              # a: REPLYING, b: computing
    third = server.receive(Call("c", 13, b"").encode(), "p", now=13)
    assert len(third.starts) == 1                         # a forgotten early
    assert server.state("a") is None and server.receiver.upper == 10
    assert server.state("b") == (ConnState.COMPUTING, 11)
    # A late copy of a's call is stale: it never runs again.
    assert server.receive(Call("a", 10, b"").encode(), "p", now=14).starts == ()


def test_reply_over_the_byte_bound_is_sent_once_not_stored() -> None:
    server: Server[str] = Server(rho=1000, gc_every=100, max_bytes=ENTRY_BYTES + 1000)
    call = server.receive(Call("a", 10, b"").encode(), "p", now=10).starts[0]
    out = server.complete(call, b"x" * 2000, now=11)
    assert len(out.sends) == 1                            # the REPLY goes out
    assert server.state("a") is None and server.receiver.bytes_used == 0
    assert server.receive(Call("a", 10, b"").encode(), "p", now=12).sends == ()


def test_large_replies_never_exceed_the_byte_bound() -> None:
    bound = 4 * (ENTRY_BYTES + 60_000)
    server: Server[str] = Server(rho=10**9, gc_every=10**6, max_bytes=bound)
    receiver = server.receiver
    assert isinstance(receiver, Receiver)
    peak = 0
    for i in range(40):
        call = server.receive(Call(f"c{i:02d}", 10 + i, b"").encode(), "p",
                              now=10 + i).starts[0]
        server.complete(call, b"x" * 59_000, now=10 + i)
        stored = sum(len(e.reply or b"") for e in server._entries.values())
        peak = max(peak, receiver.bytes_used)
        assert receiver.bytes_used <= bound and stored <= bound
    assert peak > bound - (ENTRY_BYTES + 60_000)          # the bound was reached
    assert server.statistics().entries == 4 and receiver.forced == 36


# -- live, on loopback -----------------------------------------------------------


async def _flood(server: RpcServer, count: int) -> None:
    """``count`` CALLs from new connection ids, from one socket that never reads
    its answers (never acknowledges a reply), paced so the loopback buffers keep
    them all; returns once the server has decided them all."""
    flooder = RpcCaller("flood", Policy(10**6, 10**9), FrameCodec(None))
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    try:
        calls = server.statistics()["calls"] or 0
        for i in range(count):
            _ts, (datagram,) = flooder.call("echo", b"f", now=server.clock.now(),
                                            conn=f"flood.{i}")
            sock.sendto(datagram, server.address)
            if i % 25 == 24:
                await asyncio.sleep(0.005)
        for _ in range(500):  # at most 5 s: every CALL decided
            if (server.statistics()["calls"] or 0) >= calls + count:
                break
            await asyncio.sleep(0.01)
    finally:
        sock.close()


def test_flood_at_one_and_a_half_capacity_leaves_new_callers_served() -> None:
    capacity = 200

    async def main() -> dict[str, Any]:
        async with RpcServer({"echo": lambda p: p}, capacity=capacity, workers=0) as server:
            await _flood(server, capacity * 3 // 2)
            flooded = server.statistics()
            served = 0
            for i in range(10):
                async with RpcClient(server.address) as client:
                    try:
                        if await client.call("echo", b"honest %d" % i, timeout=2.0) \
                                == b"honest %d" % i:
                            served += 1
                    except Exception:  # a refusal or a timeout: not served
                        pass
            receiver = server.service.server.receiver
            assert isinstance(receiver, Receiver)
            return {"flooded": flooded, "served": served, "after": server.statistics(),
                    "bytes": receiver.bytes_used, "max_bytes": receiver.max_bytes,
                    "forced": receiver.forced}

    seen = asyncio.run(main())
    flooded, after = seen["flooded"], seen["after"]
    print(f"\nflood: {flooded['calls']} calls, {flooded['executions']} executed, "
          f"{flooded['overloaded']} overloaded, table {flooded['table_size']}; "
          f"honest served {seen['served']}/10; forgotten early {seen['forced']}; "
          f"table {after['table_size']}/{capacity}, {seen['bytes']} bytes")
    assert flooded["calls"] >= capacity * 3 // 2 - 10  # the flood arrived
    assert flooded["executions"] > capacity            # more than the table holds ran
    assert seen["served"] >= 9
    assert after["table_size"] <= capacity
    assert seen["max_bytes"] is not None and seen["bytes"] <= seen["max_bytes"]


def test_large_replies_stay_within_the_byte_bound_live() -> None:
    bound = 1 << 20  # 1 MiB: about 16 replies of 60 KB
    config = ReceiverConfig("fixed", rho=300_000 * MS, gc_every=1000 * MS, resilient=True,
                            beta=2000 * MS, latest_every=1000 * MS, max_bytes=bound)

    async def main() -> tuple[int, int, int]:
        async with RpcServer({"big": lambda p: b"x" * 60_000}, receiver=config,
                             workers=0) as server:
            receiver = server.service.server.receiver
            assert isinstance(receiver, Receiver)
            peak = served = 0
            # reply_ack_min_bytes above the reply: no REPLY-ACK, so every reply
            # stays stored until the bound forces it out; each call on a new
            # connection (a new call on a connection would discard its reply).
            async with RpcClient(server.address, reply_ack_min_bytes=1 << 17) as client:
                for _ in range(40):
                    got = await client.call("big", b"", timeout=2.0, new_connection=True)
                    served += len(got) == 60_000
                    peak = max(peak, receiver.bytes_used)
                    assert receiver.bytes_used <= bound
            return served, peak, receiver.forced

    served, peak, forced = asyncio.run(main())
    assert served == 40
    assert bound - 2 * 61_000 < peak <= bound and forced >= 20


# -- the command line ------------------------------------------------------------


def _serve_args(*extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_rpc_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["rpc", "serve", "m:a", "--storage", "s", *extra])


def test_serve_max_bytes_is_split_over_the_classes() -> None:
    """``RpcServer(max_bytes=)`` (what ``rpc serve --max-bytes`` passes) is split over
    the classes; None takes a config's own bound, else the default; 0 is unbounded."""
    _config, classes = receiver_options(_serve_args("--max-bytes", "1000000", "--classes", "4"))
    assert classes == 4
    server = RpcServer({"m": lambda p: p}, max_bytes=1_000_000, classes=4)
    assert server.config.max_bytes == 250_000
    assert server.config.new_receiver().max_bytes == 250_000
    assert RpcServer({"m": lambda p: p}).config.max_bytes == DEFAULT_MAX_BYTES
    assert RpcServer({"m": lambda p: p}, classes=4).config.max_bytes == DEFAULT_MAX_BYTES // 4
    assert RpcServer({"m": lambda p: p}, max_bytes=0).config.max_bytes is None
    own = ReceiverConfig("fixed", rho=1000, gc_every=100, max_bytes=5_000)
    assert RpcServer({"m": lambda p: p}, receiver=own).config.max_bytes == 5_000
    with pytest.raises(UsageError, match="max_bytes"):
        RpcServer({"m": lambda p: p}, max_bytes=-1)
    with pytest.raises(UsageError, match="--max-bytes"):
        receiver_options(_serve_args("--max-bytes", "-1"))
    assert default_receiver().max_bytes == DEFAULT_MAX_BYTES
    assert default_receiver(4).max_bytes == DEFAULT_MAX_BYTES // 4
    assert DEFAULT_MAX_BYTES >= 64 << 20
