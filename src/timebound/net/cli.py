"""``timebound rpc serve|call|stats|bench`` and ``timebound net proxy``.

Ticks of the receiver options are microseconds (the live timestamp unit). Every bad
input is one line ``timebound: error: ...`` and exit status 2 (raised as
``UsageError`` for ``timebound.cli``); ``rpc call`` exits 1 on a timeout, a
rejection or a remote error, with one line naming which.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from typing import Any, TextIO

from timebound.adapters.atmostonce import AtMostOnceOptions, add_receiver_arguments
from timebound.core.atmostonce import ReceiverConfig
from timebound.errors import StorageError, UsageError

#: Largest --timeout, seconds.
MAX_TIMEOUT = 3600.0


def _command_group(commands: Any, name: str, help: str,
                   description: str | None = None) -> Any:
    """The subcommands (``dest`` ``<name>_command``, required) of a new command."""
    parser = commands.add_parser(name, help=help, description=description)
    return parser.add_subparsers(dest=f"{name}_command", metavar="COMMAND", required=True)


def add_rpc_parser(commands: Any) -> None:
    sub = _command_group(
        commands, "rpc", help="at-most-once RPC over UDP: serve, call, stats, bench",
        description="At-most-once remote procedure calls over UDP without connection "
                    "set-up (SCMP section 3.1): a call never runs twice, across server "
                    "crashes too. Wire format: docs/wire.md; guide: docs/net.md.")

    serve = sub.add_parser(
        "serve", help="serve the handlers of MODULE:ATTR",
        description="Serve MODULE:ATTR (a dict of handlers, or an object whose public "
                    "methods are handlers; def f(payload: bytes) -> bytes or async def). "
                    "Prints one line 'listening on udp://HOST:PORT' when ready. SIGTERM "
                    "and SIGINT stop it cleanly. Receiver ticks are microseconds.")
    serve.add_argument("app", metavar="MODULE:ATTR")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=0, help="UDP port 0..65535 (0: any)")
    serve.add_argument("--storage", required=True, metavar="PATH",
                       help="file holding latest (SCMP Fig. 2-2); created if missing")
    _add_key_options(serve)
    serve.add_argument("--previous-key-file", metavar="F",
                       help="key rotation: also accept this previous key")
    serve.add_argument("--previous-key-grace", type=float, default=3600.0, metavar="S",
                       help="seconds the previous key stays accepted (default 3600)")
    serve.add_argument("--metrics-port", type=int, metavar="P",
                       help="serve Prometheus metrics on http://HOST:P/metrics")
    serve.add_argument("--no-uvloop", action="store_true", help="asyncio's own loop")
    add_receiver_options(serve)
    serve.set_defaults(handler=run_serve)

    call = sub.add_parser("call", help="call PROC on HOST:PORT and print the reply",
                          description="Exit 0 and print the reply; exit 1 on a timeout, "
                                      "a rejection or a remote error (one line naming it).")
    call.add_argument("target", metavar="HOST:PORT")
    call.add_argument("proc", metavar="PROC")
    call.add_argument("payload", nargs="?", default="", metavar="PAYLOAD",
                      help="UTF-8 payload (default empty)")
    call.add_argument("--timeout", type=float, default=2.0, metavar="S",
                      help=f"seconds, (0, {MAX_TIMEOUT:g}] (default 2)")
    _add_key_options(call)
    call.set_defaults(handler=run_call)

    stats = sub.add_parser("stats", help="print a server's counters",
                           description="Call the built-in timebound.stats procedure.")
    stats.add_argument("target", metavar="HOST:PORT")
    stats.add_argument("--timeout", type=float, default=2.0, metavar="S")
    stats.add_argument("--json", action="store_true", help="one JSON object")
    _add_key_options(stats)
    stats.set_defaults(handler=run_stats)

    bench = sub.add_parser(
        "bench", help="the paper's benchmark (Figs. 3-2, 3-3) vs UDP, TCP, gRPC",
        description="Null calls on loopback: (i) one client, N sequential calls; (ii) N "
                    "clients, one call each; at-most-once RPC vs plain UDP (asyncio "
                    "endpoints, and raw sockets with our client's and server's "
                    "plumbing), TCP over one connection, TCP per call, gRPC (one channel, channel per call); with "
                    "and without uvloop. Writes OUT/rpc_bench.md and prints the table.")
    bench.add_argument("--smoke", action="store_true", help="tiny sizes, runs in seconds")
    bench.add_argument("--calls", type=int, default=None, metavar="N",
                       help="calls per experiment, 10..100000 (default 1000; smoke 50)")
    bench.add_argument("--runs", type=int, default=None, metavar="R",
                       help="runs per cell, 1..20 (default 3; smoke 1)")
    bench.add_argument("--out", default="benchmarks", metavar="DIR",
                       help="where rpc_bench.md goes (default benchmarks)")
    bench.add_argument("--no-grpc", action="store_true", help="skip the gRPC baselines")
    bench.add_argument("--loops", default=None, metavar="asyncio,uvloop",
                       help="event loops to measure (default both when uvloop is installed)")
    bench.set_defaults(handler=run_bench)


def add_net_parser(commands: Any) -> None:
    sub = _command_group(
        commands, "net", help="network tooling: a fault-injecting UDP proxy")
    proxy = sub.add_parser(
        "proxy", help="relay UDP with loss, duplication, delay and reordering",
        description="Relay datagrams between clients and --upstream, with faults in both "
                    "directions. Prints 'listening on udp://HOST:PORT' when ready.")
    proxy.add_argument("--upstream", required=True, metavar="HOST:PORT")
    proxy.add_argument("--host", default="127.0.0.1")
    proxy.add_argument("--port", type=int, default=0)
    proxy.add_argument("--loss", type=float, default=0.0, help="probability in [0, 1]")
    proxy.add_argument("--duplicate", type=float, default=0.0, help="probability in [0, 1]")
    proxy.add_argument("--reorder", type=float, default=0.0, help="probability in [0, 1]")
    proxy.add_argument("--delay", type=float, default=0.0, help="seconds, [0, 60]")
    proxy.add_argument("--jitter", type=float, default=0.0, help="seconds, [0, 60]")
    proxy.add_argument("--reorder-delay", type=float, default=0.005,
                       help="extra delay of a reordered datagram, seconds")
    proxy.add_argument("--seed", type=int, default=0)
    proxy.set_defaults(handler=run_proxy)


# -- options ---------------------------------------------------------------------


def _add_key_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--key-file", metavar="F",
                        help="shared key (>= 16 bytes) for HMAC-SHA256 frames")


def _add_stats_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stats", action="store_true", help="counters to stderr at exit")


def _print_stats(args: argparse.Namespace, endpoint: Any) -> None:
    """``endpoint``'s counters as one JSON line on stderr, with ``--stats``."""
    if args.stats:
        print(json.dumps(endpoint.statistics(), sort_keys=True), file=sys.stderr)


