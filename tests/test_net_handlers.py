"""RPC handlers that cannot stall the server ("Handlers"; ``net/_server.py``).

- A sync handler that blocks runs in a worker thread (``RpcServer(workers=)``): other
  callers are never held behind it (their p99 stays under a third of the time it
  blocks) and ``timebound.stats`` answers meanwhile;
  with every worker busy, further sync calls wait their turn (bounded threads).
- A handler returning anything but bytes (``str``, ``None``, ``dict``, ``int``...) is
  a ``RemoteError`` "handler returned T, not bytes", once, counted, no traceback, from
  inline, pooled and async handlers alike (``bytearray``/``memoryview`` are bytes).
- A result that cannot fit one REPLY datagram is a ``RemoteError`` "result of N bytes
  exceeds the datagram limit M", M exact (the frame of M bytes is ``MAX_DATAGRAM``).
- ``MODULE:ATTR`` must be a dict of handlers or an object of the user's own class.

The live scenarios run in a subprocess twice (``build`` fixture): once forced to the
pure Python (``TIMEBOUND_PURE_PYTHON=1``), once with the default build, which is the
mypyc-compiled one when it is current (``timebound._compiled``): the two builds must
answer alike. ``python -m tests.test_net_handlers SCENARIO``
runs one scenario and prints its findings as JSON on its last line.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from timebound import _compiled
from timebound.core.rpc import INCARNATION_BYTES, MAX_TS, Reply
from timebound.core.rpc._records import Invocation, StartCall
from timebound.core.wire import KIND_RPC, MAX_DATAGRAM, FrameCodec, Keyring
from timebound.core.wire import Key as WireKey
from timebound.errors import ProtocolUsageError, UsageError
from timebound.net import RemoteError, RpcClient, RpcServer
from timebound.net._handlers import DEFAULT_WORKERS, handlers_of

ROOT = Path(__file__).resolve().parent.parent
KEY = b"k" * 32
#: The bar for other callers' p99 while a sync handler blocks for 1.5 s or more: a
#: caller held behind it waits that long, so a third of it fails such a server, and a
#: loaded machine's scheduling (a quiet one measures 6-11 ms) does not.
P99_BAR_S = 0.5


# -- targets of ``MODULE:ATTR`` (the CLI tests serve these) ------------------------

NUMBER = 7
TEXT = "abc"


class Own:
    def ping(self, payload: bytes) -> bytes:
        return b"pong"

    async def later(self, payload: bytes) -> bytes:
        return payload


own = Own()
app = {"ping": own.ping}


# -- the scenarios (run in a subprocess) --------------------------------------------


async def _until(flag: threading.Event, seconds: float = 5.0) -> None:
    """Wait (bounded) until ``flag`` is set by a worker thread."""
    deadline = time.monotonic() + seconds
    while not flag.is_set():
        assert time.monotonic() < deadline, "the handler never started"
        await asyncio.sleep(0.005)


async def scenario_blocking() -> dict[str, Any]:
    """One sync handler blocks (default workers) while 12 callers make quick calls,
    sync and async, for 1.5 s, and a 13th asks ``timebound.stats`` every 0.1 s."""
    release, entered = threading.Event(), threading.Event()

    def block(payload: bytes) -> bytes:
        entered.set()
        release.wait(20.0)  # bounded: released below
        return b"released"

    def echo(payload: bytes) -> bytes:
        return payload

    async def aecho(payload: bytes) -> bytes:
        return payload

    latencies: list[float] = []
    stats: list[dict[str, Any]] = []
    server = RpcServer({"block": block, "echo": echo, "aecho": aecho})
    assert server.workers == DEFAULT_WORKERS
    try:
        async with server, RpcClient(server.address) as blocker:
            blocked = asyncio.ensure_future(blocker.call("block", timeout=20.0))
            await _until(entered)
            end = time.perf_counter() + 1.5

            async def caller(i: int) -> None:
                proc = "echo" if i % 2 else "aecho"
                async with RpcClient(server.address) as client:
                    while time.perf_counter() < end:
                        sent = time.perf_counter()
                        reply = await client.call(proc, b"%d" % i, timeout=5.0)
                        latencies.append(time.perf_counter() - sent)
                        assert reply == b"%d" % i

            async def stats_caller() -> None:
                async with RpcClient(server.address) as client:
                    while time.perf_counter() < end:
                        stats.append(json.loads(await client.call("timebound.stats",
                                                                  timeout=1.0)))
                        await asyncio.sleep(0.1)

            await asyncio.gather(*(caller(i) for i in range(12)), stats_caller())
            still_blocked = not blocked.done()
            release.set()
            result = await blocked
    finally:
        release.set()
    latencies.sort()
    return {"calls": len(latencies), "p99": latencies[int(0.99 * len(latencies))],
            "max": latencies[-1], "stats_answers": len(stats),
            "stats_calls": [s["calls"] for s in stats],
            "still_blocked": still_blocked, "blocked_result": result.decode()}


async def scenario_queue() -> dict[str, Any]:
    """workers=2 and 4 blocking calls: 2 run, 2 wait; an async handler answers
    meanwhile; on release all 4 complete, each run once."""
    release = threading.Event()
    lock = threading.Lock()
    running: list[int] = []
    entered = threading.Event()

    def block(payload: bytes) -> bytes:
        with lock:
            running.append(int(payload))
            if len(running) >= 2:
                entered.set()
        release.wait(20.0)
        return payload

    async def aecho(payload: bytes) -> bytes:
        return payload

    try:
        async with RpcServer({"block": block, "aecho": aecho}, workers=2) as server, \
                RpcClient(server.address) as client:
            calls = [asyncio.ensure_future(client.call("block", b"%d" % i, timeout=20.0))
                     for i in range(4)]
            await _until(entered)
            await asyncio.sleep(0.3)  # time for a third worker to start, if one could
            started_while_full = len(running)
            threads = sorted(t.name for t in threading.enumerate()
                             if t.name.startswith("timebound-handler"))
            answer = await client.call("aecho", b"meanwhile", timeout=2.0)
            release.set()
            results = await asyncio.gather(*calls)
            executions = server.statistics()["executions"]
    finally:
        release.set()
    return {"started_while_full": started_while_full, "threads": threads,
            "async_answer": answer.decode(), "results": [r.decode() for r in results],
            "ran": sorted(running), "executions": executions}


class _Loud(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message")


async def _aecho(payload: bytes) -> bytes:
    return payload


def _results_app() -> dict[str, Any]:
    async def async_str(payload: bytes) -> Any:
        return "text"

    async def async_none(payload: bytes) -> Any:
        return None

    def loud(payload: bytes) -> bytes:
        raise _Loud

    return {
        "str": lambda p: "text", "none": lambda p: None, "dict": lambda p: {"a": 1},
        "int": lambda p: 7, "list": lambda p: [b"x"], "bytearray": lambda p: bytearray(b"ba"),
        "memoryview": lambda p: memoryview(b"mv"), "bytes": lambda p: b"ok",
        "async_str": async_str, "async_none": async_none,
        "lazy": lambda p: _aecho(b"lazy:" + p),  # a sync handler returning a coroutine
        "loud": loud,
    }


#: What each procedure of ``_results_app`` answers (["ok", bytes] or ["remote", text]).
EXPECTED_RESULTS = {
    "str": ["remote", "handler returned str, not bytes"],
    "none": ["remote", "handler returned None, not bytes"],
    "dict": ["remote", "handler returned dict, not bytes"],
    "int": ["remote", "handler returned int, not bytes"],
    "list": ["remote", "handler returned list, not bytes"],
    "bytearray": ["ok", "ba"], "memoryview": ["ok", "mv"], "bytes": ["ok", "ok"],
    "async_str": ["remote", "handler returned str, not bytes"],
    "async_none": ["remote", "handler returned None, not bytes"],
    "lazy": ["ok", "lazy:x"], "loud": ["remote", "_Loud"],
}


async def _outcome(client: RpcClient, proc: str, payload: bytes = b"x") -> list[Any]:
    try:
        return ["ok", (await client.call(proc, payload, timeout=3.0)).decode()]
    except RemoteError as exc:
        return ["remote", exc.message]


async def scenario_results() -> dict[str, Any]:
    """Every kind of result, inline (workers=0) and pooled (workers=2)."""
    found: dict[str, Any] = {}
    for workers in (0, 2):
        async with RpcServer(_results_app(), workers=workers) as server, \
                RpcClient(server.address) as client:
            outcomes = {proc: await _outcome(client, proc) for proc in EXPECTED_RESULTS}
            stats = server.statistics()
            found[str(workers)] = {"outcomes": outcomes,
                                   "handler_errors": stats["handler_errors"],
                                   "computing": stats["computing"],
                                   "executions": stats["executions"]}
    return found


async def scenario_oversized() -> dict[str, Any]:
    """Results around the datagram limit, with and without a key, from an inline,
    a pooled and an async handler; the client id ``c`` makes the connection ``c.1``."""

    def size(payload: bytes) -> bytes:
        return b"x" * int(payload)

    async def async_size(payload: bytes) -> bytes:
        return b"x" * int(payload)

    found: dict[str, Any] = {}
    for key in (None, KEY):
        for workers in (0, 2):
            async with RpcServer({"size": size, "async_size": async_size}, key=key,
                                 workers=workers) as server, \
                    RpcClient(server.address, key=key, client_id="c") as client:
                first = await _outcome(client, "size", b"1000000")
                limit = int(first[1].rsplit(" ", 1)[1])
                rows = {}
                for proc in ("size", "async_size"):
                    for n in (limit, limit + 1, 70000):
                        kind, text = await _outcome(client, proc, b"%d" % n)
                        rows[f"{proc} {n - limit:+d}"] = [kind, len(text) if kind == "ok"
                                                          else text]
                stats = server.statistics()
            found[f"key={key is not None} workers={workers}"] = {
                "limit": limit, "first": first, "rows": rows,
                "handler_errors": stats["handler_errors"], "computing": stats["computing"]}
    return found


SCENARIOS = {"blocking": scenario_blocking, "queue": scenario_queue,
             "results": scenario_results, "oversized": scenario_oversized}


def _main(name: str) -> None:
    found = asyncio.run(SCENARIOS[name]())
    found["core"] = _compiled.status()
    print(json.dumps(found))


# -- the tests ------------------------------------------------------------------------


@pytest.fixture(params=["pure", "default"])
def build(request: pytest.FixtureRequest) -> str:
    """Which build a scenario's subprocess runs: forced pure, or the default one
    (compiled when the build is current; else pure as well)."""
    return str(request.param)


def run_scenario(name: str, build: str, timeout: float = 90.0) -> dict[str, Any]:
    env = dict(os.environ)
    env.pop(_compiled.PURE_ENV, None)
    if build == "pure":
        env[_compiled.PURE_ENV] = "1"
    done = subprocess.run([sys.executable, "-m", "tests.test_net_handlers", name],
                          cwd=ROOT, env=env, capture_output=True, timeout=timeout,
                          check=False)
    err = done.stderr.decode(errors="replace")
    assert done.returncode == 0, err
    assert "Traceback" not in err and "Exception in callback" not in err, err
    found: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    expected = ("mypyc-compiled core" if build == "default" and _compiled.current()
                else "pure-Python core")
    assert found["core"] == expected
    return found


def test_blocking_sync_handler_never_holds_other_callers_behind_it(build: str) -> None:
    """A finding: "a sync handler that blocks freezes the whole server: 12/12 other
    callers timed out, and so was rpc stats"."""
    found = run_scenario("blocking", build)
    assert found["still_blocked"] and found["blocked_result"] == "released"
    assert found["calls"] >= 200
    assert found["p99"] < P99_BAR_S, found
    assert found["stats_answers"] >= 5
    assert found["stats_calls"] == sorted(found["stats_calls"])


