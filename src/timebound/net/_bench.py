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
every protocol of a column, then run 2, ... The table pools a cell's samples into
one median and p99; the JSON keeps each run's median too (``run_medians``). A bar
(SCMP's section 3: (i) at-most-once within ``BAR_I`` times plain UDP, (ii) a TCP
connection per call at least ``BAR_II`` times at-most-once) is judged run by run:
run k's ratio is run k's median of the numerator over run k's median of the
denominator (same column, same loop, measured next to each other), and **the bar
is judged on the median of the per-run ratios** (to two decimals, as printed),
not on the ratio of the pooled medians, which one loaded run can move. Each bar
line gives the pooled ratio, the per-run range, the median, in how many runs the
bar was met, and ``inside run-to-run noise`` when some runs met it and others did
not (``bar_line``; ``tests/test_rpc_bench_runs.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from timebound._compiled import status as core_status
from timebound._safety import atomic_write_text, check_writable
from timebound.errors import UsageError
from timebound.net._client import RpcClient
from timebound.net._loop import install_uvloop, new_event_loop
from timebound.net._server import RpcServer

PROTOCOLS = ("amo", "udp", "udp-raw", "tcp-one-connection", "tcp-per-call",
             "grpc-one-channel", "grpc-channel-per-call")
LABELS = {"amo": "at-most-once RPC", "udp": "plain UDP",
          "udp-raw": "plain UDP, raw sockets (our client's and server's plumbing)",
          "tcp-one-connection": "TCP, one connection",
          "tcp-per-call": "TCP, connection per call", "grpc-one-channel": "gRPC, one channel",
          "grpc-channel-per-call": "gRPC, channel per call"}
_LEN = struct.Struct(">I")
GRPC_METHOD = "/timebound.bench.Null/Call"
#: bar (i): at-most-once RPC's median per call at most this many times plain UDP's
BAR_I = 1.10
#: bar (ii): a TCP connection per call's median at least this many times at-most-once's
BAR_II = 2.0


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


MODES = (("seq", "(i) 1 client, sequential calls"),
         ("fresh", "(ii) clients with a fresh socket each [paper]"),
         ("shared", "(ii) clients sharing one socket"))


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

    with asyncio.Runner(loop_factory=lambda: new_event_loop(use_uvloop)) as runner:
        return runner.run(everything())


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


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


def cell_of(runs: Sequence[Sequence[float]]) -> dict[str, Any]:
    """One cell of the results from each run's latencies: the pooled median, p99 and
    count, and each run's median in run order (``run_medians``)."""
    pooled = [x for run in runs for x in run]
    return {"median": statistics.median(pooled), "p99": _p99(pooled), "n": len(pooled),
            "run_medians": [statistics.median(run) for run in runs]}


def format_table(results: dict[str, Any], n: int, runs: int) -> str:
    lines = [f"Null calls on loopback, {n} calls x {runs} run(s) per cell; latency per "
             "call in µs (median / p99); 'x UDP' = median / plain UDP's median in the "
             "same column. (ii) 'fresh' opens a socket/connection/channel per client "
             "(the paper's experiment: each client its own handle); 'shared' reuses one "
             "socket for all connection ids.", "", BARS, ""]
    for loop_name, per_mode in results.items():
        lines.append(f"### event loop: {loop_name}")
        lines.append("")
        head = "| protocol |" + "".join(f" {title}: median | p99 | x UDP |" for _, title in MODES)
        lines.append(head)
        lines.append("|---|" + "---:|---:|---:|" * len(MODES))
        for proto in PROTOCOLS:
            if all(proto not in per_mode[m] for m, _ in MODES):
                continue
            row = f"| {LABELS[proto]} |"
            for mode, _ in MODES:
                cell = per_mode[mode].get(proto)
                udp = per_mode[mode].get("udp")
                if cell is None:
                    row += " - | - | - |"
                    continue
                ratio = cell["median"] / udp["median"] if udp else float("nan")
                row += f" {cell['median']:.0f} | {cell['p99']:.0f} | {ratio:.2f} |"
            lines.append(row)
        lines.append("")
        lines.extend(_verdicts(per_mode))
        lines.append("")
    return "\n".join(lines)


BARS = (
    "Bars: each bar line gives, after '=', the ratio of the two pooled medians, then "
    "the ratio run by run (run k's median of the one protocol over run k's median of "
    "the other, same column and loop, the runs interleaved): their range, their median "
    "and in how many runs the bar was met. The bar is judged on the median of the "
    "per-run ratios (to two decimals, as printed), not on the pooled ratio; "
    "'inside run-to-run noise' marks a bar that some runs met and others missed.")


def run_ratios(numerator: Sequence[float], denominator: Sequence[float]) -> list[float]:
    """Run k's ratio: run k's median of the numerator over run k's median of the
    denominator (the two cells measured in the same run)."""
    if len(numerator) != len(denominator) or not numerator:
        raise ValueError(f"runs differ: {len(numerator)} against {len(denominator)}")
    return [a / b for a, b in zip(numerator, denominator, strict=True)]


@dataclass(frozen=True)
class Judged:
    """One bar judged over the runs: ``met`` on ``median`` (the median of ``per_run``),
    ``met_runs`` of ``len(per_run)`` runs met it on their own, ``noise`` when some
    runs met it and others did not; ``pooled`` is the ratio of the pooled medians."""

    pooled: float
    per_run: tuple[float, ...]
    median: float
    met: bool
    met_runs: int
    noise: bool


def _meets(ratio: float, op: str, bar: float) -> bool:
    shown = round(ratio, 2)  # judged as printed, so a reader of the file can check it
    return shown <= bar if op == "<=" else shown >= bar


def judge_bar(pooled: float, per_run: Sequence[float], op: str, bar: float) -> Judged:
    """Judge ``ratio op bar`` (``op`` is ``<=`` or ``>=``) on the median of the
    per-run ratios."""
    if op not in ("<=", ">="):
        raise ValueError(f"op must be <= or >=, got {op!r}")
    runs = tuple(per_run)
    median = statistics.median(runs)
    met_runs = sum(_meets(r, op, bar) for r in runs)
    return Judged(pooled, runs, median, _meets(median, op, bar), met_runs,
                  0 < met_runs < len(runs))


def bar_line(label: str, judged: Judged, op: str, bar: float) -> str:
    """``- LABEL = POOLED (per run: LOW-HIGH, median M, met in K of N runs[, inside
    run-to-run noise]) (bar: OP BAR: met|not met)``."""
    runs = judged.per_run
    noise = ", inside run-to-run noise" if judged.noise else ""
    return (f"- {label} = {judged.pooled:.2f} (per run: {min(runs):.2f}-{max(runs):.2f}, "
            f"median {judged.median:.2f}, met in {judged.met_runs} of {len(runs)} "
            f"run{'s' if len(runs) != 1 else ''}{noise}) "
            f"(bar: {op} {bar:.2f}: {'met' if judged.met else 'not met'})")


def _run_medians(cell: dict[str, Any]) -> list[float]:
    return list(cell.get("run_medians") or [cell["median"]])


def _judge_cells(num: dict[str, Any], den: dict[str, Any], op: str, bar: float) -> Judged:
    return judge_bar(num["median"] / den["median"],
                     run_ratios(_run_medians(num), _run_medians(den)), op, bar)


def _verdicts(per_mode: dict[str, Any]) -> list[str]:
    out = []
    seq = per_mode["seq"]
    out.append(bar_line("(i) at-most-once / plain UDP",
                        _judge_cells(seq["amo"], seq["udp"], "<=", BAR_I), "<=", BAR_I))
    for mode in ("seq", "fresh"):
        raw = per_mode[mode].get("udp-raw")
        if raw:
            out.append(f"- for information, {mode}: at-most-once / plain UDP over raw "
                       f"sockets (the same plumbing as ours) = "
                       f"{per_mode[mode]['amo']['median'] / raw['median']:.2f}")
    for mode in ("fresh", "shared"):
        cells = per_mode[mode]
        out.append(bar_line(f"(ii, {mode}) TCP per call / at-most-once",
                            _judge_cells(cells["tcp-per-call"], cells["amo"], ">=", BAR_II),
                            ">=", BAR_II))
    fresh = per_mode["fresh"]
    bases = [f"{LABELS[p]} = {fresh['tcp-per-call']['median'] / fresh[p]['median']:.2f}"
             for p in ("udp", "udp-raw") if fresh.get(p)]
    out.append("- for information, (ii, fresh): TCP per call / " + ", / ".join(bases)
               + " (no protocol over UDP with the same plumbing does better)")
    return out


FAIRNESS = (
    "Fairness: every protocol's client runs in one process and every server in "
    "another, on the same event loop (the section's title) on both sides; each "
    "column uses one socket set-up mode for every protocol. Per call, the plain UDP "
    "client makes one future and waits with `asyncio.wait_for` (its timeout); the "
    "at-most-once client makes one future and keeps its timeout beside the "
    "retransmission deadline under one re-armed timer, sends CALL, gets REPLY and, "
    "for a reply under 64 bytes, sends no REPLY-ACK (two datagrams per call, as the "
    "paper's 'only these two messages are needed'). The at-most-once client's "
    "socket is a connected non-blocking socket read through `loop.add_reader` (no "
    "transport or protocol object: set-up and close cost no loop iteration); the "
    "plain UDP client and echo server use `create_datagram_endpoint`, what a "
    "Python user would write (on the asyncio loop, its transport reads every datagram with "
    "`recvfrom(256 KiB)`, which costs glibc an mmap and munmap each time; "
    "our server, like our client, reads a non-blocking socket with "
    "`recvfrom(64 KiB)` from `loop.add_reader`), so part of the difference is "
    "socket plumbing, not protocol: the row 'plain UDP, raw sockets' is plain "
    "UDP with our client's and our server's plumbing, to tell the two apart. "
    "The at-most-once server runs SCMP with a resilient receiver (latest in a file, fsynced every second) and the RPC state "
    "machine. Runs of the protocols are interleaved. The paper's Fig. 3-3 is the "
    "'fresh' column (each client its own handle and socket).")


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
    with asyncio.Runner(loop_factory=lambda: new_event_loop(ns.serve == "uvloop")) as r:
        r.run(_serve(ns.grpc))
