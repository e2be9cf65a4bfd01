"""The RPC on a hostile network: no amplification, no reply redirected,
service ids, deadlines, refusals without a key, read-only built-ins, the loopback
default, fuzzing.

Every live test runs on loopback with bounded counts. The whole module runs again
under the other build (pure Python when the compiled core is in use) in
``test_the_other_build``, so each rule is checked in both builds.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import random
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from timebound import _compiled
from timebound.core.rpc import (
    AMPLIFICATION,
    INCARNATION_BYTES,
    Call,
    Policy,
    Reason,
    RpcCaller,
    RpcService,
    Server,
    Status,
    encode_call_payload,
)
from timebound.core.rpc._live_messages import (
    CHALLENGE_TYPE,
    REFUSE_TYPE,
    VALIDATE_TYPE,
    call_budget_ms,
    decode_call_payload,
    decode_challenge,
    encode_refusal,
)
from timebound.core.rpc._messages import REPLY_TYPE
from timebound.core.wire import KIND_RPC, FrameCodec, Key, Keyring
from timebound.errors import UsageError
from timebound.net import CallRejected, CallTimeout, RpcClient, RpcServer

pytestmark = pytest.mark.waits

KEY = b"k" * 32
BIG = 60_000


def _handlers(ledger: list[bytes]) -> dict[str, Callable[[bytes], bytes]]:
    def big(payload: bytes) -> bytes:
        ledger.append(payload)
        return b"x" * BIG

    def echo(payload: bytes) -> bytes:
        ledger.append(payload)
        return payload

    return {"big": big, "echo": echo}


# -- the core: a duplicate never moves where a reply goes -------------------------


def test_duplicate_does_not_move_reply() -> None:
    server: Server[str] = Server(rho=10**9, gc_every=10**6)
    call = Call("c", 10, b"payload").encode()
    out = server.receive(call, "client", now=10)
    (start,) = out.starts
    # A forged copy from another address while the call computes: answered (ACK)
    # where it came from, but the completion's REPLY still goes to the caller.
    ack = server.receive(call, "victim", now=11)
    assert [o.peer for o in ack.sends] == ["victim"]
    done = server.complete(start, b"r" * 1000, now=12)
    assert [o.peer for o in done.sends] == ["client"]


# -- the sans-IO service: budgets, challenges, deadlines ---------------------------


def _pair(key: bytes | None = None) -> tuple[RpcService[Any], RpcCaller]:
    ring = None if key is None else Keyring(Key(key))
    service: RpcService[Any] = RpcService(FrameCodec(ring), rho=10**9, gc_every=10**6,
                                          secret=b"s" * 32,
                                          readonly={"timebound.stats": lambda: b"{" * 900})
    caller = RpcCaller("cl", Policy(interval=1000, give_up_after=10**9), FrameCodec(ring))
    return service, caller


@pytest.mark.parametrize("key", [None, KEY])
def test_large_first_reply_waits_for_validation(key: bytes | None) -> None:
    service, caller = _pair(key)
    _ts, (call,) = caller.call("big", b"", now=100, conn="cl.1")
    run = service.receive(call, "client", now=100).runs[0]
    (challenge,) = service.complete(run, Status.OK, b"x" * BIG, now=101).sends
    assert challenge.peer == "client" and len(challenge.datagram) <= AMPLIFICATION * len(call)
    opened = service.codec.open(challenge.datagram)
    assert opened is not None and opened.body[0] == CHALLENGE_TYPE
    # The client library echoes the token and sends the call again.
    out = caller.receive(challenge.datagram, now=102)
    validate, again = out.datagrams
    assert caller.codec.open(validate) is not None
    assert service.receive(validate, "client", now=103).sends == ()
    assert service.validated("client", 103)
    (reply,) = service.receive(again, "client", now=104).sends
    assert reply.peer == "client" and len(reply.datagram) > BIG
    answered = caller.receive(reply.datagram, now=105).outcomes
    assert len(answered) == 1 and len(answered[0].data) == BIG  # type: ignore[union-attr]
    stats = service.statistics()
    assert (stats.challenges, stats.validations, stats.executions) == (1, 1, 1)


def test_token_is_bound_to_its_address_and_time() -> None:
    service, caller = _pair()
    _ts, (call,) = caller.call("big", b"", now=100, conn="cl.1")
    run = service.receive(call, "client", now=100).runs[0]
    (challenge,) = service.complete(run, Status.OK, b"x" * BIG, now=101).sends
    validate = caller.receive(challenge.datagram, now=102).datagrams[0]
    service.receive(validate, "attacker", now=103)  # another address: refused
    assert not service.validated("attacker", 103)
    service.receive(validate, "client", now=service.token_lifetime + 200)  # too late
    assert not service.validated("client", service.token_lifetime + 200)
    assert service.statistics().bad_tokens == 2
    # A forged token (flipped MAC byte) is refused too.
    opened = service.codec.open(validate)
    assert opened is not None
    forged = bytearray(opened.body)
    forged[-1] ^= 1
    service.receive(service.codec.seal(KIND_RPC, bytes(forged)), "client", now=104)
    assert not service.validated("client", 104)


def test_deadline_passed_call_is_not_started() -> None:
    service, caller = _pair()
    ts, (call,) = caller.call("echo", b"late", now=1_000, conn="cl.1", budget_ms=5)
    # Held back by the network: it reaches the server 6 ms after it was made.
    out = service.receive(call, "client", now=1_000 + 6_000)
    assert out.runs == ()
    (reply,) = out.sends
    answered = caller.receive(reply.datagram, now=7_001).outcomes
    assert [a.status for a in answered] == [Status.EXPIRED]  # type: ignore[union-attr]
    # A later copy is a duplicate of the call the server holds: same answer, no run.
    again = service.receive(call, "client", now=8_000)
    assert again.runs == () and len(again.sends) == 1
    assert service.statistics().expired == 1 and service.statistics().executions == 1
    # Within its budget the call starts.
    _ts, (fresh,) = caller.call("echo", b"ok", now=9_000, conn="cl.2", budget_ms=5)
    assert len(service.receive(fresh, "client", now=13_999).runs) == 1


def test_call_payload_carries_the_budget() -> None:
    payload = encode_call_payload("proc", b"args", 1234)
    assert decode_call_payload(payload) == ("proc", b"args")
    assert call_budget_ms(payload) == 1234
    with pytest.raises(Exception, match="budget"):
        encode_call_payload("proc", b"", 1 << 32)


def test_readonly_needs_no_table_entry() -> None:
    service, caller = _pair()
    service.server.receiver.capacity = 0  # no at-most-once entry can be taken
    _ts, (call,) = caller.call("timebound.stats", b"", now=100, conn="cl.1")
    out = service.receive(call, "client", now=100)
    assert out.runs == () and service.statistics().table_size == 0
    (answer,) = out.sends  # 900 bytes within 3x the padded CALL: answered at once
    assert len(answer.datagram) <= AMPLIFICATION * len(call)
    opened = service.codec.open(answer.datagram)
    assert opened is not None and opened.body[0] == REPLY_TYPE


# -- live: amplification per message type, with and without a key ----------------


class _Spoofer:
    """A UDP socket standing for a victim whose address an attacker forges: what the
    attacker sends from it and what the server sends back to it are counted."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_DGRAM)
        self.sock.bind((host, 0))
        self.sock.setblocking(False)
        self.sent = self.received = 0

    def send(self, datagram: bytes, to: tuple[str, int]) -> None:
        self.sock.sendto(datagram, to)
        self.sent += len(datagram)

    async def drain(self, wait: float = 0.15) -> list[bytes]:
        await asyncio.sleep(wait)
        got = []
        while True:
            try:
                data = self.sock.recv(70_000)
            except BlockingIOError:
                return got
            self.received += len(data)
            got.append(data)

    @property
    def ratio(self) -> float:
        return self.received / max(1, self.sent)


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"], ids=["ipv4", "ipv6"])
@pytest.mark.parametrize("key", [None, KEY])
def test_amplification_worst_ratio_per_message_type(tmp_path: Path, key: bytes | None,
                                                    host: str) -> None:
    """Every message type an attacker can send from a forged source (IPv4 and IPv6)
    draws at most 3x its bytes back to that source."""
    ledger: list[bytes] = []
    ratios: dict[str, float] = {}

    async def main() -> None:
        async with RpcServer(_handlers(ledger), storage=str(tmp_path / "latest.json"),
                             key=key, host=host) as server:
            # A legitimate client gets a stored 60 KB reply (after validating).
            async with RpcClient(server.address, key=key, reply_ack_min_bytes=10**6) as client:
                assert len(await client.call("big", b"")) == BIG
            ring = None if key is None else Keyring(Key(key))
            crafted = RpcCaller("attacker", Policy(10**6, 10**9), FrameCodec(ring))
            target = server.address

            async def attack(name: str, datagrams: list[bytes], repeat: int = 20) -> None:
                victim = _Spoofer(host)
                for _ in range(repeat):
                    for d in datagrams:
                        victim.send(d, target)
                await victim.drain()
                ratios[name] = victim.ratio
                victim.sock.close()

            # Frames an on-path attacker captured (the same bytes: sealed with the key).
            # The client used conn <id>.1; replaying its call and probes from elsewhere.
            conn = f"{client.client_id}.1"
            history = server.service.server.state(conn)
            assert history is not None
            _state, ts = history
            # The client's CALL, byte for byte: its budget is its default timeout, 2 s,
            # less the margin the server's ``expired`` needs to reach it (0.1 s).
            replayed = ring_seal(ring, Call(conn, ts, encode_call_payload("big", b"", 1900))
                                 .encode())
            probe = ring_seal(ring, Call(conn, ts, None).encode())
            await attack("CALL replayed (stored reply)", [replayed])
            await attack("CALL truncated (probe)", [probe])
            _t, (fresh,) = crafted.call("big", b"", now=server.clock.now(), conn="a.1")
            await attack("CALL new (large reply)", [fresh], repeat=1)
            _t, (stats,) = crafted.call("timebound.stats", b"", now=server.clock.now(),
                                        conn="a.2")
            await attack("CALL timebound.stats", [stats])
            _t, (echo,) = crafted.call("echo", b"", now=server.clock.now(), conn="a.3")
            await attack("CALL echo (small reply)", [echo], repeat=1)
            bogus = ring_seal(ring, bytes((VALIDATE_TYPE,)) + Call("a.1", 5, None).encode()[1:]
                              + bytes(24))
            await attack("VALIDATE forged", [bogus])
            reply_ack = ring_seal(ring, bytes((5,)) + Call(conn, ts, None).encode()[1:])
            await attack("REPLY-ACK", [reply_ack])
            await attack("malformed", [b"\x01\x01\x00\x00\x02", os.urandom(40)])
            old = ring_seal(ring, Call("old.1", 1, encode_call_payload("echo", b"")).encode())
            await attack("CALL stale (REFUSE)", [old])

    asyncio.run(main())
    for name, ratio in sorted(ratios.items(), key=lambda item: -item[1]):
        print(f"{host}, {'key' if key else 'no key'}: {name}: {ratio:.2f}x")
    assert ratios, "no attack measured"
    worst = max(ratios.values())
    assert worst <= AMPLIFICATION, ratios
    # The stored reply exists and is large: the bound is not vacuous. A stored reply
    # is re-sent at most 3 times, paced, to the replays and probes of its call
    # together: on a slow machine the replays' own datagrams may take all 3 resends.
    assert ledger
    assert ratios["CALL truncated (probe)"] + ratios["CALL replayed (stored reply)"] > 0


