"""Deadlines kept at start, a bounded queue for busy workers, and callers who learn it.

A call carries its caller's deadline (a budget a little shorter than the caller's
timeout); the server never starts it after that deadline, however long it waited for
a worker, and answers it ``expired`` at the deadline while it waits; a call finding
every worker busy and the queue full is refused ``overloaded`` at once. Either way
it never runs, a later copy of it neither, and the caller hears the refusal before
its own timeout. The rules are the core's (``RpcService.expire_if_late``,
``RpcService.overloaded``, ``budget_for_timeout``); the live tests run a real
``RpcServer`` on loopback, with bounded waits and counts, never durations, asserted.
The whole module runs again under the other build (``test_the_other_build``).
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from timebound import _compiled
from timebound.core.rpc import (
    Answered,
    Call,
    Policy,
    Reason,
    Rejected,
    RpcCaller,
    RpcService,
    Status,
    budget_for_timeout,
    decode,
)
from timebound.core.rpc._live_messages import call_budget_ms
from timebound.core.wire import KIND_RPC, FrameCodec, Key, Keyring
from timebound.errors import UsageError
from timebound.net import CallRejected, CallTimeout, RpcClient, RpcServer

pytestmark = pytest.mark.waits

KEY = b"k" * 32
TIMEBOUND = [sys.executable, "-m", "timebound.cli"]


def _pair(key: bytes | None = None) -> tuple[RpcService[Any], RpcCaller]:
    ring = None if key is None else Keyring(Key(key))
    service: RpcService[Any] = RpcService(FrameCodec(ring), rho=10**9, gc_every=10**6,
                                          secret=b"s" * 32)
    caller = RpcCaller("cl", Policy(interval=1000, give_up_after=10**9), FrameCodec(ring))
    return service, caller


# -- the core: the rule at start ---------------------------------------------------


def test_core_call_past_its_deadline_at_start_never_runs() -> None:
    """Accepted within its budget, a call asked again at start after its deadline is
    completed ``expired`` and never runs; a later copy is a duplicate, not a run."""
    service, caller = _pair()
    ts, (call,) = caller.call("echo", b"queued", now=1_000, conn="cl.1", budget_ms=5)
    (run,) = service.receive(call, "client", now=2_000).runs  # on time: accepted
    assert service.start_deadline(run) == ts + 5_000
    assert service.expire_if_late(run, now=ts + 5_000) is None  # still may start
    late = service.expire_if_late(run, now=ts + 5_001)
    assert late is not None and late.runs == ()
    (reply,) = late.sends
    (answered,) = caller.receive(reply.datagram, now=ts + 5_002).outcomes
    assert isinstance(answered, Answered) and answered.status is Status.EXPIRED
    again = service.receive(call, "client", now=ts + 6_000)
    assert again.runs == () and len(again.sends) == 1  # the stored answer
    assert service.statistics().expired == 1
    # A call without a budget has no deadline.
    _t, (free,) = caller.call("echo", b"", now=9_000, conn="cl.2")
    (run2,) = service.receive(free, "client", now=9_000).runs
    assert service.start_deadline(run2) is None
    assert service.expire_if_late(run2, now=10**12) is None


def test_core_superseded_call_is_not_started() -> None:
    """A waiting call its connection has moved past (the caller made a newer call)
    is not started: nobody waits for it; nothing is sent."""
    service, caller = _pair()
    _t, (first,) = caller.call("echo", b"1", now=1_000, conn="cl.1", budget_ms=1000)
    (run1,) = service.receive(first, "client", now=1_000).runs
    caller.abandon("cl.1")
    _t, (second,) = caller.call("echo", b"2", now=2_000, conn="cl.1", budget_ms=1000)
    (run2,) = service.receive(second, "client", now=2_000).runs
    skipped = service.expire_if_late(run1, now=3_000)
    assert skipped is not None and skipped.sends == () and skipped.runs == ()
    assert service.expire_if_late(run2, now=3_000) is None


@pytest.mark.parametrize("key", [None, KEY])
def test_core_overloaded_refusal_keeps_at_most_once(key: bytes | None) -> None:
    """A call the driver has no room for is refused ``overloaded`` (a REFUSE, at
    most the CALL's size) and completed without running: a later copy never runs."""
    service, caller = _pair(key)
    ts, (call,) = caller.call("echo", b"x", now=1_000, conn="cl.1", budget_ms=1000)
    (run,) = service.receive(call, "client", now=1_000).runs
    (refusal,) = service.overloaded(run, now=1_001).sends
    assert refusal.peer == "client" and len(refusal.datagram) <= len(call)
    (outcome,) = caller.receive(refusal.datagram, now=1_002).outcomes
    assert isinstance(outcome, Rejected) and outcome.reason is Reason.OVERLOADED
    assert (outcome.conn, outcome.ts) == ("cl.1", ts)
    for now in (1_003, 500_000, 5_000_000):  # copies before and after the deadline
        again = service.receive(call, "client", now=now)
        assert again.runs == ()
    stats = service.statistics()
    assert (stats.overloaded, stats.executions, stats.expired) == (1, 1, 0)


def test_budget_is_a_little_shorter_than_the_timeout() -> None:
    """The budget leaves the caller min(timeout / 10, 5 intervals) to hear the
    server's ``expired`` before its own timeout; at least 1 ms."""
    assert budget_for_timeout(500_000, 20_000) == 450
    assert budget_for_timeout(2_000_000, 20_000) == 1_900
    assert budget_for_timeout(60_000_000, 20_000) == 59_900
    assert budget_for_timeout(60_000_000, 1_000_000) == 55_000
    assert budget_for_timeout(1_000, 20_000) == 1
    with pytest.raises(Exception, match=">= 1"):
        budget_for_timeout(0, 20_000)
    caller = RpcCaller("c", Policy(interval=20_000, give_up_after=10**9), FrameCodec(None))
    assert caller.budget_ms(500_000) == 450


def test_client_sends_its_budget_below_its_timeout() -> None:
    """``RpcClient.call(timeout=0.5)``: the CALL on the wire carries 450 ms."""

    async def main() -> int:
        sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sink.bind(("127.0.0.1", 0))
        sink.setblocking(False)
        try:
            async with RpcClient(sink.getsockname()) as client:
                with pytest.raises(CallTimeout):
                    await client.call("echo", b"", timeout=0.5)
            datagram = sink.recv(70_000)  # the first CALL (retransmissions follow)
        finally:
            sink.close()
        opened = FrameCodec(None).open(datagram)
        assert opened is not None and opened[0] == KIND_RPC
        message = decode(opened[1])
        assert isinstance(message, Call) and message.payload is not None
        return call_budget_ms(message.payload)

    assert asyncio.run(main()) == 450


def test_server_queue_option_is_checked() -> None:
    with pytest.raises(UsageError, match="queue"):
        RpcServer({"f": lambda p: p}, queue=-1)
    assert RpcServer({"f": lambda p: p}, workers=3).queue == 96  # 32 per worker
    assert RpcServer({"f": lambda p: p}, workers=3, queue=0).queue == 0
    from timebound.net import _handlers
    from timebound.net.cli import rpc

    assert rpc.MAX_QUEUE == _handlers.MAX_QUEUE  # the command line's bound is the server's


# -- live: the acceptance run ------------------------------------------------------


async def _until(flag: threading.Event, seconds: float = 5.0) -> None:
    """Wait (bounded) until ``flag`` is set by a worker thread."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while not flag.is_set():
        assert loop.time() < end, "the handler never started"
        await asyncio.sleep(0.005)


@pytest.mark.parametrize("queue", [None, 1])
def test_busy_worker_callers_hear_a_refusal_not_a_timeout(queue: int | None) -> None:
    """One worker held by a slow call; 4 callers with a 1 s timeout each: every
    one hears ``expired`` (it waited past its deadline) or ``overloaded`` (no room
    in the queue) before its timeout, and none of their calls starts later, not
    even once the worker is free again."""
    starts: list[bytes] = []
    entered, release = threading.Event(), threading.Event()

    def slow(payload: bytes) -> bytes:
        starts.append(b"slow")
        entered.set()
        release.wait(10.0)  # bounded: released below
        return b"done"

    def fast(payload: bytes) -> bytes:
        starts.append(payload)
        return payload

    async def one(client: RpcClient, i: int) -> str:
        try:
            await client.call("fast", b"%d" % i, timeout=1.0)
        except CallRejected as exc:
            assert exc.ran is False  # keyed: the refusal proves it did not run
            return exc.reason
        except CallTimeout:
            return "timeout"
        return "ran"

    async def main() -> tuple[list[str], dict[str, Any]]:
        try:
            async with RpcServer({"slow": slow, "fast": fast}, key=KEY, workers=1,
                                 queue=queue) as server, \
                    RpcClient(server.address, key=KEY) as holder, \
                    RpcClient(server.address, key=KEY) as client:
                held = asyncio.ensure_future(holder.call("slow", timeout=10.0))
                await _until(entered)
                outcomes = await asyncio.gather(*(one(client, i) for i in range(4)))
                release.set()
                assert await held == b"done"
                await asyncio.sleep(0.3)  # a late start would come now
                stats = server.statistics()
        finally:
            release.set()
        return list(outcomes), stats

    outcomes, stats = asyncio.run(main())
    if queue is None:  # 32 per worker: all four wait, and expire
        assert outcomes == ["expired"] * 4
    else:  # room for one: it expires, the others are refused at once
        assert sorted(outcomes) == ["expired"] + ["overloaded"] * 3
    assert starts == [b"slow"]  # no late start
    assert stats["expired"] == outcomes.count("expired")
    assert stats["overloaded"] == outcomes.count("overloaded")


def test_burst_never_starts_a_queued_call_after_its_deadline() -> None:
    """A burst of 30 callers on 2 workers (0.1 s handlers, 1 s timeouts): calls
    run, expire or time out while running, but no handler starts a call whose caller
    already heard its outcome (a refusal or its timeout), and no refused call runs."""
    finished: set[int] = set()  # callers done, written on the loop
    started: list[int] = []
    late: list[int] = []
    lock = threading.Lock()
    gate = threading.Event()

    def work(payload: bytes) -> bytes:
        i = int(payload)
        with lock:
            started.append(i)
            if i in finished:
                late.append(i)
        gate.wait(0.1)  # never set: a bounded 0.1 s of work
        return payload

    async def one(client: RpcClient, i: int) -> str:
        try:
            await client.call("work", b"%d" % i, timeout=1.0)
            outcome = "ran"
        except CallRejected as exc:
            outcome = exc.reason
        except CallTimeout:
            outcome = "timeout"
        finished.add(i)
        return outcome

    async def main() -> list[str]:
        async with RpcServer({"work": work}, workers=2, queue=32) as server, \
                RpcClient(server.address) as client:
            outcomes = await asyncio.gather(*(one(client, i) for i in range(30)))
            await asyncio.sleep(0.5)  # let the queue drain: a late start would come now
            assert server.statistics()["expired"] == outcomes.count("expired")
        return list(outcomes)

    outcomes = asyncio.run(main())
    assert late == []
    refused = {i for i, o in enumerate(outcomes) if o in ("expired", "overloaded")}
    assert refused and not refused & set(started)
    assert {i for i, o in enumerate(outcomes) if o == "ran"} <= set(started)
    assert len(started) == len(set(started)) == 30 - len(refused)  # each at most once


def _held_worker() -> tuple[list[bytes], threading.Event, threading.Event,
                             Callable[[bytes], bytes], Callable[[bytes], bytes]]:
    """(ledger, entered, release, hold, echo): ``hold`` keeps its worker until
    ``release`` is set (``entered`` says it started); ``echo`` records what it ran."""
    ledger: list[bytes] = []
    entered, release = threading.Event(), threading.Event()

    def hold(payload: bytes) -> bytes:
        entered.set()
        release.wait(10.0)
        return b""

    def echo(payload: bytes) -> bytes:
        ledger.append(payload)
        return payload

    return ledger, entered, release, hold, echo


def test_call_whose_deadline_passed_before_its_worker_freed_never_runs() -> None:
    """The check when a worker frees up, not only the queue's timer: the one worker
    finishes while the loop is held (an async handler blocking it on purpose) past a
    waiting call's deadline; asyncio then runs the worker's completion before the
    due timer, and the waiting call must still not start."""
    ledger, entered, release, hold, echo = _held_worker()

    async def block(payload: bytes) -> bytes:
        release.set()  # the worker finishes now, while the loop is held
        time.sleep(1.2)  # holds the loop past the waiting call's 1 s deadline
        return b""

    async def main() -> Any:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 0))
        sock.setblocking(False)
        try:
            async with RpcServer({"hold": hold, "echo": echo, "block": block},
                                 workers=1) as server, \
                    RpcClient(server.address) as client:
                held = asyncio.ensure_future(client.call("hold", timeout=10.0))
                await _until(entered)
                caller = RpcCaller("raw", Policy(10**6, 10**9), FrameCodec(None))
                _t, (call,) = caller.call("echo", b"late", now=server.clock.now(),
                                          conn="raw.1", budget_ms=1000)
                sock.sendto(call, server.address)
                await asyncio.sleep(0.05)  # it waits for the worker
                await client.call("block", timeout=10.0)
                await held
                answer = await _recv(sock)
                await asyncio.sleep(0.2)  # a late start would come now
                outcome = caller.receive(answer, now=server.clock.now()).outcomes
        finally:
            release.set()
            sock.close()
        return outcome

    (outcome,) = asyncio.run(main())
    assert isinstance(outcome, Answered) and outcome.status is Status.EXPIRED
    assert ledger == []


async def _recv(sock: socket.socket, seconds: float = 5.0) -> bytes:
    """The next datagram on ``sock`` (bounded wait)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        try:
            return sock.recv(70_000)
        except BlockingIOError:
            await asyncio.sleep(0.005)
    raise AssertionError("no answer")


def test_later_copy_of_a_refused_call_never_runs() -> None:
    """``queue=0``, the one worker busy: a hand-made CALL is refused ``overloaded``;
    the same CALL sent again once the worker is free gets the stored answer (did not
    run) and still never runs."""
    ledger, entered, release, hold, echo = _held_worker()

    async def exchange(sock: socket.socket, datagram: bytes,
                       to: tuple[str, int]) -> bytes:
        sock.sendto(datagram, to)
        return await _recv(sock)

    async def main() -> tuple[Any, Any]:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 0))
        sock.setblocking(False)
        try:
            async with RpcServer({"hold": hold, "echo": echo}, key=KEY, workers=1,
                                 queue=0) as server, \
                    RpcClient(server.address, key=KEY) as holder:
                held = asyncio.ensure_future(holder.call("hold", timeout=10.0))
                await _until(entered)
                caller = RpcCaller("raw", Policy(10**6, 10**9), FrameCodec(Keyring(Key(KEY))))
                now = server.clock.now()
                _t, (call,) = caller.call("echo", b"once", now=now, conn="raw.1",
                                          budget_ms=60_000)
                first = caller.receive(await exchange(sock, call, server.address),
                                       now=server.clock.now())
                release.set()
                await held
                copy = FrameCodec(Keyring(Key(KEY))).open(
                    await exchange(sock, call, server.address))
                await asyncio.sleep(0.2)
        finally:
            release.set()
            sock.close()
        return first, copy

    first, copy = asyncio.run(main())
    (outcome,) = first.outcomes
    assert isinstance(outcome, Rejected) and outcome.reason is Reason.OVERLOADED
    assert copy is not None
    body = copy[1]
    assert body[0] == 4 and body[-9] == Status.EXPIRED  # REPLY, status byte: did not run
    assert ledger == []