def add_receiver_options(parser: argparse.ArgumentParser) -> None:
    """The SCMP receiver options of ``timebound replay atmostonce`` (shared with it
    through ``timebound.adapters.atmostonce``; ticks are µs), plus the RPC's own."""
    add_receiver_arguments(parser, classes=True)
    g = parser.add_argument_group("RPC connection table (Fig. 3-1; ticks are µs)")
    g.add_argument("--kappa", type=int, default=0, metavar="K",
                   help="keep replies at least K (rho' = max(rho, K); default 0)")
    g.add_argument("--capacity", type=int, metavar="N",
                   help="most connection-table entries per class (default unbounded)")


def receiver_config(args: argparse.Namespace) -> ReceiverConfig:
    """The ``ReceiverConfig`` the options name (``receiver_options`` without the
    classes)."""
    return receiver_options(args)[0]


def receiver_options(args: argparse.Namespace) -> tuple[ReceiverConfig, int]:
    """The ``ReceiverConfig`` and the number of classes the options name. A server
    with ``--storage`` is always resilient; missing values take the live defaults
    (rho 300 s, GC every 1 s, beta 2 s, latest every 1 s); ``--recovery-grace``,
    ``--reorder-window`` and ``--classes`` go to the receiver as given (ranges of
    ``timebound replay atmostonce``)."""
    from timebound.net._server import (
        DEFAULT_BETA,
        DEFAULT_GC_EVERY,
        DEFAULT_LATEST_EVERY,
        DEFAULT_RHO,
    )

    values = dict(vars(args))
    if args.kappa < 0:
        raise UsageError("--kappa", f"must be >= 0, got {args.kappa}")
    if args.capacity is not None and args.capacity < 1:
        raise UsageError("--capacity", f"must be >= 1, got {args.capacity}")
    estimator = values.get("estimator") or "fixed"
    if estimator == "fixed" and values.get("rho") is None:
        values["rho"] = DEFAULT_RHO
    if estimator != "limited" and values.get("gc_every") is None:
        values["gc_every"] = DEFAULT_GC_EVERY
    values["resilient"] = True
    if values.get("beta") is None:
        values["beta"] = DEFAULT_BETA
    if values.get("latest_every") is None:
        values["latest_every"] = DEFAULT_LATEST_EVERY
    options = AtMostOnceOptions.from_values(values)
    return options.receiver, options.classes


