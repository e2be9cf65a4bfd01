"""``timebound group join``: a member of a stability group (timestamp or vector acks)
over UDP; every stdin line is multicast and every event printed as one JSON line."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from typing import Any

from timebound._safety import check_int
from timebound.durations import (
    METAVAR,
    duration_help,
    duration_type,
    format_duration,
    ms_alias_help,
    ms_alias_type,
)
from timebound.errors import UsageError
from timebound.net._endpoint import until_signal
from timebound.net.cli.common import (
    add_insecure_option,
    add_key_options,
    add_stats_option,
    announce,
    bind_error,
    check_exposure,
    command_group,
    format_address,
    key_option,
    parse_target,
    print_stats_with_units,
    resolve_targets,
    seconds_in,
    service_option,
    utf8,
)
from timebound.net.cli.lines import stdin_lines, stopped_at, text_line

#: Largest --ack-every and --join-wait (60s), and --dead-after (1 day), µs.
MAX_MINUTE_US = 60_000_000
MAX_DAY_US = 86_400_000_000


def add_group_parser(commands: Any) -> None:
    sub = command_group(
        commands, "group", help="multicast group with message stability over UDP: join",
        description="Members on UDP (unicast fan-out) with reliable FIFO delivery per "
                    "sender and timestamp acknowledgments for message stability "
                    "(stability paper, Fig. 1 and section 6). Guide: docs/net.md.")
    join = sub.add_parser(
        "join", help="join as NAME; multicast stdin lines; print JSON events",
        description="Join the group as member NAME (one of --members; its address is "
                    "bound). Every line read on stdin is multicast. Prints one JSON line "
                    "per event: {\"event\": \"deliver\", \"sender\", \"seq\", \"ts\", "
                    "\"data\"}, {\"event\": \"stable\", \"seq\", \"ts\", \"latency_ms\"} "
                    "(one of our messages every member has), {\"event\": \"join\"|"
                    "\"leave\", \"member\", ...}. 'listening on udp://HOST:PORT' goes to "
                    "stderr. Runs until SIGTERM/SIGINT (or, with --exit-when-stable, until "
                    "stdin ends and every message sent is stable); a stdin line that is "
                    "not UTF-8 ends it at once with exit 2. Without --key-file its "
                    "address must be a loopback one (--insecure overrides).")
    join.add_argument("name", metavar="NAME", help="this member's name (one of --members)")
    join.add_argument("--members", required=True, metavar="a=HOST:PORT,b=HOST:PORT,...",
                      help="every member of the group and its UDP address")
    join.add_argument("--acks", choices=("timestamp", "vector"), default="timestamp",
                      help="timestamp acks (one scalar) or the vector baseline (default timestamp)")
    join.add_argument("--clock", choices=("physical", "lamport"), default="physical",
                      help="message timestamps: the system clock (µs) or a Lamport counter "
                           "(default physical)")
    join.add_argument("--group", default="timebound", metavar="G",
                      help="the group's name on the wire (default timebound)")
    join.add_argument("--ack-every", dest="ack_every", default=20_000,
                      type=duration_type("--ack-every", maximum_us=MAX_MINUTE_US),
                      metavar=METAVAR,
                      help=duration_help("ack and heartbeat period", 20_000,
                                         maximum_us=MAX_MINUTE_US))
    join.add_argument("--ack-every-ms", dest="ack_every", default=argparse.SUPPRESS,
                      type=ms_alias_type("--ack-every-ms", maximum_us=MAX_MINUTE_US),
                      metavar="MS", help=ms_alias_help("--ack-every"))
    join.add_argument("--dead-after", default=None, metavar=METAVAR,
                      type=duration_type("--dead-after", maximum_us=MAX_DAY_US),
                      help=duration_help("disconnect a member silent this long", None,
                                         maximum_us=MAX_DAY_US, default="none: never"))
    join.add_argument("--join-wait", default=2_000_000, metavar=METAVAR,
                      type=duration_type("--join-wait", minimum_us=0,
                                         maximum_us=MAX_MINUTE_US),
                      help=duration_help("before multicasting its first stdin line, wait "
                                         "until every member has been heard from (their "
                                         "join lines come first), at most this long; 0s: "
                                         "send at once", 2_000_000, minimum_us=0,
                                         maximum_us=MAX_MINUTE_US))
    join.add_argument("--max-buffer", type=int, default=4096, metavar="N",
                      help="most messages not yet stable, 1..1000000 (send waits; "
                           "default %(default)s)")
    add_key_options(join)
    add_insecure_option(join)
    join.add_argument("--exit-when-stable", action="store_true",
                      help="exit once stdin ends and every message sent is stable")
    add_stats_option(join)
    join.set_defaults(handler=run_group_join)


def parse_members(text: str) -> dict[str, tuple[str, int]]:
    from timebound.core.group import MAX_NAME_BYTES

    members: dict[str, tuple[str, int]] = {}
    for item in text.split(","):
        name, sep, target = item.strip().partition("=")
        if not sep or not name:
            raise UsageError("--members", f"expected NAME=HOST:PORT, got {item!r}")
        if len(utf8(name, "--members")) > MAX_NAME_BYTES:
            raise UsageError("--members", f"name {name!r} longer than {MAX_NAME_BYTES} bytes")
        if name in members:
            raise UsageError("--members", f"member {name!r} named twice")
        members[name] = parse_target(target, "--members")
    if len(members) > 1024:
        raise UsageError("--members", "at most 1024 members")
    # The member's socket sends to the others unconnected: numeric, one family.
    return dict(zip(members, resolve_targets(list(members.values()), "--members"),
                    strict=True))


def event_line(event: object) -> str:
    from timebound.core.group import Delivered, Joined, Left, Stable

    if isinstance(event, Delivered):
        return json.dumps({"event": "deliver", "sender": event.sender, "seq": event.seq,
                           "ts": event.ts, "data": event.data.decode("utf-8", "replace")})
    if isinstance(event, Stable):
        return json.dumps({"event": "stable", "seq": event.seq, "ts": event.ts,
                           "latency_ms": round(event.latency / 1000, 3)})
    if isinstance(event, Joined):
        return json.dumps({"event": "join", "member": event.member, "incarnation": event.inc})
    assert isinstance(event, Left)
    return json.dumps({"event": "leave", "member": event.member, "reason": event.reason})


def run_group_join(args: argparse.Namespace) -> int:
    from timebound.net._group import Group
    from timebound.net._loop import run

    utf8(args.name, "NAME")
    utf8(args.group, "--group")
    members = parse_members(args.members)
    if args.name not in members:
        raise UsageError("NAME", f"{args.name!r} is not one of --members")
    check_exposure(members[args.name][0], keyed=args.key_file is not None,
                   insecure=args.insecure, service="group join")
    if args.join_wait > 60_000_000:
        raise UsageError("--join-wait", f"must be at most 60s, got "
                                        f"{format_duration(args.join_wait)}")
    if args.ack_every > 60_000_000:
        raise UsageError("--ack-every", f"must be at most 60s, got "
                                        f"{format_duration(args.ack_every)}")
    ack_every = args.ack_every / 1e6  # µs -> s, the Group's unit
    dead_after = seconds_in(None if args.dead_after is None else args.dead_after / 1e6,
                             "--dead-after")
    check_int(args.max_buffer, "--max-buffer", 1, 1_000_000)
    key = key_option(args)
    member = Group(args.group, args.name, members, acks=args.acks, clock=args.clock, key=key,
                   ack_every=ack_every, nack_every=ack_every,
                   dead_after=dead_after, max_buffer=args.max_buffer,
                   insecure=args.insecure, service=service_option(args))
    bad: list[BaseException] = []

    async def main() -> None:
        try:
            await member.start()
        except OSError as exc:  # one line naming this member's address in --members
            own = members[args.name]
            raise bind_error(exc, own[0], own[1], host_option="--members",
                             port_option="--members",
                             what=f"{args.name}'s address {format_address(own)}") from None
        announce(member.address, sys.stderr)
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()

        async def printer() -> None:
            out = sys.stdout
            async for event in member:
                out.write(event_line(event) + "\n")
                out.flush()

        async def sender() -> None:
            # A bad line (or any failure) ends the member at once: it used to kill
            # this task silently and leave the member running for ever.
            try:
                if args.join_wait:
                    with contextlib.suppress(TimeoutError):
                        await member.wait_members(len(members), timeout=args.join_wait / 1e6)
                async for number, line in stdin_lines(loop).numbered():
                    try:
                        data = text_line(line, number)
                    except UsageError as exc:
                        raise stopped_at(exc, number, "sent") from None
                    await member.send(data)
                if args.exit_when_stable:
                    await member.wait_stable()
                    await asyncio.sleep(3 * ack_every)  # last acks out
                    stop.set()
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # noqa: BLE001 - re-raised once stopped
                bad.append(exc)
                stop.set()

        tasks = [asyncio.ensure_future(printer()), asyncio.ensure_future(sender())]
        try:
            await until_signal(stop)
        finally:
            tasks[1].cancel()
            member.close()
            await asyncio.gather(tasks[0], return_exceptions=True)
            print_stats_with_units(  # physical timestamps are µs; Lamport's are counts
                args, member, {"stability_latency_sum": 1, "stability_latency_max": 1}
                if args.clock == "physical" else {})

    run(main())
    if bad:
        raise bad[0]
    return 0