# -- the command line ----------------------------------------------------------------


@pytest.mark.parametrize(("queue", "line"), [
    (None, "timebound: rejected: expired (the server did not start the call: its "
           "deadline had passed)"),
    (0, "timebound: rejected: overloaded (the call did not run)"),
])
def test_rpc_call_prints_the_refusal(tmp_path: Path, queue: int | None, line: str) -> None:
    """``timebound rpc call`` with a key, the server's one worker busy: exit 4 (a
    refusal that proves the call did not run) and the documented refusal line, not a
    timeout."""
    key_hex = "ab" * 32
    key_file = tmp_path / "key"
    key_file.write_text(key_hex + "\n")
    key_file.chmod(0o600)
    entered, release = threading.Event(), threading.Event()

    def hold(payload: bytes) -> bytes:
        entered.set()
        release.wait(20.0)
        return b""

    async def main() -> tuple[int, str]:
        try:
            async with RpcServer({"hold": hold, "echo": lambda p: p},
                                 key=key_hex.encode(), workers=1, queue=queue) as server, \
                    RpcClient(server.address, key=key_hex.encode()) as holder:
                held = asyncio.ensure_future(holder.call("hold", timeout=20.0))
                await _until(entered)
                target = f"{server.address[0]}:{server.address[1]}"
                proc = await asyncio.create_subprocess_exec(
                    *TIMEBOUND, "rpc", "call", target, "echo", "x", "--timeout", "1s",
                    "--key-file", str(key_file), stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE)
                try:
                    _out, err = await asyncio.wait_for(proc.communicate(), 30.0)
                finally:
                    if proc.returncode is None:
                        proc.kill()
                        await proc.wait()
                release.set()
                await held
        finally:
            release.set()
        assert proc.returncode is not None
        return proc.returncode, err.decode("utf-8", "replace")

    code, err = asyncio.run(main())
    assert (code, err) == (4, line + "\n")


def test_rpc_serve_queue_out_of_range_is_one_line() -> None:
    done = subprocess.run(TIMEBOUND + ["rpc", "serve", "timebound.net.examples:app",
                                       "--storage", os.devnull, "--queue", "-1"],
                          capture_output=True, timeout=60, check=False)
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 2, err
    assert err.startswith("timebound: error: --queue") and err.count("\n") == 1, err


# -- the other build ---------------------------------------------------------------


def test_the_other_build(tmp_path: Path) -> None:
    """Every test above, again, with the other build of the compiled modules (the
    pure Python when the compiled core is in use; skipped when it is not built)."""
    if os.environ.get("TIMEBOUND_DEADLINE_OTHER_BUILD"):
        pytest.skip("this is the other build's run")
    if _compiled.status() != "mypyc-compiled core":
        pytest.skip("the compiled core is not built: the pure build ran above")
    env = dict(os.environ, TIMEBOUND_PURE_PYTHON="1", TIMEBOUND_DEADLINE_OTHER_BUILD="1")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__,
         "--basetemp", str(tmp_path / "pure")],
        env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
