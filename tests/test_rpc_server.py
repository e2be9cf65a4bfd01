"""The RPC server, transition by transition (SCMP Fig. 3-1), GC, capacity, crashes."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from timebound.core.atmostonce import Fixed, MemoryStorage, StableLatest
from timebound.core.rpc import (
    Ack,
    Call,
    ConnState,
    Reply,
    ReplyAck,
    Server,
    ServerOutput,
    StartCall,
    decode,
)
from timebound.errors import ProtocolUsageError

C = "c"
NOW = 50
Srv = Server[str]


def make(**kw: object) -> Srv:
    options: dict[str, object] = {"rho": 100, "gc_every": 1000}
    options.update(kw)
    return Server(**options)  # type: ignore[arg-type]


def call(server: Srv, ts: int, now: int = NOW, payload: bytes | None = b"p") -> ServerOutput:
    return server.receive(Call(C, ts, payload).encode(), now=now, peer="client")


def start(server: Srv, ts: int, now: int = NOW) -> StartCall:
    (started,) = call(server, ts, now).starts
    return started


def to_computing(server: Srv) -> StartCall:
    return start(server, 10)


def to_replying(server: Srv) -> StartCall:
    started = start(server, 10)
    server.complete(started, b"r10", now=NOW)
    return started


def to_idle(server: Srv) -> StartCall:
    started = to_replying(server)
    server.receive(ReplyAck(C, 10).encode(), now=NOW, peer="client")
    return started


SETUPS: dict[str, Callable[[Srv], object]] = {
    "none": lambda s: None,
    "computing": to_computing,
    "replying": to_replying,
    "idle": to_idle,
}

# (setup, input, expected sends, expected start ts, expected (state, ts) after)
# inputs: ("call", ts) full CALL, ("probe", ts) truncated CALL, ("rack", ts) REPLY-ACK
ROWS = [
    ("none", ("call", 10), [], 10, (ConnState.COMPUTING, 10)),
    ("none", ("probe", 10), [], None, None),
    ("none", ("rack", 10), [], None, None),
    ("computing", ("call", 10), [Ack(C, 10)], None, (ConnState.COMPUTING, 10)),
    ("computing", ("probe", 10), [Ack(C, 10)], None, (ConnState.COMPUTING, 10)),
    ("computing", ("call", 11), [], 11, (ConnState.COMPUTING, 11)),
    ("computing", ("call", 5), [], None, (ConnState.COMPUTING, 10)),  # old duplicate
    ("computing", ("probe", 5), [], None, (ConnState.COMPUTING, 10)),  # old probe
    ("computing", ("probe", 11), [], None, (ConnState.COMPUTING, 10)),  # probe never starts
    ("computing", ("rack", 10), [], None, (ConnState.COMPUTING, 10)),
    ("replying", ("call", 10), [Reply(C, 10, b"r10")], None, (ConnState.REPLYING, 10)),
    ("replying", ("probe", 10), [Reply(C, 10, b"r10")], None, (ConnState.REPLYING, 10)),
    ("replying", ("call", 11), [], 11, (ConnState.COMPUTING, 11)),
    ("replying", ("call", 5), [], None, (ConnState.REPLYING, 10)),  # old duplicate
    ("replying", ("rack", 10), [], None, (ConnState.IDLE, 10)),
    ("replying", ("rack", 5), [], None, (ConnState.REPLYING, 10)),
    ("idle", ("call", 10), [], None, (ConnState.IDLE, 10)),
    ("idle", ("probe", 10), [], None, (ConnState.IDLE, 10)),
    ("idle", ("call", 11), [], 11, (ConnState.COMPUTING, 11)),
    ("idle", ("rack", 10), [], None, (ConnState.IDLE, 10)),
]


@pytest.mark.parametrize(("setup", "event", "sends", "started", "after"), ROWS)
def test_transitions(
    setup: str, event: tuple[str, int], sends: list[object], started: int | None,
    after: tuple[ConnState, int] | None,
) -> None:
    server = make()
    SETUPS[setup](server)
    kind, ts = event
    if kind == "rack":
        out = server.receive(ReplyAck(C, ts).encode(), now=NOW, peer="client")
    else:
        out = call(server, ts, payload=None if kind == "probe" else b"p")
    assert [decode(o.datagram) for o in out.sends] == sends
    assert all(o.peer == "client" for o in out.sends)
    assert [s.ts for s in out.starts] == ([] if started is None else [started])
    assert server.state(C) == after


def test_complete_sends_reply_and_stores_it() -> None:
    server = make()
    started = to_computing(server)
    assert started.payload == b"p" and started.peer == "client"
    out = server.complete(started, b"result", now=60)
    assert [decode(o.datagram) for o in out.sends] == [Reply(C, 10, b"result")]
    assert server.state(C) == (ConnState.REPLYING, 10)
    with pytest.raises(ProtocolUsageError):
        server.complete(started, b"again", now=61)


def test_superseded_completion_is_ignored() -> None:
    server = make()
    old = to_computing(server)
    start(server, 11)
    assert server.complete(old, b"late", now=60) == ServerOutput()
    assert server.state(C) == (ConnState.COMPUTING, 11)
    assert server.statistics().late_completions == 1


def test_wrong_direction_and_garbage_are_counted() -> None:
    server = make()
    assert server.receive(Ack(C, 1).encode(), "x", now=NOW) == ServerOutput()
    assert server.receive(Reply(C, 1, b"").encode(), "x", now=NOW) == ServerOutput()
    assert server.receive(b"\x09junk", "x", now=NOW) == ServerOutput()
    stats = server.statistics()
    assert stats.ignored == 2 and stats.malformed == 1


def test_constructor_checks() -> None:
    with pytest.raises(ProtocolUsageError):
        Server(gc_every=10)
    with pytest.raises(ProtocolUsageError):
        Server(rho=10, estimator=Fixed(10), gc_every=10)
    with pytest.raises(ProtocolUsageError):
        Server(rho=10, kappa=-1, gc_every=10)
    assert Server(rho=10, kappa=30, gc_every=10).receiver.estimate == 30


# -- garbage collection (Fig. 3-1 "Garbage collection") ------------------------------


def test_gc_never_evicts_computing() -> None:
    server = make(gc_every=10)
    to_computing(server)
    server.handle_timer(now=10**9)
    assert server.state(C) == (ConnState.COMPUTING, 10)
    assert server.receiver.upper == 0


@pytest.mark.parametrize("final", ["replying", "idle"])
def test_gc_evicts_when_reply_time_older_than_rho_prime(final: str) -> None:
    # rho = 100, reply_time = 50: kept while 50 >= now - 100, evicted at GC 160.
    server = make(gc_every=10)
    SETUPS[final](server)
    server.handle_timer(now=150)
    assert server.state(C) is not None
    server.handle_timer(now=160)
    assert server.state(C) is None
    assert server.receiver.upper == 10  # the call's timestamp, not the reply time
    # A late copy of the call is now STALE: ignored, never restarted.
    assert call(server, 10, now=170) == ServerOutput()


def test_gc_uses_kappa_when_larger() -> None:
    server = make(rho=100, kappa=300, gc_every=10)
    to_replying(server)
    server.handle_timer(now=350)
    assert server.state(C) is not None
    server.handle_timer(now=360)
    assert server.state(C) is None


def test_gc_kappa_with_a_given_estimator() -> None:
    # The receiver offers entries with ts <= now - 20; the RPC rule keeps them while
    # reply_time >= now - max(20, 200).
    server: Srv = Server(estimator=Fixed(20), kappa=200, gc_every=10)
    start(server, 10, now=20)
    server.complete(StartCall(C, 10, b"p", "client", 0), b"r", now=30)
    server.handle_timer(now=230)
    assert server.state(C) is not None
    server.handle_timer(now=240)
    assert server.state(C) is None


def test_gc_needs_the_call_timestamp_old_too() -> None:
    # The client's clock is ahead: ts 400 at server time 20. The reply is old at 160
    # but the entry stays until ts <= now - rho, so upper never exceeds now - rho.
    server = make(gc_every=10)
    started = start(server, 400, now=20)
    server.complete(started, b"r", now=50)
    server.handle_timer(now=490)
    assert server.state(C) == (ConnState.REPLYING, 400)
    server.handle_timer(now=500)
    assert server.state(C) is None
    assert server.receiver.upper == 400


def test_capacity_removes_only_when_almost_full() -> None:
    server = make(gc_every=10, capacity=2, high_water=2)
    to_replying(server)  # conn c, reply_time 50, expired from 160 on
    server.handle_timer(now=1000)
    assert server.state(C) is not None  # table not almost full: kept
    other = server.receive(Call("d", 990, b"p").encode(), "client", now=1000)
    assert len(other.starts) == 1
    # A third connection on a full table forces eviction of the expired entry.
    third = server.receive(Call("e", 995, b"p").encode(), "client", now=1000)
    assert len(third.starts) == 1
    assert server.state(C) is None and server.receiver.upper == 10
    # Now both entries are COMPUTING: nothing may go, the next new connection is FULL.
    assert server.receive(Call("f", 999, b"p").encode(), "client", now=10**6) == ServerOutput()
    assert server.state("d") == (ConnState.COMPUTING, 990)


# -- crashes (Fig. 3-1 "Initialization and Crash Recovery") --------------------------


def resilient(storage: MemoryStorage) -> Srv:
    return make(gc_every=10, resilience=StableLatest(storage, beta=100, latest_every=10))


def test_crash_loses_rpc_state_and_never_reruns() -> None:
    storage = MemoryStorage()
    server = resilient(storage)
    started = start(server, 40, now=45)
    server.crash(now=60, down=20)
    assert server.state(C) is None
    assert call(server, 40, now=70) == ServerOutput()  # down
    assert call(server, 40, now=90) == ServerOutput()  # STALE after recovery
    assert call(server, 40, now=90, payload=None) == ServerOutput()  # probe
    assert server.complete(started, b"r", now=95) == ServerOutput()  # lost with the crash
    assert server.statistics().late_completions == 1
    latest = server.receiver.latest
    assert latest is not None
    # Recovery set upper = latest before the crash (>= 40): a new call above it runs.
    assert server.receiver.upper >= 40
    assert len(start(server, server.receiver.upper + 1, now=server.receiver.upper).payload) == 1


def test_non_resilient_server_cannot_crash() -> None:
    with pytest.raises(ProtocolUsageError):
        make().crash(now=10)
