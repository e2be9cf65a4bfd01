"""The mypyc-compiled RPC core and wire codec behave exactly as the pure Python
(timebound/_compiled.py): a seeded live exchange between an ``RpcCaller`` and an
``RpcService`` over a lossy, duplicating, reordering network, with retransmissions,
refusals (stale, early, down, overloaded), restarts, malformed, truncated and wrongly
keyed datagrams, a key rotation and REPLY-ACKs, is run in two processes, one forced
to the pure Python, and every datagram, outcome and statistic must be the same. Also:
an rpc source changed since the build makes every compiled module load from its
``.py`` (never a mix), and the frozen records of the compiled modules pickle."""

from __future__ import annotations

import dataclasses
import heapq
import importlib
import itertools
import json
import os
import pickle
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from timebound import _compiled
from timebound.core.atmostonce import MemoryStorage, ReceiverConfig
from timebound.core.rpc import (
    MAX_TS,
    Ack,
    Answered,
    Call,
    Policy,
    Reason,
    Rejected,
    Reply,
    ReplyAck,
    RpcCaller,
    RpcService,
    Status,
    build_receiver,
)
from timebound.core.rpc._live_messages import REFUSE_TYPE, encode_refusal, encode_result
from timebound.core.wire import KIND_CHANNEL, KIND_RPC, FrameCodec, Key, Keyring
from timebound.errors import ProtocolUsageError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILT = pytest.mark.skipif(not _compiled.current(), reason="compiled core not built "
                           "(scripts/setup.sh builds it; scripts/compile_core.py build)")

#: One live exchange each (seeds below): keys, hash classes, table capacity,
#: REPLY-ACK options and the receiver.
SCENARIOS: list[dict[str, Any]] = [
    {"keys": None, "classes": 1, "capacity": None, "delay": 0, "min_bytes": 0,
     "receiver": {"estimator": "fixed", "rho": 2000, "gc_every": 150}},
    {"keys": "one", "classes": 2, "capacity": 3, "delay": 300, "min_bytes": 0,
     "receiver": {"estimator": "fixed", "rho": 1500, "gc_every": 100,
                  "reorder_window": 3}},
    {"keys": "rotation", "classes": 1, "capacity": None, "delay": 200, "min_bytes": 3,
     "receiver": {"estimator": "unlimited", "gc_every": 100, "recovery_grace": 200}},
]
SEEDS = (1, 2, 3)
STEPS = 1500
PEERS = (("10.0.0.1", 4000), ("10.0.0.2", 4001))
KEYS = tuple(Key(bytes((i,)) * 16) for i in range(1, 4))


def _outcome(o: Any) -> list[Any]:
    if isinstance(o, Answered):
        return ["answered", o.conn, o.ts, o.status.name, o.data.hex()]
    if isinstance(o, Rejected):
        return ["rejected", o.conn, o.ts, str(o.reason)]
    return ["gave_up", o.conn, o.ts, o.acked]


