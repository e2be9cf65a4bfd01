"""``timebound net proxy``: a UDP relay that injects loss, duplication, delay and
reordering in both directions (``timebound.net._proxy.FaultProxy``). It has no key, so
it binds only loopback addresses unless ``--insecure``; it never sends a client more
than 3x the bytes it received from it unless ``--uncapped`` (loopback clients only)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from timebound.durations import METAVAR, duration_help, duration_type, format_duration
from timebound.errors import UsageError
from timebound.net.cli.common import (
    add_bind_options,
    announce,
    bind_error,
    check_exposure,
    check_host,
    command_group,
    parse_port,
    parse_target,
)

#: Longest delay of ``net proxy`` (``--delay``, ``--jitter``, ``--reorder-delay``), µs.
MAX_PROXY_DELAY_US = 60_000_000


def add_net_parser(commands: Any) -> None:
    sub = command_group(
        commands, "net", help="network tooling: a fault-injecting UDP proxy")
    proxy = sub.add_parser(
        "proxy", help="relay UDP with loss, duplication, delay and reordering",
        description="Relay datagrams between clients and --upstream, with faults in both "
                    "directions. Prints 'listening on udp://HOST:PORT' when ready. It "
                    "has no key, so it binds only loopback addresses unless --insecure.")
    proxy.add_argument("--upstream", required=True, metavar="HOST:PORT",
                       help="the server datagrams are relayed to (required)")
    add_bind_options(proxy)
    proxy.add_argument("--loss", type=float, default=0.0,
                       help="probability in [0, 1] that a datagram is dropped (default 0)")
    proxy.add_argument("--duplicate", type=float, default=0.0,
                       help="probability in [0, 1] that a datagram is sent twice "
                            "(default 0)")
    proxy.add_argument("--reorder", type=float, default=0.0,
                       help="probability in [0, 1] that a datagram is held back by "
                            "--reorder-delay, so later ones overtake it (default 0)")
    for flag, what, default in (
            ("--delay", "every datagram's delay", 0),
            ("--jitter", "a random extra delay in [0, DURATION] per datagram", 0),
            ("--reorder-delay", "extra delay of a reordered datagram", 5_000)):
        proxy.add_argument(flag, metavar=METAVAR, default=default,
                           type=duration_type(flag, minimum_us=0,
                                              maximum_us=MAX_PROXY_DELAY_US),
                           help=duration_help(what, default, minimum_us=0,
                                              maximum_us=MAX_PROXY_DELAY_US))
    proxy.add_argument("--seed", type=int, default=0,
                       help="seed of the faults' random choices: the same seed, the same "
                            "faults for the same datagrams (default 0)")
    proxy.add_argument("--uncapped", action="store_true",
                       help="relay to loopback clients without the 3x cap (by default "
                            "no client gets more than 3x the bytes it sent, large "
                            "answers included); clients that are not loopback stay "
                            "capped")
    proxy.set_defaults(handler=run_proxy)


def run_proxy(args: argparse.Namespace) -> int:
    from timebound.net._loop import run
    from timebound.net._proxy import FaultProxy, Faults

    upstream = parse_target(args.upstream, "--upstream")
    check_host(upstream[0], "--upstream")
    parse_port(args.port, "--port")
    check_exposure(check_host(args.host, "--host"), keyed=False, insecure=args.insecure,
                   service="net proxy")
    for flag, micros in (("--delay", args.delay), ("--jitter", args.jitter),
                         ("--reorder-delay", args.reorder_delay)):
        if micros > MAX_PROXY_DELAY_US:
            raise UsageError(flag, f"must be at most {format_duration(MAX_PROXY_DELAY_US)}, "
                                   f"got {format_duration(micros)}")
    faults = Faults(loss=args.loss, duplicate=args.duplicate, reorder=args.reorder,
                    delay=args.delay / 1e6, jitter=args.jitter / 1e6,
                    reorder_delay=args.reorder_delay / 1e6)

    async def main() -> None:
        from timebound.net._endpoint import until_signal

        proxy = FaultProxy(upstream, faults, host=args.host, port=args.port, seed=args.seed,
                           capped=not args.uncapped,
                           insecure=args.insecure)
        try:
            await proxy.start()
        except OSError as exc:
            raise bind_error(exc, args.host, args.port) from None
        announce(proxy.address)
        try:
            await until_signal()
        finally:
            proxy.close()
            print(json.dumps(vars(proxy.stats)), file=sys.stderr)

    run(main())
    return 0
