"""``timebound rpc bench``: the paper's benchmark (SCMP Figs. 3-2 and 3-3), live.

Null calls on loopback from this process to a server process (one core each on a
2-core machine). (i) one client makes N sequential calls; (ii) N clients make one
call each, in two socket set-up modes: *fresh* (every client opens its own socket,
connection or channel: what a new SunRPC client handle does; we take this to be the
paper's experiment) and *shared* (one process reuses one socket for N connection
ids: the protocol's cost without socket set-up). Protocols: at-most-once RPC
(``timebound.net``), plain UDP request/response, TCP over one connection, TCP with a
connection per call, gRPC unary (grpcio asyncio, one channel / channel per call).
Each loop (asyncio, uvloop when installed) gets its own server process.

Runs and bars. Each cell is measured in R runs (``--runs``), interleaved: run 1 of
every protocol of a column, then run 2, ...; the table and the bars, judged run by
run, are ``_bench_report``'s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

from timebound._compiled import status as core_status
from timebound._safety import atomic_write_text, check_writable
from timebound.errors import UsageError
from timebound.net._bench_report import (
    FAIRNESS,
    MODES,
    PROTOCOLS,
    cell_of,
    format_table,
)
from timebound.net._client import RpcClient
from timebound.net._loop import install_uvloop
from timebound.net._loop import run as run_loop
from timebound.net._server import RpcServer

_LEN = struct.Struct(">I")
GRPC_METHOD = "/timebound.bench.Null/Call"
# -- servers (run in their own process) --------------------------------------------


class _UdpEcho(asyncio.DatagramProtocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: Any = transport

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.transport.sendto(data, addr)


class _RawUdpEcho:
    """Plain UDP echo with the at-most-once server's plumbing: a non-blocking socket
    read by ``loop.add_reader`` with ``recvfrom(64 KiB)``, no transport."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setblocking(False)
        self.sock.bind(("127.0.0.1", 0))
        asyncio.get_running_loop().add_reader(self.sock.fileno(), self._readable)

    def _readable(self) -> None:
        try:
            data, addr = self.sock.recvfrom(65536)
            self.sock.sendto(data, addr)
        except OSError:
            pass

    def close(self) -> None:
        asyncio.get_running_loop().remove_reader(self.sock.fileno())
        self.sock.close()


async def _tcp_echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readexactly(4)
            body = await reader.readexactly(_LEN.unpack(head)[0])
            writer.write(head + body)
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    except asyncio.CancelledError:
        # the server stops (the bench ends or is interrupted): end quietly, as
        # Python 3.11's stream callback reports a cancelled handler as an error
        pass
    finally:
        writer.close()


async def _serve(with_grpc: bool) -> None:
    loop = asyncio.get_running_loop()
    folder = tempfile.mkdtemp(prefix="timebound-bench-")
    ports: dict[str, int] = {}
    # workers=0: the null handler never blocks, so it runs inline (the protocol's cost,
    # not a thread hand-off's; the default pool adds about 70 us per call here).
    server = RpcServer({"null": lambda payload: b""}, storage=os.path.join(folder, "latest.json"),
                       workers=0)
    await server.start()
    ports["amo"] = server.address[1]
    udp, _ = await loop.create_datagram_endpoint(_UdpEcho, local_addr=("127.0.0.1", 0))
    ports["udp"] = udp.get_extra_info("sockname")[1]
    raw = _RawUdpEcho()
    ports["udp-raw"] = raw.sock.getsockname()[1]
    tcp = await asyncio.start_server(_tcp_echo, "127.0.0.1", 0)
    ports["tcp"] = tcp.sockets[0].getsockname()[1]
    grpc_server = None
    if with_grpc:
        import grpc

        def null(request: bytes, context: Any) -> bytes:
            return b""

        handler = grpc.method_handlers_generic_handler(
            "timebound.bench.Null", {"Call": grpc.unary_unary_rpc_method_handler(null)})
        grpc_server = grpc.aio.server()
        grpc_server.add_generic_rpc_handlers((handler,))
        ports["grpc"] = grpc_server.add_insecure_port("127.0.0.1:0")
        await grpc_server.start()
    print(json.dumps(ports), flush=True)
    await loop.run_in_executor(None, sys.stdin.read)  # until the parent closes stdin
    await server.close()
    raw.close()
    if grpc_server is not None:
        await grpc_server.stop(0)
    for name in os.listdir(folder):
        os.unlink(os.path.join(folder, name))
    os.rmdir(folder)