def ring_seal(ring: Keyring | None, message: bytes) -> bytes:
    return FrameCodec(ring).seal(KIND_RPC, message)


# -- live: service ids, refusals without a key, the loopback default --------------


def test_call_for_one_service_never_runs_on_another(tmp_path: Path) -> None:
    ledger: list[bytes] = []

    async def main() -> None:
        async with RpcServer(_handlers(ledger), storage=str(tmp_path / "a.json"), key=KEY,
                             service="A") as a, \
                RpcServer(_handlers(ledger), storage=str(tmp_path / "b.json"), key=KEY,
                          service="B") as b:
            async with RpcClient(a.address, key=KEY, service="A") as client:
                assert await client.call("echo", b"once") == b"once"
            conn = f"{client.client_id}.1"
            state = a.service.server.state(conn)
            assert state is not None
            captured = FrameCodec(Keyring(Key(KEY)), "A").seal(  # the client's CALL
                KIND_RPC, Call(conn, state[1], encode_call_payload("echo", b"once", 2000))
                .encode())
            spoof = _Spoofer()
            spoof.send(captured, b.address)
            await spoof.drain()
            spoof.sock.close()
            assert b.statistics()["unauthenticated"] == 1
            assert b.statistics()["calls"] == 0
            async with RpcClient(b.address, key=KEY, service="A") as wrong:
                with pytest.raises(CallTimeout):
                    await wrong.call("echo", b"x", timeout=0.3)

    asyncio.run(main())
    assert ledger == [b"once"]