def parse_target(text: str, option: str = "HOST:PORT") -> tuple[str, int]:
    """``HOST:PORT`` or ``[V6]:PORT`` (also ``::1:PORT``)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise UsageError(option, f"expected HOST:PORT, got {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, _port(port, option)


def _port(text: str | int, option: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise UsageError(option, f"port must be an integer, got {text!r}") from None
    if not 0 <= port <= 65535:
        raise UsageError(option, f"port must be in 0..65535, got {port}")
    return port


def format_address(address: tuple[str, int]) -> str:
    host, port = address[0], address[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _announce(address: tuple[str, int], file: TextIO | None = None) -> None:
    """The readiness line ``listening on udp://HOST:PORT`` (default: stdout)."""
    print(f"listening on udp://{format_address(address)}", file=file, flush=True)


async def _start_bound(endpoint: Any, host: str, port: int) -> None:
    """``endpoint.start()``; failing to bind is a UsageError naming --host/--port."""
    try:
        await endpoint.start()
    except OSError as exc:
        raise UsageError("--host/--port", f"cannot bind {host}:{port}: "
                                          f"{exc.strerror or exc}") from None


def _key(args: argparse.Namespace, name: str = "key_file") -> bytes | None:
    from timebound.net._keys import read_key

    path = getattr(args, name, None)
    return None if path is None else read_key(path, "--" + name.replace("_", "-"))


def _timeout(value: float) -> float:
    if not 0.0 < value <= MAX_TIMEOUT:
        raise UsageError("--timeout", f"must be in (0, {MAX_TIMEOUT:g}] s, got {value}")
    return value