# -- clients ---------------------------------------------------------------------

Timed = Callable[[], Awaitable[None]]


class _UdpClient(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.waiter: asyncio.Future[bytes] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: Any = transport

    def datagram_received(self, data: bytes, addr: Any) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(data)

    async def call(self, payload: bytes) -> bytes:
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.sendto(payload)
        return await asyncio.wait_for(self.waiter, 2.0)


async def _udp_open(port: int) -> _UdpClient:
    _, proto = await asyncio.get_running_loop().create_datagram_endpoint(
        _UdpClient, remote_addr=("127.0.0.1", port))
    return proto


class _RawUdpClient:
    """Plain UDP request/response with the at-most-once client's plumbing: a connected
    non-blocking socket read by ``loop.add_reader``, one future per call and a timer
    for its timeout (no transport, protocol or ``wait_for``)."""

    def __init__(self, port: int) -> None:
        self.loop = asyncio.get_running_loop()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setblocking(False)
        self.sock.connect(("127.0.0.1", port))
        self.waiter: asyncio.Future[bytes] | None = None
        self.loop.add_reader(self.sock.fileno(), self._readable)

    def _readable(self) -> None:
        try:
            data = self.sock.recv(65536)
        except (BlockingIOError, ConnectionRefusedError):
            return
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(data)

    async def call(self, payload: bytes) -> bytes:
        waiter: asyncio.Future[bytes] = self.loop.create_future()
        self.waiter = waiter

        def expire() -> None:
            if not waiter.done():
                waiter.set_exception(TimeoutError())
        timer = self.loop.call_later(2.0, expire)
        self.sock.send(payload)
        try:
            return await waiter
        finally:
            timer.cancel()

    def close(self) -> None:
        self.loop.remove_reader(self.sock.fileno())
        self.sock.close()


async def _tcp_call(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    payload: bytes) -> bytes:
    writer.write(_LEN.pack(len(payload)) + payload)
    head = await reader.readexactly(4)
    return await reader.readexactly(_LEN.unpack(head)[0])


async def _measure(fn: Timed, n: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        await fn()
    out: list[float] = []
    clock = time.perf_counter_ns
    for _ in range(n):
        t = clock()
        await fn()
        out.append((clock() - t) / 1000.0)
    return out


async def _run_protocol(proto: str, mode: str, ports: dict[str, int], n: int) -> list[float] | None:
    """Latencies (µs) of ``n`` calls of ``proto`` in ``mode`` (seq, fresh, shared)."""
    warm = max(5, n // 20)
    if proto == "amo":
        addr = ("127.0.0.1", ports["amo"])
        if mode == "fresh":
            async def fresh() -> None:
                async with RpcClient(addr) as c:
                    await c.call("null")
            return await _measure(fresh, n, warm)
        async with RpcClient(addr) as client:
            new = mode == "shared"

            async def one() -> None:
                await client.call("null", new_connection=new)
            return await _measure(one, n, warm)
    if proto == "udp":
        if mode == "fresh":
            async def fresh_udp() -> None:
                c = await _udp_open(ports["udp"])
                await c.call(b"0")
                c.transport.close()
            return await _measure(fresh_udp, n, warm)
        c = await _udp_open(ports["udp"])
        try:
            async def one_udp() -> None:
                await c.call(b"0")
            return await _measure(one_udp, n, warm)
        finally:
            c.transport.close()
    if proto == "udp-raw":
        if mode == "fresh":
            async def fresh_raw() -> None:
                c = _RawUdpClient(ports["udp-raw"])
                try:
                    await c.call(b"0")
                finally:
                    c.close()
            return await _measure(fresh_raw, n, warm)
        raw = _RawUdpClient(ports["udp-raw"])
        try:
            async def one_raw() -> None:
                await raw.call(b"0")
            return await _measure(one_raw, n, warm)
        finally:
            raw.close()
    if proto.startswith("tcp"):
        if proto == "tcp-one-connection" and mode == "seq":
            reader, writer = await asyncio.open_connection("127.0.0.1", ports["tcp"])
            try:
                async def one_tcp() -> None:
                    await _tcp_call(reader, writer, b"")
                return await _measure(one_tcp, n, warm)
            finally:
                writer.close()
        if proto == "tcp-one-connection":
            return None  # one call per client: a connection per call (next row)

        async def per_call() -> None:
            r, w = await asyncio.open_connection("127.0.0.1", ports["tcp"])
            await _tcp_call(r, w, b"")
            w.close()
            await w.wait_closed()
        return await _measure(per_call, n, warm)
    if "grpc" not in ports:
        return None
    import grpc

    target = f"127.0.0.1:{ports['grpc']}"
    if proto == "grpc-one-channel":
        if mode == "fresh":
            return None  # a fresh client has its own channel (next row)
        async with grpc.aio.insecure_channel(target) as channel:
            stub = channel.unary_unary(GRPC_METHOD)

            async def one_grpc() -> None:
                await stub(b"", timeout=5.0)
            return await _measure(one_grpc, n, warm)

    async def channel_per_call() -> None:
        async with grpc.aio.insecure_channel(target) as channel:
            await channel.unary_unary(GRPC_METHOD)(b"", timeout=5.0)
    return await _measure(channel_per_call, n, max(2, warm // 5))


def _client_side(ports: dict[str, int], n: int, runs: int, protocols: tuple[str, ...],
                 use_uvloop: bool) -> dict[str, dict[str, list[list[float]] | None]]:
    """Per mode and protocol, the latencies (µs) of each run, or None where the
    protocol has no such mode."""
    async def everything() -> dict[str, dict[str, list[list[float]] | None]]:
        # Runs are interleaved (run 1 of every protocol, then run 2, ...) so that a
        # change in the machine's load hits every protocol of a column alike.
        result: dict[str, dict[str, list[list[float]] | None]] = {}
        for mode, _ in MODES:
            per: dict[str, list[list[float]] | None] = {
                proto: None if mode == "shared" and proto in (
                    "tcp-one-connection", "grpc-channel-per-call") else []
                for proto in protocols}
            for _ in range(runs):
                for proto in protocols:
                    done = per[proto]
                    if done is None:
                        continue
                    got = await _run_protocol(proto, mode, ports, n)
                    if got is None:
                        per[proto] = None
                    else:
                        done.append(got)
            result[mode] = per
        return result

    return run_loop(everything(), use_uvloop)


def run_bench(n: int, runs: int, loops: list[str], with_grpc: bool) -> dict[str, Any]:
    protocols = PROTOCOLS if with_grpc else PROTOCOLS[:5]
    results: dict[str, Any] = {}
    for loop_name in loops:
        use_uv = loop_name == "uvloop"
        server = subprocess.Popen(
            [sys.executable, "-m", "timebound.net._bench", "--serve", loop_name,
             "--grpc" if with_grpc else "--no-grpc"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None and server.stdin is not None
            line = server.stdout.readline()
            if not line:
                raise UsageError("bench", "the benchmark server did not start")
            ports = json.loads(line)
            samples = _client_side(ports, n, runs, protocols, use_uv)
        finally:
            if server.stdin is not None:
                server.stdin.close()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
            if server.stdout is not None:
                server.stdout.close()
        results[loop_name] = {mode: {proto: None if s is None else cell_of(s)
                                     for proto, s in per.items()}
                              for mode, per in samples.items()}
    return results


def core_round_trip_cpu_us(n: int) -> float:
    """CPU µs per null call through ``RpcCaller`` and ``RpcService`` joined in
    memory, with the live defaults (best of 5 rounds of ``n`` calls)."""
    from timebound.core.atmostonce import MemoryStorage
    from timebound.core.rpc import Policy, RpcCaller, RpcService, Status, build_receiver
    from timebound.core.wire import FrameCodec
    from timebound.net._client import DEFAULT_REPLY_ACK_MIN_BYTES
    from timebound.net._server import default_receiver

    config = default_receiver()
    assert config.beta is not None and config.latest_every is not None
    best = float("inf")
    peer = ("127.0.0.1", 1)
    for _ in range(5):
        service: RpcService[Any] = RpcService(
            FrameCodec(None), receiver=build_receiver(config, [MemoryStorage()], start=1))
        caller = RpcCaller("0123456789abcdef", Policy(20_000, 3_600_000_000, 2, 1_000_000),
                           FrameCodec(None), reply_ack_delay=50_000,
                           reply_ack_min_bytes=DEFAULT_REPLY_ACK_MIN_BYTES)
        now = 10
        began = time.process_time_ns()
        for _ in range(n):
            now += 100
            _ts, frames = caller.call("null", b"", now=now, conn="0123456789abcdef.1")
            out = service.receive(frames[0], peer, now=now)
            for run in out.runs:
                for o in service.complete(run, Status.OK, b"", now=now).sends:
                    caller.receive(o.datagram, now=now)
        best = min(best, (time.process_time_ns() - began) / n / 1000)
    return best


def main(args: argparse.Namespace) -> int:
    n = args.calls if args.calls is not None else (50 if args.smoke else 1000)
    runs = args.runs if args.runs is not None else (1 if args.smoke else 3)
    if not 10 <= n <= 100_000:
        raise UsageError("--calls", f"must be in 10..100000, got {n}")
    if not 1 <= runs <= 20:
        raise UsageError("--runs", f"must be in 1..20, got {runs}")
    if args.loops is None:
        loops = ["asyncio", "uvloop"] if install_uvloop() else ["asyncio"]
    else:
        loops = [x.strip() for x in args.loops.split(",") if x.strip()]
        for name in loops:
            if name not in ("asyncio", "uvloop"):
                raise UsageError("--loops", f"unknown loop {name!r} (asyncio, uvloop)")
        if "uvloop" in loops and not install_uvloop():
            raise UsageError("--loops", "uvloop is not installed (pip install 'timebound[uvloop]')")
    with_grpc = not args.no_grpc
    if with_grpc:
        try:
            import grpc  # noqa: F401
        except ImportError:
            raise UsageError("bench", "grpcio is not installed (pip install 'timebound[bench]'"
                                      " or pass --no-grpc)") from None
    path, data = (os.path.join(args.out, name) for name in ("rpc_bench.md", "rpc_bench.json"))
    try:  # the output checked before a minute of measuring, not after
        os.makedirs(args.out, exist_ok=True)
    except OSError as exc:
        raise UsageError("--out", f"cannot create '{args.out}': {exc.strerror}") from None
    for target in (path, data):
        check_writable(target, "--out")
    started = time.perf_counter()
    load_start = os.getloadavg()[0]
    core_us = core_round_trip_cpu_us(2000 if args.smoke else 20000)
    results = run_bench(n, runs, loops, with_grpc)
    table = format_table(results, n, runs)
    command = "timebound rpc bench" + (" --smoke" if args.smoke else "") + (
        f" --calls {args.calls}" if args.calls else "") + (f" --runs {args.runs}" if args.runs else "")
    text = (f"# At-most-once RPC benchmark (SCMP Figs. 3-2, 3-3)\n\n"
            f"Command: `{command}`; Python {platform.python_version()}, "
            f"{os.cpu_count()} CPUs, {platform.machine()}; load average "
            f"{load_start:.1f} at the start and {os.getloadavg()[0]:.1f} at the end "
            f"(other work on the machine inflates every row, Python-heavy rows most); "
            f"took {time.perf_counter() - started:.1f} s.\n\n"
            f"In-process cost of one at-most-once null call, client and server cores "
            f"together, no sockets (CPU time, best of 5, little affected by load): "
            f"{core_us:.1f} µs ({core_status()}).\n\n{FAIRNESS}\n\n{table}\n")
    atomic_write_text(path, text, "--out")
    atomic_write_text(data, json.dumps({"calls": n, "runs": runs, "results": results},
                                       indent=1), "--out")
    print(text)
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", choices=("asyncio", "uvloop"), required=True)
    parser.add_argument("--grpc", dest="grpc", action="store_true")
    parser.add_argument("--no-grpc", dest="grpc", action="store_false")
    ns = parser.parse_args()
    run_loop(_serve(ns.grpc), ns.serve == "uvloop")
