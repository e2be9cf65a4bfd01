"""``timebound pubsub publish|merge|subscribe``: causal deterministic merge over UDP
(replicated mergers, subscribers that get one order)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from timebound._safety import check_int
from timebound.durations import (
    METAVAR,
    duration_help,
    duration_type,
    ms_alias_help,
    ms_alias_type,
)
from timebound.errors import UsageError
from timebound.net._endpoint import on_signals, until_signal
from timebound.net.cli.common import (
    MAX_COUNT,
    add_bind_options,
    add_key_options,
    add_stats_option,
    announce,
    check_exposure,
    check_host,
    command_group,
    host_family,
    key_option,
    parse_port,
    parse_target,
    print_stats_with_units,
    resolve_targets,
    service_option,
    start_bound,
    utf8,
    whole_ms,
)
from timebound.net.cli.lines import stdin_lines, stopped_at, text_line


def _system_options(parser: argparse.ArgumentParser, required: bool = True) -> None:
    from timebound.core.pubsub import MAX_DELTA, MAX_EPSILON, MAX_N

    need = "required" if required else "none: any"
    top_epsilon, top_delta = MAX_EPSILON * 1000, MAX_DELTA * 1000
    parser.add_argument("--epsilon", required=required, metavar=METAVAR,
                        type=duration_type("--epsilon", minimum_us=1000,
                                           maximum_us=top_epsilon),
                        help=duration_help("clock synchronization bound (G1), whole ms",
                                           None, minimum_us=1000, maximum_us=top_epsilon,
                                           default=need))
    parser.add_argument("--delta", required=required, metavar=METAVAR,
                        type=duration_type("--delta", minimum_us=0, maximum_us=top_delta),
                        help=duration_help("message delay bound (G2), whole ms", None,
                                           minimum_us=0, maximum_us=top_delta,
                                           default=need))
    parser.add_argument("--n", type=int, default=64, metavar="N",
                        help=f"bound on the number of publishers, 1..{MAX_N} (default 64)")
    add_key_options(parser)


def _check_system(args: argparse.Namespace) -> None:
    from timebound.core.pubsub import MAX_DELTA, MAX_EPSILON, MAX_N

    # µs -> the whole ms the pub-sub services take (their clock ticks in ms)
    args.epsilon = whole_ms(args.epsilon, "--epsilon", 1, MAX_EPSILON)
    args.delta = whole_ms(args.delta, "--delta", 0, MAX_DELTA)
    check_int(args.n, "--n", 1, MAX_N)


def _targets(text: str, option: str) -> list[tuple[str, int]]:
    targets = [parse_target(t.strip(), option) for t in text.split(",") if t.strip()]
    if not targets or len(targets) > 64:
        raise UsageError(option, "give 1..64 HOST:PORT, comma-separated")
    return targets


def add_pubsub_parser(commands: Any) -> None:
    sub = command_group(
        commands, "pubsub", help="causal pub-sub over UDP: publish, merge, subscribe",
        description="Publishers stamp <r, c, kn> (bounded wire form); replicated causal "
                    "deterministic mergers deliver one causal order, stackable in levels "
                    "(a level-2 merger takes --delta = level-1 delta + 3 epsilon and "
                    "--upstream the level-1 mergers); subscribers print that order with a "
                    "running digest. Times in ms. Guide: docs/net.md.")

    pub = sub.add_parser("publish", help="publish stdin lines to mergers",
                         description="Publish every stdin line as process NAME to every "
                                     "merger; print {\"proc\", \"msg\", \"r\", \"c\"} "
                                     "per publication (at most one per ms).")
    pub.add_argument("name", metavar="NAME", help="this publisher's process id")
    pub.add_argument("--mergers", required=True, metavar="HOST:PORT,...",
                     help="every merger (names are resolved once, to one address family)")
    _system_options(pub)
    pub.set_defaults(handler=run_pubsub_publish)

    merge = sub.add_parser("merge", help="run a merger",
                           description="Run merger NAME on --host:--port for ds(epsilon, "
                                       "delta); print {\"proc\", \"msg\", \"r\", \"c\"} per "
                                       "delivery; 'listening on udp://HOST:PORT' to stderr; "
                                       "SIGTERM/SIGINT stop it. Without --key-file it "
                                       "binds only loopback addresses (--insecure "
                                       "overrides).")
    merge.add_argument("name", metavar="NAME", help="this merger's name")
    add_bind_options(merge)
    merge.add_argument("--upstream", default=None, metavar="HOST:PORT,...",
                       help="lower-level mergers to subscribe to (level 2)")
    merge.add_argument("--quiet", action="store_true", default=argparse.SUPPRESS,
                       help="print no deliveries")
    add_stats_option(merge)
    _system_options(merge)
    merge.set_defaults(handler=run_pubsub_merge)

    subscribe = sub.add_parser(
        "subscribe", help="print a merger's order with a running digest",
        description="Subscribe to the merger at HOST:PORT; print {\"proc\", \"msg\", "
                    "\"r\", \"c\", \"data\", \"digest\"} per delivery (digest: SHA-256 of "
                    "the (proc, msg) order so far, comparable across subscribers). "
                    "'listening on udp://LOCAL' goes to stderr once subscribed.")
    subscribe.add_argument("target", metavar="HOST:PORT",
                           help="the merger's UDP address ('timebound pubsub merge')")
    subscribe.add_argument("--name", default=None,
                           help="this subscriber's name (default: none)")
    subscribe.add_argument("--count", type=int, default=None, metavar="N",
                           help=f"exit after N deliveries, 1..{MAX_COUNT}")
    subscribe.add_argument("--gap-wait", dest="gap_wait", default=50_000, metavar=METAVAR,
                           type=duration_type("--gap-wait", minimum_us=0,
                                              maximum_us=60_000_000),
                           help=duration_help("wait this long at most for a reordered "
                                              "datagram, whole ms", 50_000, minimum_us=0,
                                              maximum_us=60_000_000))
    subscribe.add_argument("--gap-wait-ms", dest="gap_wait", default=argparse.SUPPRESS,
                           type=ms_alias_type("--gap-wait-ms", minimum_us=0,
                                              maximum_us=60_000_000),
                           metavar="MS", help=ms_alias_help("--gap-wait"))
    _system_options(subscribe, required=False)
    subscribe.set_defaults(handler=run_pubsub_subscribe)


def _check_name(name: str, option: str) -> None:
    """A pub-sub process name (UTF-8, as the core bounds it)."""
    from timebound.core.pubsub import check_name

    utf8(name, option)
    try:
        check_name(name)
    except Exception as exc:  # noqa: BLE001 - a usage error either way
        raise UsageError(option, str(exc)) from None


def _stamp_fields(proc: str, msg: int, stamp: Any) -> dict[str, Any]:
    return {"proc": proc, "msg": msg, "r": stamp.r, "c": stamp.c}


def run_pubsub_publish(args: argparse.Namespace) -> int:
    from timebound.net._loop import run
    from timebound.net._pubsub import Publisher

    _check_system(args)
    _check_name(args.name, "NAME")
    mergers = resolve_targets(_targets(args.mergers, "--mergers"), "--mergers")
    key = key_option(args)
    publisher = Publisher(args.name, mergers, epsilon=args.epsilon, delta=args.delta,
                          n=args.n, key=key, service=service_option(args))
    bad: list[UsageError] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        async with publisher:
            lines = stdin_lines(loop)
            with on_signals(lines.stop):  # SIGTERM, SIGINT: the input ends here
                async for number, line in lines.numbered():
                    try:
                        data = text_line(line, number)
                    except UsageError as exc:  # the lines before it are published
                        bad.append(stopped_at(exc, number, "published"))
                        break
                    msg, stamp = await publisher.publish(data)
                    sys.stdout.write(json.dumps(_stamp_fields(args.name, msg, stamp)) + "\n")
            sys.stdout.flush()

    run(main())
    if bad:
        raise bad[0]
    return 0


def run_pubsub_merge(args: argparse.Namespace) -> int:
    from timebound.net._loop import run
    from timebound.net._pubsub import MergerServer

    _check_system(args)
    _check_name(args.name, "NAME")
    parse_port(args.port, "--port")
    check_exposure(check_host(args.host, "--host"), keyed=args.key_file is not None,
                   insecure=args.insecure, service="pubsub merge")
    # The merger's own socket sends the SUBs: numeric upstreams of its family.
    upstream = (resolve_targets(_targets(args.upstream, "--upstream"), "--upstream",
                                host_family(args.host, "--host"))
                if args.upstream else [])
    key = key_option(args)
    out = sys.stdout

    def show(message: Any) -> None:
        out.write(json.dumps(_stamp_fields(message.proc, message.msg, message.stamp)) + "\n")
        out.flush()

    server = MergerServer(args.name, epsilon=args.epsilon, delta=args.delta, n=args.n,
                          host=args.host, port=args.port, key=key, upstream=upstream,
                          on_deliver=None if getattr(args, "quiet", False) else show,
                          insecure=args.insecure, service=service_option(args))

    async def main() -> None:
        await start_bound(server, args.host, args.port)
        announce(server.address, sys.stderr)
        try:
            await until_signal()
        finally:
            server.close()
            print_stats_with_units(args, server,  # the merger's clock ticks in ms
                                    {"total_buffering": 1000, "max_buffering": 1000})

    run(main())
    return 0


def run_pubsub_subscribe(args: argparse.Namespace) -> int:
    from timebound.net._loop import run
    from timebound.net._pubsub import SubscriberClient

    _check_system(args)
    target = parse_target(args.target)
    check_host(target[0], "HOST:PORT")
    if args.count is not None:
        check_int(args.count, "--count", 1, MAX_COUNT)
    gap_wait = whole_ms(args.gap_wait, "--gap-wait", 0, 60000) or 0
    if args.name is not None:
        _check_name(args.name, "--name")
    key = key_option(args)
    client = SubscriberClient(target, name=args.name, key=key, gap_wait=gap_wait,
                              service=service_option(args))

    async def main() -> None:
        await client.start()
        local = client._transport.get_extra_info("sockname") if client._transport else None
        if local is not None:  # subscribed: the SUB is out
            announce((local[0], local[1]), sys.stderr)
        seen = 0
        try:
            with on_signals(client.close):
                async for d in client:
                    fields = _stamp_fields(d.proc, d.msg, d.stamp)
                    fields["data"] = d.data.decode("utf-8", "replace")
                    fields["digest"] = d.digest
                    sys.stdout.write(json.dumps(fields) + "\n")
                    sys.stdout.flush()
                    seen += 1
                    if args.count is not None and seen >= args.count:
                        break
        finally:
            client.close()

    run(main())
    return 0