def exchange(scenario: dict[str, Any], seed: int) -> dict[str, Any]:
    """Every input and output of one seeded exchange, as JSON-able lists."""
    rng = random.Random(seed)
    old, current, stranger = KEYS
    server_ring = client_ring = None
    if scenario["keys"] == "one":
        server_ring = client_ring = Keyring(current)
    elif scenario["keys"] == "rotation":  # the client moves to the new key at step 700
        server_ring = Keyring(current, previous=old, previous_until=40_000)
        client_ring = Keyring(old)
    config = ReceiverConfig(resilient=True, beta=3000, latest_every=500, **scenario["receiver"])
    storages = [MemoryStorage() for _ in range(scenario["classes"])]
    log: list[Any] = []
    retired: list[Any] = []  # statistics of the services a restart replaced
    seq = itertools.count()
    to_server: list[tuple[int, int, bytes, tuple[str, int]]] = []
    to_client: list[tuple[int, int, bytes, tuple[str, int]]] = []
    running: list[tuple[int, int, Any]] = []
    sent: list[bytes] = []  # recent frames, to truncate and corrupt
    now = 1000

    def new_service() -> RpcService[tuple[str, int]]:
        return RpcService(FrameCodec(server_ring), receiver=build_receiver(
            config, list(storages), start=now, capacity=scenario["capacity"]),
            resend_pace_ms=0)  # these ticks are not microseconds: resends unpaced

    service = new_service()
    caller = RpcCaller("cl", Policy(interval=150, give_up_after=2500, backoff=2,
                                    max_interval=600),
                       FrameCodec(client_ring), reply_ack_delay=scenario["delay"],
                       reply_ack_min_bytes=scenario["min_bytes"])
    conns = [f"c{i}" for i in range(5)]
    peer = PEERS[0]

    def send(queue: list[Any], datagram: bytes, to: tuple[str, int]) -> None:
        sent.append(datagram)
        del sent[:-20]
        roll = rng.random()
        if roll < 0.1:
            log.append(["lost", datagram.hex()])
            return
        for _ in range(2 if roll > 0.9 else 1):  # duplicated; delays reorder
            heapq.heappush(queue, (now + rng.randint(1, 150), next(seq), datagram, to))

    def at_service(datagram: bytes, source: tuple[str, int]) -> None:
        out = service.receive(datagram, source, now=now)
        log.append(["S", now, datagram.hex(), [[list(o.peer), o.datagram.hex()]
                                               for o in out.sends],
                    [[r.proc, r.args.hex(), r.start.conn, r.start.ts] for r in out.runs]])
        for o in out.sends:
            send(to_client, o.datagram, o.peer)
        for run in out.runs:
            if rng.random() < 0.9:  # else never completes: COMPUTING until the end
                running.append((now + rng.randint(0, 500), next(seq), run))

    def at_caller(datagram: bytes) -> None:
        out = caller.receive(datagram, now=now)
        log.append(["C", now, datagram.hex(), [d.hex() for d in out.datagrams],
                    [_outcome(o) for o in out.outcomes]])
        for d in out.datagrams:
            send(to_server, d, peer)

    def garbage() -> bytes:
        kind = rng.randrange(6)
        if kind == 0 or not sent:
            return rng.randbytes(rng.randrange(40))
        frame = rng.choice(sent)
        if kind == 1:
            return frame[:rng.randrange(len(frame))]
        if kind == 2:
            at = rng.randrange(len(frame))
            return frame[:at] + bytes((frame[at] ^ (1 << rng.randrange(8)),)) + frame[at + 1:]
        if kind == 3:  # a foreign key, no key, or a key where none is expected
            codec = FrameCodec(rng.choice([Keyring(stranger), None, Keyring(current)]))
            return codec.seal(KIND_RPC, frame[4:] or b"\x01")
        if kind == 4:
            return FrameCodec(client_ring).seal(rng.choice([KIND_RPC, KIND_CHANNEL]), b"")
        return frame + rng.randbytes(rng.randrange(1, 4))

    def forged(to_server_side: bool) -> bytes:
        """A well-framed message a peer might send (stale, early, huge or wrong ts...)."""
        conn = rng.choice(conns + ["rogue", "x" * 255])
        ts = rng.choice([1, now - 5000, now, now + 10_000, 1 << 62, 1 << 63, MAX_TS])
        ts = max(ts, 1)
        if to_server_side:
            message = rng.choice([
                Call(conn, ts, bytes((4,)) + b"null" + rng.randbytes(3)).encode(),
                Call(conn, ts, None).encode(), ReplyAck(conn, ts).encode(),
                Ack(conn, ts).encode(), Call(conn, ts, b"\x09ab").encode(),
                bytes((1, 1)) + b"c" + bytes(8) + bytes(4)])  # ts 0
        else:
            message = rng.choice([
                Reply(conn, ts, encode_result(Status.OK, b"r")).encode(),
                Reply(conn, ts, b"\x07bad status").encode(), Reply(conn, ts, b"").encode(),
                Ack(conn, ts).encode(), encode_refusal(conn, ts, rng.choice(list(Reason))),
                bytes((REFUSE_TYPE, 1)) + b"c" + ts.to_bytes(8, "big") + b"\x09",
                Call(conn, ts, None).encode()])
        return FrameCodec(client_ring if to_server_side else server_ring).seal(KIND_RPC, message)

    for step in range(STEPS):
        now += rng.randint(1, 40)
        roll = rng.random()
        if roll < 0.3:  # a call, now and then on a fresh connection or a skewed clock
            conn = rng.choice(conns)
            if rng.random() < 0.1:
                conn = f"f{step}"
                conns.append(conn)
            skew = rng.choice([0] * 18 + [20_000, -6000])
            proc = rng.choice(["null", "echo", "echo", ""])
            try:
                ts, frames = caller.call(proc, rng.randbytes(rng.randrange(6)),
                                         now=max(now + skew, 1), conn=conn)
                log.append(["call", now, conn, ts, [f.hex() for f in frames]])
                for f in frames:
                    send(to_server, f, peer)
            except ProtocolUsageError as exc:
                log.append(["call refused", now, conn, str(exc)])
        elif roll < 0.36:
            at_service(rng.choice([garbage, lambda: forged(True)])(), rng.choice(PEERS))
        elif roll < 0.40:
            at_caller(rng.choice([garbage, lambda: forged(False)])())
        elif roll < 0.41:
            conn = rng.choice(conns)
            caller.abandon(conn)
            log.append(["abandon", conn])
        elif roll < 0.415:
            frames = caller.flush_reply_acks()
            log.append(["flush", [f.hex() for f in frames]])
            for f in frames:
                send(to_server, f, peer)
        elif roll < 0.42:
            peer = rng.choice(PEERS)  # the client moved
        elif roll < 0.4212:  # a restart from the same stable storage
            retired.append(dataclasses.asdict(service.statistics()))
            service = new_service()
            log.append(["restart", now, service.down_until])
        elif roll < 0.43 and sent:  # a captured frame replayed in a burst (resend bound)
            frame = rng.choice(sent)
            for _ in range(6):
                at_service(frame, rng.choice(PEERS))
        if step == 700 and scenario["keys"] == "rotation":
            caller.codec.keyring = Keyring(current)
        for at, n, run in sorted(running):  # computations that finish by now
            if at > now:
                break
            running.remove((at, n, run))
            status = rng.choice([Status.OK, Status.OK, Status.ERROR, Status.NO_PROCEDURE])
            out = service.complete(run, status, run.args[::-1], now=now)
            log.append(["done", now, run.start.conn, run.start.ts,
                        [[list(o.peer), o.datagram.hex()] for o in out.sends]])
            for o in out.sends:
                send(to_client, o.datagram, o.peer)
            if rng.random() < 0.02:
                try:
                    service.complete(run, Status.OK, b"", now=now)
                except ProtocolUsageError as exc:
                    log.append(["twice", str(exc)])
        while to_server and to_server[0][0] <= now:
            _, _, datagram, source = heapq.heappop(to_server)
            at_service(datagram, source)
        while to_client and to_client[0][0] <= now:
            at_caller(heapq.heappop(to_client)[2])
        deadline = caller.next_deadline()
        if deadline is not None and deadline <= now:
            out = caller.handle_timer(now=now)
            log.append(["timer", now, [d.hex() for d in out.datagrams],
                        [_outcome(o) for o in out.outcomes]])
            for d in out.datagrams:
                send(to_server, d, peer)
        deadline = service.next_deadline()
        if deadline is not None and deadline <= now:
            service.handle_timer(now=now)
    return {
        "log": log, "retired": retired,
        "service": dataclasses.asdict(service.statistics()),
        "server": dataclasses.asdict(service.server.statistics()),
        "server codec": dataclasses.asdict(service.codec.statistics()),
        "states": [[c, None if (s := service.server.state(c)) is None else [s[0].value, s[1]]]
                   for c in conns],
        "client": dataclasses.asdict(caller.client.statistics()),
        "caller": [caller.rejected, caller.reply_acks_saved, caller.malformed,
                   caller.next_deadline(), [[c.conn, c.ts] for c in caller.client.outstanding()]],
        "client codec": dataclasses.asdict(caller.codec.statistics()),
    }