def test_busy_workers_queue_sync_calls_with_bounded_threads(build: str) -> None:
    found = run_scenario("queue", build)
    assert found["started_while_full"] == 2
    assert found["threads"] == ["timebound-handler-1", "timebound-handler-2"]
    assert found["async_answer"] == "meanwhile"
    assert found["results"] == ["0", "1", "2", "3"]
    assert found["ran"] == [0, 1, 2, 3] and found["executions"] == 5  # and aecho


def test_non_bytes_results_are_one_remote_error_in_both_builds(build: str) -> None:
    """A finding: "a sync handler returning str, None or dict gets no reply in the
    default (compiled) build ... the two builds differ"."""
    found = run_scenario("results", build)
    errors = sum(kind == "remote" for kind, _ in EXPECTED_RESULTS.values())
    for workers in ("0", "2"):
        got = found[workers]
        assert got["outcomes"] == EXPECTED_RESULTS, workers
        assert got["handler_errors"] == errors
        assert got["computing"] == 0
        assert got["executions"] == len(EXPECTED_RESULTS)


def test_oversized_result_is_one_remote_error_at_the_exact_limit(build: str) -> None:
    """A finding: "a result over 65,507 bytes: the caller times out and the server
    logs a traceback at every retransmission"."""
    found = run_scenario("oversized", build)
    for name, got in found.items():
        if name == "core":
            continue
        tag = 16 if "key=True" in name else 0
        # MAX_DATAGRAM - frame header 4 - type, conn_len, ts, body_len 14 - status 1
        # - the connection id "c.1" - the tag.
        limit = MAX_DATAGRAM - 4 - 14 - 1 - 8 - 3 - tag  # 8: the incarnation
        assert got["limit"] == limit, name
        assert got["first"] == ["remote", f"result of 1000000 bytes exceeds the "
                                          f"datagram limit {limit}"]
        for proc in ("size", "async_size"):
            assert got["rows"][f"{proc} +0"] == ["ok", limit]
            assert got["rows"][f"{proc} +1"] == [
                "remote", f"result of {limit + 1} bytes exceeds the datagram limit {limit}"]
            assert got["rows"][f"{proc} +{70000 - limit}"][0] == "remote"
        assert got["handler_errors"] == 5 and got["computing"] == 0


