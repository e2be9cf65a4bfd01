"""The Python API and the CLI of ``timebound.net`` on loopback (bounded, cleaned up)."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.ports import free_port
from tests.test_net_support import TIMEBOUND, start_server, stop
from timebound.net import CallRejected, CallTimeout, Clock, RemoteError, RpcClient, RpcServer


class Service:
    def __init__(self) -> None:
        self.count = 0

    def incr(self, payload: bytes) -> bytes:
        self.count += 1
        return str(int(payload or b"0") + 1).encode()

    async def slow(self, payload: bytes) -> bytes:
        await asyncio.sleep(0.2)  # longer than the first retransmissions: ACKed
        return b"done"

    def boom(self, payload: bytes) -> bytes:
        raise KeyError("nope")

    def _private(self, payload: bytes) -> bytes:  # not a handler
        return b""


def test_api_object_handlers_async_errors_and_many_outstanding(tmp_path: Path) -> None:
    service = Service()

    async def main() -> None:
        async with RpcServer(service, host="127.0.0.1", port=0,
                             storage=str(tmp_path / "latest.json"), key=None) as server:
            assert server.address[0] == "127.0.0.1" and server.address[1] > 0
            async with RpcClient(server.address, key=None) as client:
                assert await client.call("incr", b"41", timeout=2.0) == b"42"
                assert await client.call("slow", timeout=2.0) == b"done"
                with pytest.raises(RemoteError, match="KeyError"):
                    await client.call("boom")
                with pytest.raises(RemoteError) as info:
                    await client.call("_private")
                assert info.value.no_procedure
                results = await asyncio.gather(*(client.call("incr", b"%d" % i)
                                                 for i in range(200)))
                assert results == [b"%d" % (i + 1) for i in range(200)]
                assert len(client._idle) >= 100  # distinct connection ids, reused after
            stats = server.statistics()
            assert stats["acks"] >= 1  # the slow call was ACKed, then probed
            assert stats["executions"] == 204 and service.count == 201
        assert (tmp_path / "latest.json").exists()

    asyncio.run(asyncio.wait_for(main(), 20))


class _Choked:
    """The server's socket, except that its first ``n`` replies find it full."""

    def __init__(self, sock: object, n: int) -> None:
        self.sock = sock
        self.n = n

    def __getattr__(self, name: str) -> object:
        return getattr(self.sock, name)

    def sendto(self, data: bytes, peer: object) -> int:
        if self.n > 0:
            self.n -= 1
            raise BlockingIOError
        return self.sock.sendto(data, peer)  # type: ignore[attr-defined, no-any-return]


def test_replies_the_socket_cannot_take_wait_for_it_to_be_writable() -> None:
    async def main() -> None:
        async with RpcServer({"echo": lambda p: p}) as server:
            choked = _Choked(server._sock, 3)
            server._sock = choked
            async with RpcClient(server.address, interval=5.0) as client:
                # No retransmission within the timeout: the replies come from the backlog.
                got = await asyncio.gather(*(client.call("echo", b"%d" % i, timeout=2.0)
                                             for i in range(5)))
            assert got == [b"%d" % i for i in range(5)]
            assert choked.n == 0 and not server._backlog
            assert server.statistics()["executions"] == 5

    asyncio.run(main())


def test_client_binds_and_resolves_names() -> None:
    """A numeric or named ``local_addr`` (resolved in the server address's family):
    the client's socket is bound there; an address not of this machine is an error."""
    async def main() -> None:
        async with RpcServer({"echo": lambda p: p}) as server:
            port = server.address[1]
            for local in (("127.0.0.1", 0), ("localhost", 0)):
                async with RpcClient(("127.0.0.1", port), local_addr=local) as client:
                    assert client.local_address[0] == "127.0.0.1"
                    assert await client.call("echo", b"x", timeout=2.0) == b"x"
            with pytest.raises(OSError):
                async with RpcClient(("127.0.0.1", port), local_addr=("192.0.2.1", 0)):
                    pass  # not an address of this machine: nothing to bind

    asyncio.run(main())


def test_timeout_and_keys(tmp_path: Path) -> None:
    async def main() -> None:
        async with RpcServer({"echo": lambda p: p}, storage=str(tmp_path / "l.json"),
                             key=b"a" * 16, previous_key=b"b" * 16) as server:
            async with RpcClient(server.address, key=b"a" * 16) as current:
                assert await current.call("echo", b"1") == b"1"
            async with RpcClient(server.address, key=b"b" * 16) as previous:
                assert await previous.call("echo", b"2") == b"2"
            async with RpcClient(server.address, key=b"c" * 16) as wrong:
                with pytest.raises(CallTimeout, match="at most once"):
                    await wrong.call("echo", b"3", timeout=0.3)
            async with RpcClient(server.address, clock=Clock(offset=3600 * 10**6)) as plain:
                with pytest.raises(CallTimeout):
                    await plain.call("echo", timeout=0.3)  # unauthenticated: dropped
            assert server.statistics()["unauthenticated"] >= 2
            async with RpcClient(server.address, key=b"a" * 16,
                                 clock=Clock(offset=3600 * 10**6)) as ahead:
                with pytest.raises(CallRejected) as info:
                    await ahead.call("echo")
                assert info.value.reason == "early"

    asyncio.run(asyncio.wait_for(main(), 20))


