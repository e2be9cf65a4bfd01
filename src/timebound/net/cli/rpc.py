"""``timebound rpc serve|call|stats|bench`` (``net proxy``: ``proxy``).

The receiver options are wall-clock durations with their unit (the live
timestamps are microseconds). Every bad input is one line ``timebound: error: ...``
and exit status 2 (raised as ``UsageError`` for ``timebound.cli``); ``rpc call`` and
``rpc stats`` end a timeout, a refusal or a remote error with one line naming which
and its own exit status (``timebound.exitcodes``: 3 a timeout, 4 a refusal that
proves the call did not run, 5 one that does not, 6 a remote error).

Safe on a real network, the command line's share:

- Secure by default: every server command takes ``--insecure`` (the service binds a
  non-loopback address without a key only with it, and then warns once on stderr:
  ``timebound.net._endpoint.guard_exposure``), and every server and client command
  ``--service ID`` (mixed under the HMAC tag, so it needs ``--key-file``; refused
  without one, since it would protect nothing). ``timebound key new FILE``
  (``timebound.net._keygen``) writes the key.
- Bad input is one line and exit 2 everywhere: a host is checked with
  ``getaddrinfo`` before anything binds or sends (``check_host``: ``bad..host``, a
  name that does not resolve); the addresses an unconnected socket sends to (merger,
  group member, upstream merger) are resolved to numeric addresses of one family
  (``resolve_targets``); argv text goes through ``utf8`` (a non-UTF-8 byte arrives
  as a surrogate with Python's surrogateescape).
- ``rpc call`` says when a refusal was not authenticated (no key: anyone on the path
  could have forged it, so "did not run" is not certain); ``rpc serve --workers N``
  sizes the sync handlers' thread pool and ``--queue N`` the calls that may wait
  for it (one more is refused ``overloaded``).

One set of conventions, this module's share: every wall-clock option is a
duration with its unit (``timebound.durations``: ``250ms``, ``2s``, ``1h``; a bare
number is refused, showing it with each unit), printed with its unit; ``rpc call`` and ``rpc stats`` print one timeout line (``timeout_line``);
``rpc serve --config FILE`` reads the same options from TOML (``_config``), and
``--metrics-port`` serves latency histograms beside the counters (``_metrics``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

from timebound.adapters.atmostonce import AtMostOnceOptions
from timebound.arguments import add_receiver_arguments
from timebound.core.atmostonce import ReceiverConfig
from timebound.durations import (
    MAX_MICROS,
    METAVAR,
    duration_help,
    duration_type,
    format_duration,
)
from timebound.errors import StorageError, UsageError
from timebound.net._config import ConfigSpec
from timebound.net.cli.common import (
    add_bind_options,
    add_key_options,
    announce,
    bind_error,
    bind_listener,
    check_exposure,
    check_host,
    command_group,
    key_option,
    parse_port,
    service_option,
    start_bound,
)
from timebound.net.cli.rpc_client import (
    MAX_PAYLOAD,
    MAX_TIMEOUT_US,
    run_call,
    run_stats,
)

#: The client's --timeout by default, µs.
DEFAULT_TIMEOUT_US = 2_000_000
#: How long the previous key stays accepted by default (``--previous-key-grace``), µs.
DEFAULT_KEY_GRACE_US = 3_600_000_000


def add_rpc_parser(commands: Any) -> None:
    sub = command_group(
        commands, "rpc", help="at-most-once RPC over UDP: serve, call, stats, bench",
        description="At-most-once remote procedure calls over UDP without connection "
                    "set-up (SCMP section 3.1): a call never runs twice, across server "
                    "crashes too. Wire format: docs/wire.md; guide: docs/net.md.")

    serve = sub.add_parser(
        "serve", help="serve the handlers of MODULE:ATTR",
        description="Serve MODULE:ATTR (a dict of handlers, or an object whose public "
                    "methods are handlers; def f(payload: bytes) -> bytes or async def). "
                    "Prints one line 'listening on udp://HOST:PORT' when ready. SIGTERM "
                    "and SIGINT stop it cleanly. Durations take their unit (us, ms, s, "
                    "m or h: 250ms, 2s; a bare number is refused). Without --key-file it binds only "
                    "loopback addresses (--insecure overrides); 'timebound key new FILE' "
                    "makes a key. --config FILE reads the same options from a TOML file: "
                    "one key per option, its name without the leading dashes (rho = "
                    "\"300s\", workers = 4, no-uvloop = true, storage = \"latest.json\"); "
                    "options given on the command line override the file.")
    serve.add_argument("app", metavar="MODULE:ATTR",
                       help="the handlers: attribute ATTR of module MODULE, imported with "
                            "the working directory on the path (required)")
    serve.add_argument("--config", metavar="FILE",
                       help="TOML file of options (keys: the options' names, dashes or "
                            "underscores; durations as strings with their unit); the "
                            "command line overrides it (default: none)")
    add_bind_options(serve)
    serve.add_argument("--storage", metavar="PATH",
                       help="file holding latest (SCMP Fig. 2-2); created if missing "
                            "(required, here or in --config)")
    add_key_options(serve)
    serve.add_argument("--previous-key-file", metavar="F",
                       help="key rotation: also accept this previous key (default: none)")
    serve.add_argument("--previous-key-grace", metavar=METAVAR, default=DEFAULT_KEY_GRACE_US,
                       type=duration_type("--previous-key-grace", minimum_us=0),
                       help=duration_help("how long the previous key stays accepted",
                                          DEFAULT_KEY_GRACE_US, minimum_us=0))
    serve.add_argument("--metrics-port", type=int, metavar="P",
                       help="serve Prometheus metrics on http://METRICS-HOST:P/metrics "
                            "(plain HTTP, no key): the counters, and latency histograms "
                            "per procedure and per service (default: none)")
    serve.add_argument("--metrics-host", default="127.0.0.1", metavar="H",
                       help="address of the metrics endpoint (default 127.0.0.1: the "
                            "counters are not authenticated; another address needs "
                            "--insecure)")
    serve.add_argument("--workers", type=int, default=None, metavar="N",
                       help=f"sync handlers run in a pool of N threads, 0..{MAX_WORKERS} "
                            "(0: inline on the event loop, only for handlers that never "
                            f"block; default {SHOWN_DEFAULT_WORKERS}); async handlers "
                            "always run on the loop")
    serve.add_argument("--queue", type=int, default=None, metavar="N",
                       help=f"sync calls that may wait for a busy worker, 0..{MAX_QUEUE}; "
                            "one more is refused 'overloaded' at once, and a waiting call "
                            "is never started after its caller's deadline (it is answered "
                            "'expired'). Default: 32 per worker")
    serve.add_argument("--no-uvloop", action="store_true", help="run on asyncio's own event loop (default: uvloop when "
                            "it is installed)")
    serve.add_argument("--no-marks", action="store_true",
                       help="after a restart, refuse 'down' every call stamped below the "
                            "bound recovered from --storage (the paper's rule: about beta "
                            "of refusals). Default: each start is a new incarnation whose "
                            "random id is in every reply; a call made after its caller "
                            "heard from it is accepted at once")
    add_receiver_options(serve)
    serve.set_defaults(handler=run_serve, config_spec=ConfigSpec.of(serve))

    call = sub.add_parser("call", help="call PROC on HOST:PORT and print the reply",
                          description="Exit 0 and print the reply. Otherwise one line "
                                      "naming what happened and its exit status: 3 a "
                                      "timeout (the call ran at most once), 4 a refusal "
                                      "that proves the call did not run, 5 a refusal that "
                                      "does not (it may have run once), 6 a remote error "
                                      "(the handler raised: it ran once), 2 your input. "
                                      "docs/errors.md lists them.")
    call.add_argument("target", metavar="HOST:PORT",
                      help="the server's address ([V6]:PORT for IPv6; required)")
    call.add_argument("proc", metavar="PROC",
                      help="the procedure's name, 1..255 UTF-8 bytes (required)")
    call.add_argument("payload", nargs="?", default="", metavar="PAYLOAD",
                      help="the payload: UTF-8 text (default empty); '-' reads it from "
                           "stdin and @FILE from a regular file, as bytes (at most "
                           f"{MAX_PAYLOAD:,} bytes); @@TEXT is the text @TEXT")
    _add_timeout_option(call)
    add_key_options(call)
    call.set_defaults(handler=run_call)

    stats = sub.add_parser("stats", help="print a server's counters",
                           description="Call the built-in timebound.stats procedure. "
                                       "Exit statuses as rpc call's (3 a timeout, 4 or 5 "
                                       "a refusal, 6 a remote error).")
    stats.add_argument("target", metavar="HOST:PORT",
                       help="the server's address ([V6]:PORT for IPv6; required)")
    _add_timeout_option(stats)
    stats.add_argument("--json", action="store_true", help="one JSON object")
    add_key_options(stats)
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


def add_service_parsers(commands: Any) -> None:
    """``channel``, ``group`` and ``pubsub`` (``services``, imported when the parser
    is built)."""
    from timebound.net.cli.services import add_service_parsers as add

    add(commands)


def add_key_parser(commands: Any) -> None:
    """``timebound key`` (``_keygen``)."""
    from timebound.net._keygen import add_key_parser as add

    add(commands)


def add_net_parser(commands: Any) -> None:
    """``timebound net proxy`` (``proxy``)."""
    from timebound.net.cli.proxy import add_net_parser as add

    add(commands)


# -- options ---------------------------------------------------------------------


def _add_timeout_option(parser: argparse.ArgumentParser) -> None:
    """``--timeout`` of ``rpc call`` and ``rpc stats`` (µs in the namespace)."""
    parser.add_argument("--timeout", metavar=METAVAR, default=DEFAULT_TIMEOUT_US,
                        type=duration_type("--timeout", maximum_us=MAX_TIMEOUT_US),
                        help=duration_help("how long to wait for the reply",
                                           DEFAULT_TIMEOUT_US, maximum_us=MAX_TIMEOUT_US))


#: The receiver's defaults as ``--help`` shows them, µs (``timebound.net._server``'s
#: ``DEFAULT_*``, which the parser does not import; a test pins them equal).
SHOWN_RECEIVER_DEFAULTS = {"rho": 300_000_000, "gc_every": 1_000_000,
                           "beta": 2_000_000, "latest_every": 1_000_000}
#: The receiver options that are wall-clock durations on a live server: what each is
#: and its smallest value, µs (the replay's ranges).
_LIVE_DURATIONS = {
    "rho": ("fixed estimator: the lifetime rho of a call", 1),
    "gc_every": ("fixed, unlimited estimators: garbage-collect the connection table "
                 "this often", 1),
    "beta": ("latest = now + beta is kept on --storage, so calls stamped up to beta "
             "ahead are accepted", 0),
    "latest_every": ("write latest to --storage this often", 1),
    "recovery_grace": ("after a restart, garbage collection forgets nothing for "
                       "this long (SCMP 2.4)", 0),
}


def add_receiver_options(parser: argparse.ArgumentParser) -> None:
    """The SCMP receiver options of ``timebound replay atmostonce`` (shared with it
    through ``timebound.adapters.atmostonce``), plus the RPC's own. On a live server
    the replay's ticks are wall-clock durations (``_LIVE_DURATIONS``: with their unit,
    a bare number refused), and ``--resilient`` says what it means here."""
    add_receiver_arguments(parser, classes=True)
    for action in parser._actions:
        if action.dest in _LIVE_DURATIONS:
            what, minimum = _LIVE_DURATIONS[action.dest]
            flag = "--" + action.dest.replace("_", "-")
            action.type = duration_type(flag, minimum_us=minimum)
            action.metavar = METAVAR
            action.help = duration_help(what, SHOWN_RECEIVER_DEFAULTS.get(action.dest, 0),
                                        minimum_us=minimum, maximum_us=MAX_MICROS)
        elif action.dest == "resilient":
            action.help = ("accepted, changes nothing: a live server always keeps latest "
                           "in --storage (SCMP Fig. 2-2), so no call runs twice across "
                           "a crash or restart")
    g = parser.add_argument_group("RPC connection table (Fig. 3-1)")
    g.add_argument("--kappa", metavar=METAVAR, default=0,
                   type=duration_type("--kappa", minimum_us=0),
                   help=duration_help("keep replies at least this long (rho' = max(rho, "
                                      "kappa))", 0, minimum_us=0))
    g.add_argument("--capacity", type=int, metavar="N",
                   help="most connection-table entries per class (default: the "
                        "server's, sized for this machine's memory; 0: unbounded)")
    g.add_argument("--max-bytes", type=int, metavar="N",
                   help="most bytes of the connection tables, stored replies included, "
                        "split over the classes (default: a sixteenth of this machine's "
                        "memory; 0: unbounded); a full table forgets its oldest "
                        "finished calls first")


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

    completed(args)
    values = dict(vars(args))
    if args.kappa < 0:
        raise UsageError("--kappa", f"must be >= 0, got {args.kappa}")
    if args.capacity is not None and args.capacity < 0:
        raise UsageError("--capacity", f"must be >= 0 (0: unbounded), got {args.capacity}")
    if args.max_bytes is not None and args.max_bytes < 0:
        raise UsageError("--max-bytes", f"must be >= 0 (0: unbounded), got {args.max_bytes}")
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
    if values["beta"] < values["latest_every"]:
        # latest = now + beta is written every latest_every: with beta shorter, every
        # call stamped in the last (latest_every - beta) of each period is refused early.
        raise UsageError("--beta", f"must be >= --latest-every "
                                   f"({format_duration(values['latest_every'])}), got "
                                   f"{format_duration(values['beta'])}: calls would be "
                                   "refused early between a refresh of latest and the next")
    # The byte bound goes to the server (``RpcServer(max_bytes=)``, split over the
    # classes there), not in the config.
    return options.receiver, options.classes


#: Largest ``rpc serve --workers``.
MAX_WORKERS = 1024
#: Largest ``rpc serve --queue`` (``timebound.net._handlers.MAX_QUEUE``).
MAX_QUEUE = 65536
#: The default ``--help`` shows (``timebound.net._server.DEFAULT_WORKERS``, which
#: the parser does not import: every command builds it; a test pins the two equal).
SHOWN_DEFAULT_WORKERS = 8


def default_workers() -> int:
    """``timebound.net._server.DEFAULT_WORKERS`` (8 where it is not defined)."""
    from timebound.net import _server

    return int(getattr(_server, "DEFAULT_WORKERS", 8))


def _workers(value: int | None) -> int:
    if value is None:
        return default_workers()
    if not 0 <= value <= MAX_WORKERS:
        raise UsageError("--workers", f"must be in [0, {MAX_WORKERS}], got {value}")
    return value


def _queue(value: int | None) -> int | None:
    """``--queue`` (None: the server's default, 32 per worker)."""
    if value is not None and not 0 <= value <= MAX_QUEUE:
        raise UsageError("--queue", f"must be in [0, {MAX_QUEUE}], got {value}")
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


def completed(args: argparse.Namespace) -> dict[str, str]:
    """Complete ``rpc serve``'s namespace from its ``--config`` and the defaults (once;
    ``_config.ConfigSpec.apply``): returns ``{flag: "FILE: key"}`` of the options the
    file set."""
    spec = getattr(args, "config_spec", None)
    if spec is None:
        return {}
    done: dict[str, str] | None = getattr(args, "config_set", None)
    if done is None:
        done = args.config_set = spec.apply(args, getattr(args, "config", None))
    return done


def run_serve(args: argparse.Namespace) -> int:
    from_file = completed(args)
    try:
        return _serve(args)
    except UsageError as exc:
        raise ConfigSpec.blame(exc, from_file) from None


def _serve(args: argparse.Namespace) -> int:
    from timebound.net._loop import run
    from timebound.net._server import RpcServer, handlers_of

    if args.storage is None:
        raise UsageError("--storage", "is required (on the command line or in --config)")
    parse_port(args.port, "--port")
    check_host(args.host, "--host")
    workers = _workers(args.workers)
    waiting = _queue(args.queue)
    check_exposure(args.host, keyed=args.key_file is not None, insecure=args.insecure,
                   service="rpc serve")
    if args.metrics_port is not None:
        parse_port(args.metrics_port, "--metrics-port")
        check_host(args.metrics_host, "--metrics-host")
        check_exposure(args.metrics_host, keyed=False, insecure=args.insecure,
                       service="the metrics endpoint")
        try:
            import prometheus_client  # noqa: F401
        except ImportError:
            raise UsageError("--metrics-port", "needs prometheus-client "
                                               "(pip install 'timebound[net]')") from None
    config, classes = receiver_options(args)
    key = key_option(args)
    service = service_option(args)
    previous = key_option(args, "previous_key_file")
    if previous is not None and key is None:
        raise UsageError("--previous-key-file", "needs --key-file (the current key)")
    handlers = handlers_of(load_app(args.app))

    def build() -> RpcServer:
        try:
            return RpcServer(handlers, host=args.host, port=args.port,
                             storage=args.storage, key=key, previous_key=previous,
                             previous_key_grace=args.previous_key_grace / 1e6,
                             receiver=config,
                             classes=classes, kappa=args.kappa, capacity=args.capacity,
                             workers=workers, insecure=args.insecure, service=service,
                             marks=not args.no_marks, queue=waiting,
                             max_bytes=args.max_bytes)
        except StorageError as exc:
            raise UsageError("--storage", str(exc)) from None

    async def main() -> None:
        # Both sockets are bound before the server opens (or creates) its storage
        # file: a port in use, or an address that is not this machine's, is one line
        # and leaves nothing behind.
        sock = await bind_listener(args.host, args.port)
        served: list[RpcServer] = []
        stop_metrics = None
        try:
            if args.metrics_port is not None:
                stop_metrics = _start_metrics(args, served)
            served.append(build())
        except BaseException:
            sock.close()
            if stop_metrics is not None:
                stop_metrics()
            raise
        server = served[0]
        try:
            await start_bound(server, args.host, args.port, sock)
            announce(server.address)
            await server.serve_forever()
        finally:
            await server.close()
            if stop_metrics is not None:
                stop_metrics()

    run(main(), use_uvloop=False if args.no_uvloop else None)
    return 0


#: What the metrics endpoint shows in the moment before its server exists: no
#: counters, empty histograms.
_NO_LATENCY: tuple[Any, dict[str, Any]] = (((), [0], 0.0), {})


def _start_metrics(args: argparse.Namespace, served: list[Any]) -> Any:
    """``--metrics-port``'s endpoint, bound before the server is built (so before its
    storage file), reading the server in ``served`` once there; its stop function.
    Failing to bind is one line naming ``--metrics-port`` or ``--metrics-host``."""
    from timebound.net._metrics import serve_metrics

    def read() -> Any:
        return served[0].statistics() if served else {}

    def latency() -> Any:
        return served[0].latency() if served else _NO_LATENCY

    try:
        return serve_metrics(read, args.metrics_host, args.metrics_port, latency)
    except OSError as exc:
        raise bind_error(exc, args.metrics_host, args.metrics_port,
                         host_option="--metrics-host",
                         port_option="--metrics-port") from None


def run_bench(args: argparse.Namespace) -> int:
    from timebound.net._bench import main as bench_main

    return bench_main(args)