def test_refusal_without_key_proves_nothing() -> None:
    async def main() -> None:
        fake = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        fake.bind(("127.0.0.1", 0))
        fake.setblocking(False)
        loop = asyncio.get_running_loop()

        async def forge(key: bytes | None) -> None:
            # An on-path attacker answers the CALL with REFUSE early.
            data, addr = await loop.sock_recvfrom(fake, 70_000)
            codec = FrameCodec(None)  # the attacker has no key
            opened = codec.open(data)
            if opened is None:  # a tagged CALL: read its ids past the tag-less header
                body = data[4:-16]
            else:
                body = opened.body
            call_header = body[:2 + body[1] + 8]
            conn = call_header[2:-8].decode()
            ts = int.from_bytes(call_header[-8:], "big")
            fake.sendto(codec.seal(KIND_RPC, encode_refusal(conn, ts, Reason.EARLY)
                                   + bytes(INCARNATION_BYTES)), addr)

        async with RpcClient(fake.getsockname(), interval=5.0) as client:
            task = asyncio.ensure_future(forge(None))
            with pytest.raises(CallRejected) as caught:
                await client.call("echo", b"x", timeout=2.0)
            await task
            assert caught.value.reason == "early"
            assert caught.value.authenticated is False and not caught.value.did_not_run
            assert "may have run" in str(caught.value)
        async with RpcClient(fake.getsockname(), key=KEY, interval=5.0) as keyed:
            task = asyncio.ensure_future(forge(KEY))
            with pytest.raises(CallTimeout):  # the forged refusal does not verify
                await keyed.call("echo", b"x", timeout=0.5)
            await task
            assert keyed.caller.codec.unauthenticated == 1
        fake.close()

    asyncio.run(main())
    assert REFUSE_TYPE == 6


