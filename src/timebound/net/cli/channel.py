"""``timebound channel recv|send``: a slotted-FIFO channel over UDP (FR, R, F and N
lines on stdin; one JSON line per delivery). Readiness lines go to stderr, so stdout
holds only the JSON lines the commands promise."""

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
    format_duration,
    ms_alias_help,
    ms_alias_type,
)
from timebound.errors import StorageError, UsageError
from timebound.exitcodes import EXIT_CHANNEL_FAILED, EXIT_OK
from timebound.net._endpoint import on_signals
from timebound.net.cli.common import (
    MAX_COUNT,
    MAX_SECONDS,
    add_bind_options,
    add_key_options,
    add_stats_option,
    announce,
    bind_listener,
    check_exposure,
    check_host,
    command_group,
    key_option,
    parse_port,
    parse_target,
    print_stats,
    print_stats_with_units,
    seconds_in,
    service_option,
    start_bound,
    utf8,
)
from timebound.net.cli.lines import stdin_lines, stopped_at

#: Largest --window of a channel sender.
MAX_CLI_WINDOW = 65536
#: Largest --f-hold and channel send --timeout (1 day), µs.
MAX_DAY_US = 86_400_000_000


def add_channel_parser(commands: Any) -> None:
    sub = command_group(
        commands, "channel", help="slotted-FIFO channels over UDP: recv, send",
        description="One channel carries four kinds of send: FR (FIFO, reliable; the "
                    "slot delimiters), R (reliable), F (FIFO within its slot, "
                    "unreliable), N (neither). The first datagram opens the channel "
                    "through SCMP (no handshake). Guide: docs/net.md.")

    recv = sub.add_parser(
        "recv", help="print one JSON line per delivery",
        description="Receive every channel opened towards --host:--port and print one "
                    "JSON line per delivery: {\"kind\", \"slot\", \"id\", \"data\"} (id: "
                    "the message's number on its channel, from 0). 'listening on "
                    "udp://HOST:PORT' goes to stderr when ready; SIGTERM/SIGINT stop it.")
    add_bind_options(recv)
    add_key_options(recv)
    recv.add_argument("--storage", metavar="PATH",
                      help="file keeping SCMP's latest, so a restart refuses replayed openings")
    recv.add_argument("--count", type=int, default=None, metavar="N",
                      help=f"exit after N deliveries, 1..{MAX_COUNT} (default: run until "
                           "SIGTERM/SIGINT)")
    recv.add_argument("--f-hold", dest="f_hold", default=None,
                      type=duration_type("--f-hold", minimum_us=0, maximum_us=MAX_DAY_US),
                      metavar=METAVAR,
                      help=duration_help("deliver an F waiting behind a gap after this long",
                                         None, minimum_us=0, maximum_us=MAX_DAY_US,
                                         default="none: at its slot's end"))
    recv.add_argument("--f-hold-ms", dest="f_hold", default=argparse.SUPPRESS,
                      type=ms_alias_type("--f-hold-ms", minimum_us=0, maximum_us=MAX_DAY_US),
                      metavar="MS", help=ms_alias_help("--f-hold"))
    add_stats_option(recv)
    recv.set_defaults(handler=run_channel_recv)

    send = sub.add_parser(
        "send", help="send lines 'KIND DATA' read from stdin",
        description="Read lines 'KIND DATA' (KIND: FR, R, F or N; DATA: the rest of the "
                    "line, UTF-8) from stdin and send each on one channel to HOST:PORT; "
                    "at end of input wait until every reliable message is acknowledged. "
                    "Exit 0; 7 if the channel failed (refused or no acknowledgment within "
                    "--timeout); 2 on a bad line (docs/errors.md).")
    send.add_argument("target", metavar="HOST:PORT",
                      help="the channel receiver's UDP address ('timebound channel recv')")
    add_key_options(send)
    send.add_argument("--window", type=int, default=256, metavar="N",
                      help=f"messages in flight, 1..{MAX_CLI_WINDOW} (default 256)")
    send.add_argument("--timeout", type=duration_type("--timeout", maximum_us=MAX_DAY_US),
                      default=10_000_000, metavar=METAVAR,
                      help=duration_help("give up after this long without acknowledgment",
                                         10_000_000, maximum_us=MAX_DAY_US))
    add_stats_option(send)
    send.set_defaults(handler=run_channel_send)


def delivery_line(kind: str, slot: int, ident: int, data: bytes) -> str:
    return json.dumps({"kind": kind, "slot": slot, "id": ident,
                       "data": data.decode("utf-8", "replace")})


def run_channel_recv(args: argparse.Namespace) -> int:
    from timebound.net._channel import ChannelListener
    from timebound.net._loop import run

    parse_port(args.port, "--port")
    check_exposure(check_host(args.host, "--host"), keyed=args.key_file is not None,
                   insecure=args.insecure, service="channel recv")
    if args.count is not None:
        check_int(args.count, "--count", 1, MAX_COUNT)
    hold = args.f_hold  # µs
    if hold is not None and hold > MAX_SECONDS * 1_000_000:
        raise UsageError("--f-hold", f"must be at most 1 day, got {format_duration(hold)}")
    key = key_option(args)
    service = service_option(args)

    async def main() -> None:
        # Bound before the listener opens (or creates) its storage file: a port in
        # use, or an address that is not this machine's, is one line and leaves
        # nothing behind.
        sock = await bind_listener(args.host, args.port)
        try:
            listener = ChannelListener(host=args.host, port=args.port, key=key,
                                       storage=args.storage,
                                       f_hold=None if hold is None else hold / 1e6,
                                       insecure=args.insecure, service=service)
        except StorageError as exc:
            sock.close()
            raise UsageError("--storage", str(exc)) from None
        except BaseException:
            sock.close()
            raise
        await start_bound(listener, args.host, args.port, sock)
        announce(listener.address, sys.stderr)
        seen = 0
        out = sys.stdout
        try:
            with on_signals(listener.close):
                async for d in listener:
                    out.write(delivery_line(d.kind.value, d.slot, d.id, d.data) + "\n")
                    seen += 1
                    if args.count is not None and seen >= args.count:
                        break
                    if listener._queue is not None and listener._queue.empty():
                        out.flush()
                out.flush()
        finally:
            listener.close()
            print_stats(args, listener)

    run(main())
    return 0


