"""The RPC core's hot path, its receiver option and its refusal extension point
: ``parse`` agrees with the reference decoder, a server over a
``ClassifiedReceiver`` built from a ``ReceiverConfig`` (classes, recovery grace,
reorder window) keeps every call at most once, ``on_refused`` sees what Fig. 3-1
ignores, ``Client.abandon``, class storages across a change of ``--classes``, and
``rpc serve``'s receiver options."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from timebound.core.atmostonce import (
    ClassifiedReceiver,
    Fixed,
    MemoryStorage,
    Receiver,
    ReceiverConfig,
    StableLatest,
    StableRecord,
    Verdict,
    build_receiver,
)
from timebound.core.rpc import Call, Client, Policy, Reply, ReplyAck, Server
from timebound.core.rpc._messages import _decode_reference, decode, parse
from timebound.errors import MalformedDatagram, ProtocolUsageError
from timebound.net import RpcClient, RpcServer
from timebound.net._server import class_storages
from timebound.net.cli import add_rpc_parser, receiver_options
from timebound.storage import FileStorage

CONFIG = ReceiverConfig("fixed", rho=100, gc_every=10, resilient=True, beta=50,
                        latest_every=10, recovery_grace=30, reorder_window=4)


def _outcome(fn: object, data: bytes) -> object:
    try:
        return fn(data)  # type: ignore[operator]
    except MalformedDatagram:
        return "malformed"


GOOD = [Call("c", 5, b"xy").encode(), Call("c", 5, None).encode(),
        Reply("conn", 1, b"").encode(), ReplyAck("é", 2**64 - 1).encode()]


@given(st.one_of(st.binary(max_size=40),
                 st.sampled_from(GOOD).flatmap(
                     lambda g: st.tuples(st.just(g), st.integers(0, len(g)),
                                         st.integers(0, 255)).map(
                         lambda t: t[0][:t[1]] + bytes((t[2],)) + t[0][t[1] + 1:]))))
def test_parse_agrees_with_the_reference_decoder(data: bytes) -> None:
    assert _outcome(decode, data) == _outcome(_decode_reference, data)


def test_parse_rejects_every_truncation() -> None:
    for good in GOOD:
        assert parse(good)[0] == good[0]
        for cut in range(len(good)):
            with pytest.raises(MalformedDatagram):
                parse(good[:cut])


def _classified(storages: list[MemoryStorage] | None = None) -> ClassifiedReceiver:
    stores = storages if storages is not None else [MemoryStorage() for _ in range(3)]
    receiver = build_receiver(CONFIG, list(stores), start=0)
    assert isinstance(receiver, ClassifiedReceiver)
    return receiver


def test_server_over_classes_with_grace_and_window_runs_each_call_once() -> None:
    storages = [MemoryStorage() for _ in range(3)]
    server: Server[str] = Server(receiver=_classified(storages))
    runs: list[tuple[str, int]] = []
    conns = [f"client.{i}" for i in range(12)]
    assert len({id(server._class_of(c)) for c in conns}) == 3  # every class is used
    now = 1
    for ts in range(1, 30):
        now = ts
        for conn in conns:
            for copy in range(2):  # every call arrives twice
                out = server.receive(Call(conn, ts, b"p").encode(), f"peer-{conn}", now=now)
                for start in out.starts:
                    runs.append((start.conn, start.ts))
                    done = server.complete(start, b"r", now=now)
                    assert len(done.sends) == 1
                if copy:
                    assert not out.starts
    assert len(runs) == len(set(runs)) == 12 * 29
    # GC per class: replies older than rho' and calls <= now - rho are forgotten.
    server.handle_timer(now=500)
    assert server.statistics().entries == 0
    assert all(r.upper == 29 for r in server.receiver.receivers)  # type: ignore[union-attr]
    # A crash and a restart: nothing accepted before runs again.
    server.crash(now=510)
    server.restart(now=520)
    for conn in conns:
        assert not server.receive(Call(conn, 29, b"p").encode(), "p", now=521).starts
    stats = server.statistics()
    assert stats.started == 12 * 29 and stats.receiver.entries == 0


def test_server_receiver_option_checks() -> None:
    receiver = Receiver(Fixed(10), gc_every=5)
    with pytest.raises(ProtocolUsageError):
        Server(receiver=receiver, rho=10)
    Server(receiver=receiver)
    with pytest.raises(ProtocolUsageError):  # its retain hook is taken
        Server(receiver=receiver)
    with pytest.raises(ProtocolUsageError):
        Server()


def test_on_refused_sees_what_fig_3_1_ignores() -> None:
    seen: list[tuple[str, int, Verdict]] = []

    def hook(conn: str, ts: int, verdict: Verdict, now: int, peer: str) -> bytes | None:
        seen.append((conn, ts, verdict))
        return b"refused" if verdict is not Verdict.EARLY else None

    storage = MemoryStorage()
    server: Server[str] = Server(rho=100, gc_every=10, on_refused=hook,
                                 resilience=StableLatest(storage, 50, 10))
    plain: Server[str] = Server(rho=100, gc_every=10,
                                resilience=StableLatest(MemoryStorage(), 50, 10))
    for s in (server, plain):
        (start,) = s.receive(Call("a", 5, b"p").encode(), "p", now=5).starts
        s.complete(start, b"r", now=5)
    early = Call("b", 10**6, b"p").encode()
    probe = Call("z", 7, None).encode()
    assert server.receive(early, "p", now=6).sends == ()
    assert [o.datagram for o in server.receive(probe, "p", now=6).sends] == [b"refused"]
    assert plain.receive(early, "p", now=6).sends == ()
    assert plain.receive(probe, "p", now=6).sends == ()
    assert seen == [("b", 10**6, Verdict.EARLY), ("z", 7, Verdict.STALE)]
    # The probe of the entry's own call still gets the duplicate answer (the reply).
    (reply,) = server.receive(Call("a", 5, None).encode(), "p", now=7).sends
    assert decode(reply.datagram) == Reply("a", 5, b"r")
    assert server.statistics().ignored == plain.statistics().ignored == 2


def test_client_abandon() -> None:
    client = Client("c", Policy(interval=10, give_up_after=100))
    calling = client.call(b"x", now=1, conn="k")
    assert not client.abandon("k", calling.id.ts + 1)
    assert client.abandon("k", calling.id.ts)
    assert not client.abandon("k")
    assert client.next_deadline() is None
    # A reply after abandoning is ignored (and still REPLY-ACKed).
    out = client.receive(Reply("k", calling.id.ts, b"r").encode(), now=2)
    assert out.outcomes == () and decode(out.datagrams[0]) == ReplyAck("k", calling.id.ts)


def test_class_storages_keep_the_bound_across_a_change_of_classes(tmp_path: Path) -> None:
    path = str(tmp_path / "latest.json")
    three = class_storages(path, 3)
    for k, store in enumerate(three):
        store.write(StableRecord(latest=1000 + k, estimate=7, p=1))
    one = class_storages(path, 1)  # fewer classes: class 0 takes the largest latest
    record = one[0].read()
    assert record is not None and record.latest == 1002
    five = class_storages(path, 5)  # more classes: new ones start from it too
    latests = [s.read().latest for s in five]  # type: ignore[union-attr]
    assert latests == [1002] * 5
    fresh = str(tmp_path / "fresh.json")
    assert [s.read() for s in class_storages(fresh, 2)] == [None, None]
    assert FileStorage(fresh).read() is None


def _serve_args(*extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_rpc_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["rpc", "serve", "m:a", "--storage", "s", *extra])


def test_serve_passes_classes_grace_and_reorder_window() -> None:
    config, classes = receiver_options(_serve_args(
        "--classes", "4", "--recovery-grace", "1ms", "--reorder-window", "8"))
    assert classes == 4 and config.recovery_grace == 1000 and config.reorder_window == 8
    assert config.resilient and config.rho is not None
    config, classes = receiver_options(_serve_args())
    assert classes == 1 and config.recovery_grace == 0 and config.reorder_window == 1


def test_live_server_with_classes(tmp_path: Path) -> None:
    config = ReceiverConfig("fixed", rho=300 * 10**6, gc_every=10**6, resilient=True,
                            beta=2 * 10**6, latest_every=10**6, recovery_grace=10**6,
                            reorder_window=4)
    runs: list[bytes] = []

    def record(payload: bytes) -> bytes:
        runs.append(payload)
        return payload

    async def main() -> None:
        async with RpcServer({"record": record}, storage=str(tmp_path / "latest.json"),
                             receiver=config, classes=4) as server:
            async with RpcClient(server.address) as client:
                replies = await asyncio.gather(
                    *(client.call("record", str(i).encode()) for i in range(40)))
            assert sorted(replies) == sorted(str(i).encode() for i in range(40))
            stats = server.statistics()
            assert stats["executions"] == 40 and stats["latest"] is not None
        assert sorted(runs) == sorted(replies)
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            "latest.json", "latest.json.1", "latest.json.2", "latest.json.3"]

    asyncio.run(main())


def test_short_replies_get_no_reply_ack() -> None:
    client = Client("c", Policy(interval=10, give_up_after=100), reply_ack_min_bytes=4)
    short = client.call(b"x", now=1, conn="a").id
    long = client.call(b"x", now=1, conn="b").id
    out = client.receive(Reply("a", short.ts, b"abc").encode(), now=2)
    assert out.datagrams == () and [o.result for o in out.outcomes] == [b"abc"]  # type: ignore[union-attr]
    out = client.receive(Reply("b", long.ts, b"abcd").encode(), now=2)
    assert [decode(d) for d in out.datagrams] == [ReplyAck("b", long.ts)]
    assert client.statistics().completed == 2
    with pytest.raises(ProtocolUsageError):
        Client("c", Policy(interval=10, give_up_after=100), reply_ack_min_bytes=-1)


def test_cancelled_call_frees_its_connection() -> None:
    import socket

    async def main() -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
            silent.bind(("127.0.0.1", 0))  # receives, never answers
            async with RpcClient(silent.getsockname()) as client:
                task = asyncio.ensure_future(client.call("p", timeout=30.0))
                await asyncio.sleep(0.01)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                assert client.caller.client.outstanding() == ()
                from timebound.net import CallTimeout

                with pytest.raises(CallTimeout):  # the same connection id, reused
                    await client.call("p", timeout=0.05)
                assert len(client._idle) == 1

    asyncio.run(main())