def test_held_back_call_never_starts_after_its_deadline(tmp_path: Path) -> None:
    ledger: list[bytes] = []

    async def main() -> None:
        async with RpcServer(_handlers(ledger), storage=str(tmp_path / "l.json")) as server:
            caller = RpcCaller("held", Policy(10**6, 10**9), FrameCodec(None))
            now = server.clock.now()
            _t, (call,) = caller.call("echo", b"late", now=now, conn="held.1", budget_ms=20)
            await asyncio.sleep(0.06)  # the network held it back past its deadline
            spoof = _Spoofer()
            spoof.send(call, server.address)
            (answer,) = await spoof.drain()
            spoof.sock.close()
            outcome = caller.receive(answer, now=server.clock.now()).outcomes
            assert [o.status for o in outcome] == [Status.EXPIRED]  # type: ignore[union-attr]
            assert server.statistics()["expired"] == 1
            async with RpcClient(server.address) as client:  # the caller's view
                client.clock.offset -= 200_000  # its clock 200 ms behind the server's
                with pytest.raises(CallRejected) as caught:
                    await client.call("echo", b"skewed", timeout=0.1)
                assert caught.value.reason in ("expired", "down", "stale")

    asyncio.run(main())
    assert ledger == []


def _non_loopback_address() -> str:
    try:
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        probe.connect(("192.0.2.1", 9))  # TEST-NET-1: no datagram is sent by connect
        address = probe.getsockname()[0]
        probe.close()
        if not address.startswith("127."):
            return str(address)
    except OSError:
        pass
    return "0.0.0.0"