@given(conn=st.text(min_size=1, max_size=255).filter(
           lambda c: 1 <= len(c.encode("utf-8", "surrogatepass")) <= 255
           and c.encode("utf-8", "ignore") == c.encode("utf-8", "surrogatepass")),
       ts=st.integers(1, MAX_TS), keyed=st.booleans())
def test_oversized_limit_is_exact_for_every_connection_id(conn: str, ts: int,
                                                          keyed: bool) -> None:
    """``_limit``: a REPLY carrying that many data bytes is a frame of exactly
    ``MAX_DATAGRAM`` bytes, one more does not fit."""
    key = KEY if keyed else None
    server = RpcServer({"f": lambda p: p}, key=key, workers=0)
    limit = server._limit(Invocation("f", b"", StartCall(conn, ts, b"", None, 0)))
    codec = FrameCodec(Keyring(WireKey(KEY)) if keyed else None)
    incarnation = bytes(INCARNATION_BYTES)  # every server message ends with it
    assert len(codec.seal(KIND_RPC, Reply(conn, ts, b"\0" + b"x" * limit).encode()
                          + incarnation)) == MAX_DATAGRAM
    with pytest.raises(ProtocolUsageError):
        codec.seal(KIND_RPC, Reply(conn, ts, b"\0" + b"x" * (limit + 1)).encode()
                   + incarnation)