def load_app(spec: str) -> object:
    """``MODULE:ATTR`` imported with the working directory on ``sys.path``."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError("MODULE:ATTR", f"expected MODULE:ATTR, got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's
        raise UsageError("MODULE:ATTR", f"cannot import {module_name!r}: {exc}") from None
    target: object = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise UsageError("MODULE:ATTR", f"{module_name!r} has no attribute {attr!r}") from None
    return target


# -- commands --------------------------------------------------------------------


def run_serve(args: argparse.Namespace) -> int:
    from timebound.net._loop import run
    from timebound.net._server import RpcServer, handlers_of

    _port(args.port, "--port")
    if args.metrics_port is not None:
        _port(args.metrics_port, "--metrics-port")
        try:
            import prometheus_client  # noqa: F401
        except ImportError:
            raise UsageError("--metrics-port", "needs prometheus-client "
                                               "(pip install 'timebound[net]')") from None
    if not 0.0 <= args.previous_key_grace <= 10 * 365 * 86400:
        raise UsageError("--previous-key-grace", "must be in [0, 10 years] s")
    config, classes = receiver_options(args)
    key = _key(args)
    previous = _key(args, "previous_key_file")
    if previous is not None and key is None:
        raise UsageError("--previous-key-file", "needs --key-file (the current key)")
    handlers = handlers_of(load_app(args.app))
    try:
        server = RpcServer(handlers, host=args.host, port=args.port, storage=args.storage,
                           key=key, previous_key=previous,
                           previous_key_grace=args.previous_key_grace, receiver=config,
                           classes=classes, kappa=args.kappa, capacity=args.capacity)
    except StorageError as exc:
        raise UsageError("--storage", str(exc)) from None

    async def main() -> None:
        await _start_bound(server, args.host, args.port)
        stop_metrics = None
        try:
            if args.metrics_port is not None:
                from timebound.net._metrics import serve_metrics
                try:
                    stop_metrics = serve_metrics(server.statistics, args.host,
                                                 args.metrics_port)
                except OSError as exc:
                    raise UsageError("--metrics-port", f"cannot bind: {exc}") from None
            _announce(server.address)
            await server.serve_forever()
        finally:
            await server.close()
            if stop_metrics is not None:
                stop_metrics()

    run(main(), use_uvloop=False if args.no_uvloop else None)
    return 0


def _client_call(args: argparse.Namespace, proc: str, payload: bytes) -> bytes:
    from timebound.net._client import RpcClient
    from timebound.net._loop import run

    target = parse_target(args.target)
    timeout = _timeout(args.timeout)
    key = _key(args)

    async def main() -> bytes:
        async with RpcClient(target, key=key) as client:
            return await client.call(proc, payload, timeout=timeout)

    try:
        result = run(main())
    except OSError as exc:
        raise UsageError("HOST:PORT", f"cannot reach {args.target}: {exc.strerror or exc}") from None
    assert isinstance(result, bytes)
    return result


def run_call(args: argparse.Namespace) -> int:
    from timebound.net._errors import CallRejected, CallTimeout, RemoteError

    if not args.proc or len(args.proc.encode("utf-8")) > 255:
        raise UsageError("PROC", "procedure name must be 1..255 UTF-8 bytes")
    try:
        reply = _client_call(args, args.proc, args.payload.encode("utf-8"))
    except CallTimeout:
        print(f"timebound: timeout: no reply from {args.target} within {args.timeout:g} s "
              "(the call ran at most once)", file=sys.stderr)
        return 1
    except CallRejected as exc:
        print(f"timebound: rejected: {exc.reason}", file=sys.stderr)
        return 1
    except RemoteError as exc:
        print(f"timebound: remote error: {exc.message}", file=sys.stderr)
        return 1
    sys.stdout.write(reply.decode("utf-8", "backslashreplace") + "\n")
    return 0


def run_stats(args: argparse.Namespace) -> int:
    from timebound.net._errors import RpcError
    from timebound.net._server import STATS_PROCEDURE

    try:
        reply = _client_call(args, STATS_PROCEDURE, b"")
    except RpcError as exc:
        print(f"timebound: {exc}", file=sys.stderr)
        return 1
    stats = json.loads(reply)
    if args.json:
        print(json.dumps(stats, sort_keys=True))
    else:
        for name, value in stats.items():
            print(f"{name:>22}  {value}")
    return 0


def run_proxy(args: argparse.Namespace) -> int:
    from timebound.net._loop import run
    from timebound.net._proxy import FaultProxy, Faults

    upstream = parse_target(args.upstream, "--upstream")
    _port(args.port, "--port")
    faults = Faults(loss=args.loss, duplicate=args.duplicate, reorder=args.reorder,
                    delay=args.delay, jitter=args.jitter, reorder_delay=args.reorder_delay)

    async def main() -> None:
        from timebound.net._endpoint import until_signal

        proxy = FaultProxy(upstream, faults, host=args.host, port=args.port, seed=args.seed)
        try:
            await proxy.start()
        except OSError as exc:
            raise UsageError("--host/--port", f"cannot bind: {exc.strerror or exc}") from None
        _announce(proxy.address)
        try:
            await until_signal()
        finally:
            proxy.close()
            print(json.dumps(vars(proxy.stats)), file=sys.stderr)

    run(main())
    return 0


def run_bench(args: argparse.Namespace) -> int:
    from timebound.net._bench import main as bench_main

    return bench_main(args)