def test_without_key_only_loopback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    host = _non_loopback_address()

    async def main() -> None:
        with pytest.raises(UsageError, match="without a key"):
            async with RpcServer({}, host=host, storage=str(tmp_path / "a.json")):
                pass
        assert not (tmp_path / "a.json").exists()  # refused before creating storage
        async with RpcServer({}, host=host, storage=str(tmp_path / "b.json"), insecure=True):
            pass
        async with RpcServer({}, host=host, storage=str(tmp_path / "c.json"), key=KEY):
            pass

    asyncio.run(main())
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "--insecure" in warnings[0]


def test_default_capacity_and_keyed_flood_takes_no_entry(tmp_path: Path) -> None:
    async def main() -> None:
        async with RpcServer({"echo": lambda p: p}, storage=str(tmp_path / "l.json"),
                             key=KEY) as server:
            assert server.capacity is not None and 10_000 <= server.capacity <= 1_000_000
            flood = RpcCaller("flood", Policy(10**6, 10**9), FrameCodec(None))  # no key
            spoof = _Spoofer()
            for i in range(2000):
                _t, (d,) = flood.call("echo", b"", now=server.clock.now(), conn=f"f.{i}")
                spoof.send(d, server.address)
                if i % 50 == 49:
                    await spoof.drain(0.002)  # paced: the socket buffer keeps them all
            await spoof.drain(0.3)
            spoof.sock.close()
            stats = server.statistics()
            assert stats["table_size"] == 0 and stats["unauthenticated"] >= 1900
            async with RpcClient(server.address, key=KEY) as client:
                assert await client.call("echo", b"ok") == b"ok"

    asyncio.run(main())


# -- fuzz: random and mutated frames, then a correct client ------------------------


def _mutations(valid: list[bytes], rng: random.Random, count: int) -> list[bytes]:
    out = []
    for i in range(count):
        base = bytearray(rng.choice(valid))
        how = i % 4
        if how == 0:
            out.append(bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 80))))
        elif how == 1 and base:
            for _ in range(rng.randrange(1, 4)):
                base[rng.randrange(len(base))] ^= 1 << rng.randrange(8)
            out.append(bytes(base))
        elif how == 2:
            out.append(bytes(base[:rng.randrange(len(base) + 1)]))
        else:
            at = rng.randrange(len(base))
            base[at:at + 8] = rng.getrandbits(64).to_bytes(8, "big")
            out.append(bytes(base))
    return out


@pytest.mark.parametrize("key", [None, KEY])
def test_fuzz_no_traceback_bounded_state_then_served(tmp_path: Path, key: bytes | None,
                                                     capfd: pytest.CaptureFixture[str]) -> None:
    ledger: list[bytes] = []
    errors: list[object] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _l, ctx: errors.append(ctx))
        async with RpcServer(_handlers(ledger), storage=str(tmp_path / "l.json"),
                             key=key) as server:
            ring = None if key is None else Keyring(Key(key))
            caller = RpcCaller("fz", Policy(10**6, 10**9), FrameCodec(ring))
            now = server.clock.now()
            valid = [caller.call(p, b"a" * n, now=now + i, conn=f"fz.{i}")[1][0]
                     for i, (p, n) in enumerate([("echo", 0), ("big", 3), ("timebound.stats", 0),
                                                 ("echo", 200)])]
            valid += [ring_seal(ring, m) for m in (
                Call("fz.9", now, None).encode(),
                bytes((VALIDATE_TYPE,)) + Call("fz.9", now, None).encode()[1:] + bytes(24),
                encode_refusal("fz.9", now, Reason.STALE),
                bytes((CHALLENGE_TYPE,)) + Call("fz.9", now, None).encode()[1:] + bytes(24))]
            spoof = _Spoofer()
            rng = random.Random(26)
            for n, datagram in enumerate(_mutations(valid, rng, 20_000)):
                spoof.send(datagram, server.address)
                if n % 500 == 499:
                    await spoof.drain(0.001)
            await spoof.drain(0.2)
            spoof.sock.close()
            assert server.statistics()["table_size"] <= 20_000
            async with RpcClient(server.address, key=key) as client:
                assert await client.call("echo", b"after") == b"after"
                assert len(await client.call("big", b"")) == BIG

    asyncio.run(main())
    assert errors == []
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err and "Traceback" not in captured.out