@pytest.mark.parametrize("target", [NUMBER, TEXT, b"raw", 1.5, None, [own.ping], (1,),
                                    os, Own, len, lambda p: p, threading.Lock()],
                         ids=lambda t: type(t).__name__)
def test_handlers_of_refuses_builtins_modules_classes_and_functions(target: object) -> None:
    with pytest.raises(UsageError, match="must be a dict of handlers or an object of "
                                         "your own class") as info:
        handlers_of(target)
    assert info.value.option == "MODULE:ATTR"
    with pytest.raises(UsageError):
        RpcServer(target)


@given(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(),
                 st.binary(), st.lists(st.integers()), st.tuples(st.text()),
                 st.frozensets(st.integers()), st.complex_numbers()))
def test_handlers_of_refuses_every_builtin_value(target: object) -> None:
    with pytest.raises(UsageError) as info:
        handlers_of(target)
    assert info.value.option == "MODULE:ATTR"


@pytest.mark.parametrize("table", [{"a": 1}, {1: own.ping}, {"": own.ping},
                                   {"x" * 256: own.ping}, {"\ud800": own.ping}],
                         ids=["value", "key", "empty", "long", "surrogate"])
def test_handlers_of_checks_a_mapping(table: dict[Any, Any]) -> None:
    with pytest.raises(UsageError) as info:
        handlers_of(table)
    assert info.value.option == "MODULE:ATTR"


def test_procedure_names_of_255_utf8_bytes_are_the_longest() -> None:
    assert set(handlers_of({"x" * 255: own.ping, "é" * 127 + "x": own.ping})) == {
        "x" * 255, "é" * 127 + "x"}
    with pytest.raises(UsageError, match="1..255 UTF-8 bytes"):
        handlers_of({"é" * 128: own.ping})  # 128 characters, 256 bytes


def test_handlers_of_accepts_dicts_and_objects_of_your_own_class() -> None:
    assert set(handlers_of(own)) == {"ping", "later"}
    assert handlers_of(app) == app
    server = RpcServer(own)
    assert server.workers == DEFAULT_WORKERS
    assert "later" in server._async_procs and "ping" not in server._async_procs


@pytest.mark.parametrize("workers", [-1, 1025])
def test_workers_out_of_range_is_a_usage_error(workers: int) -> None:
    with pytest.raises(UsageError, match="workers"):
        RpcServer(app, workers=workers)


@pytest.mark.parametrize("attr", ["NUMBER", "TEXT", "Own", "os"])
def test_handlers_of_cli_is_one_line_and_exit_2(build: str, attr: str,
                                                tmp_path: Path) -> None:
    """A finding: "rpc serve MODULE:ATTR pointed at an int or a str serves its
    built-in methods (bit_length, upper) as procedures"."""
    env = dict(os.environ)
    env.pop(_compiled.PURE_ENV, None)
    if build == "pure":
        env[_compiled.PURE_ENV] = "1"
    storage = tmp_path / "latest.json"
    done = subprocess.run([sys.executable, "-m", "timebound.cli", "rpc", "serve",
                           f"tests.test_net_handlers:{attr}", "--storage", str(storage)],
                          cwd=ROOT, env=env, capture_output=True, timeout=30, check=False)
    lines = done.stderr.decode().splitlines()
    assert done.returncode == 2, lines
    assert len(lines) == 1 and lines[0].startswith("timebound: error: MODULE:ATTR: ")
    assert lines[0].endswith("must be a dict of handlers or an object of your own class")
    assert done.stdout == b"" and not storage.exists()


if __name__ == "__main__":
    _main(sys.argv[1])