SCRIPT = """
import json
from timebound import _compiled
from tests.test_compiled_rpc import SCENARIOS, SEEDS, exchange
runs = [exchange(scenario, seed) for scenario in SCENARIOS for seed in SEEDS]
print(json.dumps({"core": _compiled.status(), "runs": runs}))
"""


def _run(pure: bool, script: str = SCRIPT, root: str = ROOT) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, ROOT]))
    env.pop(_compiled.PURE_ENV, None)
    if pure:
        env[_compiled.PURE_ENV] = "1"
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@BUILT
def test_compiled_rpc_core_behaves_as_the_pure_python() -> None:
    compiled, pure = _run(pure=False), _run(pure=True)
    assert compiled["core"] == "mypyc-compiled core"
    assert pure["core"] == "pure-Python core"
    assert len(compiled["runs"]) == len(pure["runs"]) == len(SCENARIOS) * len(SEEDS)
    for got, want in zip(compiled["runs"], pure["runs"], strict=True):
        assert len(got["log"]) == len(want["log"])
        for a, b in zip(got["log"], want["log"], strict=True):
            assert a == b
        assert got == want
    # The exchanges reach what they are meant to exercise.
    runs = pure["runs"]
    total = {key: sum(run["service"][key] for run in runs)
             for key in runs[0]["service"] if key not in ("latest",)}
    for key in ("executions", "duplicates", "stale", "early", "down", "overloaded", "acks",
                "replies_retransmitted", "reply_acks", "malformed", "unauthenticated",
                "late_completions", "withheld"):
        assert total[key] + sum(r[key] for run in runs for r in run["retired"]) > 0, key
    client = {key: sum(run["client"][key] for run in runs) for key in runs[0]["client"]}
    for key in ("retransmissions", "truncated", "gave_up", "clock_bumps", "ignored",
                "malformed"):
        assert client[key] > 0, key
    events = {entry[0] for run in runs for entry in run["log"]}
    assert {"lost", "restart", "call refused", "twice", "flush"} <= events
    outcomes = {o[0] for run in runs for entry in run["log"]
                if entry[0] in ("C", "timer") for o in entry[-1]}
    assert outcomes == {"answered", "rejected", "gave_up"}