def parse_kind_line(line: str, number: int) -> tuple[str, bytes]:
    text = line.rstrip("\n").rstrip("\r")
    kind, _, data = text.partition(" ")
    if kind.upper() not in ("FR", "R", "F", "N"):
        raise UsageError(f"stdin:{number}", f"field 'kind': must be FR, R, F or N, "
                                            f"got {kind!r}")
    return kind.upper(), utf8(data, f"stdin:{number}")


def run_channel_send(args: argparse.Namespace) -> int:
    from timebound.net._channel import Channel, ChannelFailed
    from timebound.net._loop import run

    target = parse_target(args.target)
    check_host(target[0], "HOST:PORT")
    check_int(args.window, "--window", 1, MAX_CLI_WINDOW)
    timeout = args.timeout / 1e6  # µs -> s, the Channel's unit
    seconds_in(timeout, "--timeout")
    key = key_option(args)
    channel = Channel(target, key=key, window=args.window, give_up=timeout,
                      service=service_option(args))
    bad: list[UsageError] = []
    sent = SentLines()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        try:
            await channel.open()
        except OSError as exc:
            raise UsageError("HOST:PORT", f"cannot reach {args.target}: "
                                          f"{exc.strerror or exc}") from None
        lines = stdin_lines(loop)
        try:
            with on_signals(lines.stop):  # SIGTERM, SIGINT: input ends, sent ones drain
                async for number, line in lines.numbered():
                    if not line.strip():
                        continue
                    try:
                        kind, data = parse_kind_line(line, number)
                    except UsageError as exc:
                        bad.append(stopped_at(exc, number, "sent and acknowledged"))
                        break
                    sent.add(await channel.send(data, kind), number, kind)
            sent.ended = True
            await channel.drain(timeout=None)
        finally:
            channel.close()
            print_stats_with_units(args, channel, {"srtt": 1, "rto": 1})

    try:
        run(main())
    except ChannelFailed as exc:
        print(f"timebound: {exc}{FAILURES.get(exc.reason, '')}; {sent.resume(exc)}",
              file=sys.stderr)
        return EXIT_CHANNEL_FAILED
    if bad:
        raise bad[0]
    return EXIT_OK


#: What each way a channel fails means for the lines sent.
FAILURES = {
    "lost": " (the receiver answered that it no longer knows this channel: it was "
            "restarted or forgot it)",
    "timeout": " (no acknowledgment within --timeout)",
    **{reason: " (the receiver refused the channel's opening: no line arrived)"
       for reason in ("stale", "early", "down", "overloaded")},
}


class SentLines:
    """Which stdin line each message sent carries (``channel send``), to say after a
    failure which reliable lines were acknowledged and which to send again."""

    def __init__(self) -> None:
        self.lines: dict[int, int] = {}  # message id -> its stdin line number
        self.reliable: list[int] = []  # the stdin line numbers of FR and R lines
        self.last = 0  # the last line sent
        self.ended = False  # every input line was sent

    def add(self, ident: int, number: int, kind: str) -> None:
        self.lines[ident] = number
        self.last = number
        if kind in ("FR", "R") or ident == 0:  # the opening is always reliable
            self.reliable.append(number)

    def resume(self, failure: Any) -> str:
        """How many reliable lines were acknowledged, the ones that were not (their
        line numbers: each may or may not have arrived, send them again on a new
        channel), whether the receiver answered, and the lines never sent."""
        missing = sorted(self.lines[i] for i in failure.unacknowledged if i in self.lines)
        if failure.reason in ("stale", "early", "down", "overloaded"):
            missing = sorted(self.lines.values())
        acknowledged = len(self.reliable) - len([n for n in missing if n in self.reliable])
        parts = [f"{acknowledged} of {len(self.reliable)} reliable lines acknowledged"]
        if missing:
            parts.append(f"not acknowledged: line{'s' if len(missing) > 1 else ''} "
                         f"{line_ranges(missing)}")
        heard = failure.heard_ago
        parts.append("the receiver never answered" if heard is None
                     else f"the receiver last answered {heard:.1f} s before")
        if not self.ended:
            parts.append(f"lines after {self.last} were not sent")
        if missing or not self.ended:
            parts.append("send those lines again on a new channel")
        return "; ".join(parts)


def line_ranges(numbers: list[int], most: int = 8) -> str:
    """``[3, 4, 5, 9]`` -> ``3-5, 9`` (at most ``most`` ranges, then ``...``)."""
    ranges: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        ranges.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    shown = ", ".join(ranges[:most])
    return shown + (f", ... ({len(numbers)} lines)" if len(ranges) > most else "")