def test_metrics_exposition() -> None:
    from timebound.net._metrics import exposition

    text = exposition(lambda: {"calls": 3, "table_size": 2, "latest": None}).decode()
    assert "timebound_rpc_calls_total 3.0" in text
    assert "timebound_rpc_table_size 2.0" in text


def _cli(*args: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run(TIMEBOUND + list(args), capture_output=True, text=True,
                          timeout=timeout)


def test_cli_serve_call_stats_metrics_and_sigterm(tmp_path: Path) -> None:
    metrics_port = free_port()
    proc, (host, port) = start_server(["timebound.net.examples:app", "--storage",
                                       str(tmp_path / "l.json"), "--metrics-port",
                                       str(metrics_port)])
    try:
        target = f"{host}:{port}"
        ok = _cli("rpc", "call", target, "incr", "41")
        assert (ok.returncode, ok.stdout) == (0, "42\n")
        failed = _cli("rpc", "call", target, "fail", "why")
        assert failed.returncode == 6 and "remote error" in failed.stderr
        assert len(failed.stderr.strip().splitlines()) == 1
        stats = _cli("rpc", "stats", target, "--json")
        counters = json.loads(stats.stdout)
        assert counters["executions"] >= 2 and "unauthenticated" in counters
        body = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics",
                                      timeout=5).read().decode()
        assert "timebound_rpc_executions_total" in body
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        stop(proc)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".latest.")]


def test_cli_exit_codes(tmp_path: Path) -> None:
    timeout = _cli("rpc", "call", "127.0.0.1:9", "x", "--timeout", "200ms")
    assert timeout.returncode == 3 and timeout.stderr.startswith("timebound: timeout:")
    for bad in (["rpc", "call", "nohost", "x"], ["rpc", "call", "h:99999", "x"],
                ["rpc", "call", "127.0.0.1:9", "x", "--timeout", "0s"],
                ["rpc", "call", "127.0.0.1:9", "x", "--timeout", "1"],
                ["rpc", "serve", "nosuchmodule:app", "--storage", str(tmp_path / "s")],
                ["rpc", "serve", "timebound.net.examples:app", "--storage", "s", "--rho", "0us"],
                ["rpc", "serve", "timebound.net.examples:app", "--storage", "s", "--key-file",
                 str(tmp_path / "missing")],
                ["net", "proxy", "--upstream", "127.0.0.1:9", "--loss", "2"]):
        done = _cli(*bad)
        assert done.returncode == 2, (bad, done.stderr)
        assert done.stderr.startswith("timebound: error:") and done.stderr.count("\n") == 1


def test_cli_proxy_relays(tmp_path: Path) -> None:
    server, (host, port) = start_server(["timebound.net.examples:app", "--storage",
                                         str(tmp_path / "l.json")])
    proxy = subprocess.Popen(TIMEBOUND + ["net", "proxy", "--upstream", f"{host}:{port}",
                                          "--loss", "0.2", "--duplicate", "0.2"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proxy.stdout is not None
        line = proxy.stdout.readline()
        assert line.startswith("listening on udp://")
        ok = _cli("rpc", "call", line.strip().removeprefix("listening on udp://"), "echo", "hi",
                  "--timeout", "5s")
        assert (ok.returncode, ok.stdout) == (0, "hi\n")
    finally:
        proxy.send_signal(signal.SIGTERM)
        try:
            proxy.wait(timeout=10)
        finally:
            proxy.kill() if proxy.poll() is None else None
            for stream in (proxy.stdout, proxy.stderr):
                if stream is not None:
                    stream.close()
        stop(server)


def test_bench_smoke(tmp_path: Path) -> None:
    done = subprocess.run(TIMEBOUND + ["rpc", "bench", "--smoke", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "rpc_bench.md").read_text()
    for label in ("at-most-once RPC", "plain UDP", "plain UDP, raw socket", "TCP, one connection",
                  "TCP, connection per call", "gRPC, one channel", "gRPC, channel per call"):
        assert label in text
    assert "at-most-once / plain UDP" in done.stdout and "[paper]" in text
    assert sys.executable


def test_docs_python_example_runs() -> None:
    import contextlib
    import io
    import re

    text = (Path(__file__).parent.parent / "docs" / "net.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S)
    assert code is not None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code.group(1), "docs/net.md", "exec"), {"__name__": "docs"})
    assert out.getvalue().splitlines() == [
        "b'42'", "remote error: no procedure 'nope'", "102 101"]