# -- the other build ----------------------------------------------------------------


@pytest.mark.skipif(os.environ.get("TIMEBOUND_HOSTILE_OTHER_BUILD") == "1",
                    reason="already the other build")
def test_the_other_build(tmp_path: Path) -> None:
    """Every test above, again, with the other build of the compiled modules (the
    pure Python when the compiled core is in use; skipped when it is not built)."""
    if _compiled.status() != "mypyc-compiled core":
        pytest.skip("the compiled core is not built: the pure build ran above")
    env = dict(os.environ, TIMEBOUND_PURE_PYTHON="1", TIMEBOUND_HOSTILE_OTHER_BUILD="1")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__,
         "--basetemp", str(tmp_path / "pure")],
        env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert decode_challenge  # the module's names are used by the pure run too


# -- the fault proxy: its duplicates never amplify toward a capped address ---------


@pytest.mark.parametrize("capped", [False, True])
def test_proxy_duplicates_stay_within_3x_for_a_capped_address(tmp_path: Path,
                                                              capped: bool) -> None:
    """Through a proxy duplicating every datagram, a victim's address gets each
    answer several times; capped (the default), the proxy never sends it more than
    3x what it sent. Uncapped (``capped=False``: loopback clients only) the same run
    shows the ratio the cap removes."""
    from timebound.net import FaultProxy, Faults
    from timebound.net._proxy import FaultProxy as _Proxy

    assert inspect.signature(_Proxy).parameters["capped"].default is True  # the default

    ledger: list[bytes] = []
    result: dict[str, float] = {}

    async def main() -> None:
        async with RpcServer(_handlers(ledger), storage=str(tmp_path / "l.json")) as server:
            async with FaultProxy(server.address, Faults(duplicate=1.0), seed=1,
                                  capped=capped) as proxy:
                assert isinstance(proxy, _Proxy)
                victim = _Spoofer()
                for i in range(20):  # probes of unknown calls: each answered REFUSE
                    victim.send(ring_seal(None, Call(f"v.{i}", 5, None).encode()),
                                proxy.address)
                await victim.drain(0.3)
                victim.sock.close()
                result["ratio"] = victim.ratio
                result["capped"] = proxy.stats.capped

    asyncio.run(main())
    print(f"proxy, duplicate=1.0, {'capped' if capped else 'uncapped'}: "
          f"{result['ratio']:.2f}x")
    if capped:
        assert result["ratio"] <= AMPLIFICATION and result["capped"] > 0, result
    else:
        assert result["ratio"] > AMPLIFICATION, result  # what the cap prevents


def test_metrics_endpoint_is_loopback_unless_insecure(tmp_path: Path) -> None:
    """The Prometheus counters are plain HTTP (no key): ``--metrics-host`` defaults
    to 127.0.0.1, and another address needs ``--insecure`` even with a key."""
    (tmp_path / "key").write_bytes(KEY.hex().encode() + b"\n")  # a key file: 64 hex
    (tmp_path / "key").chmod(0o600)
    done = subprocess.run(
        [sys.executable, "-m", "timebound.cli", "rpc", "serve", "timebound.net.examples:app",
         "--storage", str(tmp_path / "l.json"), "--key-file", str(tmp_path / "key"),
         "--metrics-port", "0", "--metrics-host", _non_loopback_address()],
        capture_output=True, text=True, timeout=60, check=False)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith("timebound: error:") and "--insecure" in lines[0]
    assert not (tmp_path / "l.json").exists()