def test_exchange_is_deterministic() -> None:
    """The differential test compares two processes: the exchange depends on its seed
    only (here, in this process, whichever core it runs)."""
    assert exchange(SCENARIOS[1], 5) == exchange(SCENARIOS[1], 5)


STATUS = """
import json
from timebound import _compiled
import timebound.core.rpc, timebound.core.wire
modules = {m: __import__(m, fromlist=["_"]).__file__ for m in _compiled.MODULES}
print(json.dumps({"core": _compiled.status(), "modules": modules}))
"""


@BUILT
def test_a_changed_rpc_source_loads_every_module_pure(tmp_path: Path) -> None:
    """A copy of the built package: as built it runs compiled; once one rpc source
    changes, every compiled module (at-most-once ones included) loads from ``.py``."""
    src = os.path.dirname(os.path.dirname(os.path.abspath(_compiled.__file__)))
    shutil.copytree(os.path.join(src, "timebound"), tmp_path / "timebound",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in os.listdir(src):
        if "__mypyc" in name:
            shutil.copy(os.path.join(src, name), tmp_path / name)
    built = _run(pure=False, script=STATUS, root=str(tmp_path))
    assert built["core"] == "mypyc-compiled core"
    assert all(path.startswith(str(tmp_path)) and not path.endswith(".py")
               for path in built["modules"].values()), built
    with open(tmp_path / "timebound" / "core" / "rpc" / "_live.py", "a") as handle:
        handle.write("\n# changed\n")
    stale = _run(pure=False, script=STATUS, root=str(tmp_path))
    assert stale["core"] == "pure-Python core"
    assert all(path.startswith(str(tmp_path)) and path.endswith(".py")
               for path in stale["modules"].values()), stale


def test_frozen_records_of_the_compiled_modules_pickle() -> None:
    """Every frozen dataclass of a compiled module unpickles through its constructor
    (``core/_frozen.py``): a compiled frozen class refuses the default, by assignment."""
    for module in _compiled.MODULES:
        loaded = importlib.import_module(module)
        for value in vars(loaded).values():
            if (isinstance(value, type) and value.__module__ == module
                    and dataclasses.is_dataclass(value)
                    and value.__dataclass_params__.frozen):  # type: ignore[attr-defined]
                assert "__reduce__" in value.__dict__, f"{module}.{value.__name__}"
    service: RpcService[str] = RpcService(FrameCodec(None), rho=100, gc_every=10)
    caller = RpcCaller("c", Policy(10, 100, 2, 40), FrameCodec(Keyring(KEYS[0])))
    records = [Call("c", 1, None), Call("c", MAX_TS, b"x"), Ack("c", 2), Reply("c", 3, b"r"),
               ReplyAck("c", 4), Policy(10, 100, 2, 40), Answered("c", 1, Status.OK, b""),
               Rejected("c", 1, Reason.EARLY), Keyring(KEYS[0], KEYS[1], 7),
               service.statistics(), service.server.statistics(), service.codec.statistics(),
               caller.client.statistics(), caller.client.call(b"", now=5)]
    for record in records:
        assert pickle.loads(pickle.dumps(record)) == record
