"""The sans-IO live RPC (``core.rpc._live``): refusals and their reasons, probes,
deferred REPLY-ACKs. No sockets: the pair is joined by hand with exact times."""

from __future__ import annotations

from timebound.core.atmostonce import MemoryStorage, StableLatest
from timebound.core.rpc import (
    Answered,
    Call,
    Policy,
    Reason,
    Rejected,
    RpcCaller,
    RpcService,
    Status,
    encode_call_payload,
    split_incarnation,
)
from timebound.core.rpc._live_messages import decode_refusal
from timebound.core.wire import KIND_RPC, FrameCodec

RHO = 1000
CODEC = FrameCodec(None)


def _frame(conn: str, ts: int, payload: bytes | None = b"\x01p" + bytes(12)) -> bytes:
    return CODEC.seal(KIND_RPC, Call(conn, ts, payload).encode())


def _refusal(out: object) -> Reason:
    sends = out.sends  # type: ignore[attr-defined]
    assert len(sends) == 1
    opened = CODEC.open(sends[0].datagram)
    assert opened is not None
    return decode_refusal(split_incarnation(opened.body)[0])[2]


def _service(storage: MemoryStorage | None = None, capacity: int | None = None) -> RpcService[str]:
    return RpcService(FrameCodec(None), rho=RHO, gc_every=100,
                      resilience=StableLatest(storage or MemoryStorage(), 500, 100),
                      capacity=capacity, start=10_000)


def test_stale_early_overloaded_refusals() -> None:
    service = _service(capacity=1)
    assert service.receive(_frame("a", 10_000), "p", now=10_000).runs
    assert _refusal(service.receive(_frame("b", 10_001), "p", now=10_001)) is Reason.OVERLOADED
    assert _refusal(service.receive(_frame("c", 99_999), "p", now=10_002)) is Reason.EARLY
    service.handle_timer(now=12_000)  # GC: "a" evicted (its call is done? no: computing)
    stats = service.statistics()
    assert stats.overloaded == 1 and stats.early == 1 and stats.executions == 1


def test_stale_after_gc_and_down_after_restart() -> None:
    storage = MemoryStorage()
    service = _service(storage)
    run = service.receive(_frame("a", 10_000), "p", now=10_000).runs[0]
    service.complete(run, Status.OK, b"", now=10_001)
    service.handle_timer(now=12_100)  # a's call <= now - rho and reply older than rho
    assert service.statistics().upper == 10_000
    assert _refusal(service.receive(_frame("z", 9_000), "p", now=12_100)) is Reason.STALE
    # A new process from the same storage: calls below the recovered bound are `down`.
    latest = storage.record.latest  # type: ignore[union-attr]
    reborn = _service(storage)
    assert reborn.statistics().upper == latest
    assert _refusal(reborn.receive(_frame("a", 10_000), "p", now=12_200)) is Reason.DOWN
    assert _refusal(reborn.receive(_frame("n", latest), "p", now=12_200)) is Reason.DOWN
    # A probe for a call the server lost in the crash: `down` too.
    assert _refusal(reborn.receive(_frame("a", 10_000, None), "p", now=12_200)) is Reason.DOWN
    # After restart + beta a new call is accepted.
    assert reborn.receive(_frame("n", latest + 1), "p", now=latest + 1).runs


def test_caller_rejects_and_defers_reply_acks() -> None:
    service = _service()
    caller = RpcCaller("c", Policy(interval=50, give_up_after=10_000), FrameCodec(None),
                       reply_ack_delay=30)
    _, frames = caller.call("p", b"x", now=10_000, conn="c.1")
    out = service.receive(frames[0], "peer", now=10_000)
    assert out.runs[0].proc == "p" and out.runs[0].args == b"x"
    reply = service.complete(out.runs[0], Status.OK, b"y", now=10_001).sends[0].datagram
    got = caller.receive(reply, now=10_002)
    assert got.outcomes == (Answered("c.1", 10_000, Status.OK, b"y"),)
    assert got.datagrams == ()  # REPLY-ACK deferred
    assert caller.next_deadline() == 10_032
    # A next call on the connection makes it unnecessary.
    _, frames = caller.call("p", b"x", now=10_010, conn="c.1")
    assert caller.reply_acks_saved == 1
    # Far-future clock: early refusal reaches the caller as Rejected.
    _, frames = caller.call("p", b"", now=90_000, conn="c.2")
    refusal = service.receive(frames[0], "peer", now=10_020).sends[0].datagram
    assert caller.receive(refusal, now=10_021).outcomes == (Rejected("c.2", 90_000, Reason.EARLY),)
    # An unanswered REPLY-ACK goes out at its due time.
    _, frames = caller.call("p", b"", now=10_030, conn="c.3")
    run = service.receive(frames[0], "peer", now=10_030).runs[0]
    caller.receive(service.complete(run, Status.OK, b"", now=10_031).sends[0].datagram, now=10_031)
    sent = [d for d in caller.handle_timer(now=10_061).datagrams if d[4] == 5]  # REPLY-ACK
    assert len(sent) == 1
    service.receive(sent[0], "peer", now=10_062)
    assert service.statistics().reply_acks == 1


def test_malformed_call_payload_takes_no_slot() -> None:
    service = _service()
    assert service.receive(_frame("a", 10_000, b"\x09ab"), "p", now=10_000).runs == ()
    stats = service.statistics()
    assert stats.malformed == 1 and stats.table_size == 0
    assert service.receive(_frame("a", 10_000, encode_call_payload("q", b"")), "p",
                           now=10_000).runs
