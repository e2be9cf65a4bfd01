"""``timebound channel recv|send`` (and the group and pub-sub commands).

Every bad input is one line ``timebound: error: ...`` and exit status 2. Readiness
lines (``listening on udp://HOST:PORT``) go to stderr so that stdout holds only the
JSON lines the commands promise.

Issue 26: every server command (``channel recv``, ``group join``, ``pubsub merge``)
binds only loopback addresses without a key unless ``--insecure``; every command
takes ``--service ID`` with ``--key-file``; ``--port`` is optional everywhere
(default 0: the system picks one, announced in the listening line). Stdin is read as
bytes and decoded per line, so a line that is not UTF-8 ends the command with one
line ``timebound: error: stdin:N: not valid UTF-8 ...`` and exit 2 (``group join``
included: it used to lose its reader thread there and never exit). Hosts are
checked, and the addresses an unconnected socket sends to resolved, by
``timebound.net.cli.check_host`` and ``resolve_targets``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

from timebound.durations import duration_help, duration_type, format_duration
from timebound.errors import StorageError, UsageError
from timebound.net._endpoint import on_signals, until_signal
from timebound.net.cli.common import (
    add_bind_options,
    add_insecure_option,
    add_key_options,
    add_stats_option,
    announce,
    check_exposure,
    check_host,
    command_group,
    format_address,
    host_family,
    key_option,
    parse_port,
    parse_target,
    print_stats,
    resolve_targets,
    service_option,
    start_bound,
    utf8,
)

#: Largest --window of a channel sender.
MAX_CLI_WINDOW = 65536
#: Largest --count / --timeout.
MAX_COUNT = 10**9
MAX_SECONDS = 86400.0


def _int_in(text: str, option: str, low: int, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise UsageError(option, f"must be an integer, got {text!r}") from None
    if not low <= value <= high:
        raise UsageError(option, f"must be in [{low}, {high}], got {value}")
    return value


def _seconds_in(value: float | None, option: str, low: float = 0.0,
                high: float = MAX_SECONDS) -> float | None:
    if value is None:
        return None
    if not low < value <= high:
        raise UsageError(option, f"must be in ({low:g}, {high:g}] s, got {value}")
    return value


def _whole_ms(micros: int | None, option: str, low: int, high: int) -> int | None:
    """A duration option's microseconds as the whole milliseconds the pub-sub services
    take (their clock ticks in ms), in [``low``, ``high``] ms."""
    if micros is None:
        return None
    if micros % 1000:
        raise UsageError(option, f"must be a whole number of milliseconds, got "
                                 f"{format_duration(micros)}")
    return _int_in(str(micros // 1000), option, low, high)


def readable_duration(micros: int) -> str:
    """A duration in microseconds for people: ``5036`` -> ``5.036ms``, ``20000`` ->
    ``20ms``, ``1500000`` -> ``1.5s``."""
    for unit, size in (("s", 1_000_000), ("ms", 1000)):
        if abs(micros) >= size:
            return f"{micros / size:.6f}".rstrip("0").rstrip(".") + unit
    return f"{micros}us"


def _print_stats_with_units(args: argparse.Namespace, endpoint: Any,
                            micros: dict[str, int]) -> None:
    """``--stats``: ``endpoint``'s counters as one JSON line on stderr, the durations
    among them (``micros``: name -> microseconds per unit of its value) as strings with
    their unit (``"srtt": "5.036ms"``)."""
    if not args.stats:
        return
    stats = endpoint.statistics()
    for name, factor in micros.items():
        value = stats.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            stats[name] = readable_duration(value * factor)
    print(json.dumps(stats, sort_keys=True), file=sys.stderr)


def add_service_parsers(commands: Any) -> None:
    """``timebound channel``, ``group`` and ``pubsub`` (one line in timebound.cli)."""
    add_channel_parser(commands)
    add_group_parser(commands)
    add_pubsub_parser(commands)


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
    recv.add_argument("--f-hold", "--f-hold-ms", dest="f_hold", default=None,
                      type=duration_type("--f-hold", "ms", minimum_us=0), metavar="DURATION",
                      help=duration_help("deliver an F waiting behind a gap after this long, "
                                         "at most 1 day (none: at its slot's end); "
                                         "--f-hold-ms is the old name, deprecated",
                                         None, "ms"))
    add_stats_option(recv)
    recv.set_defaults(handler=run_channel_recv)

    send = sub.add_parser(
        "send", help="send lines 'KIND DATA' read from stdin",
        description="Read lines 'KIND DATA' (KIND: FR, R, F or N; DATA: the rest of the "
                    "line, UTF-8) from stdin and send each on one channel to HOST:PORT; "
                    "at end of input wait until every reliable message is acknowledged. "
                    "Exit 0; 1 if the channel failed (refused or no acknowledgment); 2 on "
                    "a bad line.")
    send.add_argument("target", metavar="HOST:PORT",
                      help="the channel receiver's UDP address ('timebound channel recv')")
    add_key_options(send)
    send.add_argument("--window", type=int, default=256, metavar="N",
                      help=f"messages in flight, 1..{MAX_CLI_WINDOW} (default 256)")
    send.add_argument("--timeout", type=duration_type("--timeout", "s"), default=10_000_000,
                      metavar="DURATION",
                      help=duration_help("give up after this long without acknowledgment, "
                                         "at most 1 day", 10_000_000, "s"))
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
        _int_in(str(args.count), "--count", 1, MAX_COUNT)
    hold = args.f_hold  # µs
    if hold is not None and hold > MAX_SECONDS * 1_000_000:
        raise UsageError("--f-hold", f"must be at most 1 day, got {format_duration(hold)}")
    key = key_option(args)
    try:
        listener = ChannelListener(host=args.host, port=args.port, key=key,
                                   storage=args.storage,
                                   f_hold=None if hold is None else hold / 1e6,
                                   insecure=args.insecure, service=service_option(args))
    except StorageError as exc:
        raise UsageError("--storage", str(exc)) from None

    async def main() -> None:
        await start_bound(listener, args.host, args.port)
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


class StdinLines:
    """Lines of stdin, read by a daemon thread ('' at end of input), so that the loop
    keeps retransmitting while input is slow and exit never waits for stdin.

    The thread hands each line over with ``call_soon_threadsafe`` (no coroutine is
    created in the thread, so a loop that stops first leaves nothing un-awaited), and
    a semaphore keeps at most ``room`` lines read ahead of the consumer.

    Stdin is read as bytes and each line decoded with surrogateescape: a byte that is
    not UTF-8 reaches the consumer as a surrogate (``text_line`` turns it into a
    one-line error naming ``stdin:N``) instead of killing the thread, which left the
    consumer waiting for ever. A read error ends the input."""

    def __init__(self, loop: asyncio.AbstractEventLoop, room: int = 1024,
                 source: Iterable[str | bytes] | None = None) -> None:
        import threading

        self._loop = loop
        self._source: Iterable[str | bytes] = _stdin_bytes() if source is None else source
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._room = threading.Semaphore(room)
        self.thread = threading.Thread(target=self._read, name="stdin", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            for line in self._source:
                if isinstance(line, bytes):
                    line = line.decode("utf-8", "surrogateescape")
                self._room.acquire()
                if not self._post(line):
                    return
        except (OSError, ValueError):  # stdin closed or unreadable: the input ends
            pass
        self._post("")

    def _post(self, line: str) -> bool:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, line)
        except RuntimeError:  # the loop is closed: the command is ending
            return False
        return True

    async def get(self) -> str:
        line = await self._queue.get()
        self._room.release()
        return line

    async def numbered(self) -> AsyncIterator[tuple[int, str]]:
        """``(N, line)`` for each line, numbered from 1, until the input ends."""
        number = 0
        while True:
            line = await self.get()
            if not line:
                return
            number += 1
            yield number, line

    def stop(self) -> None:
        """End the input here (SIGTERM, SIGINT): the next ``get`` returns ''."""
        self._queue.put_nowait("")


def _stdin_bytes() -> Iterable[bytes]:
    """Stdin's bytes, line by line (nothing when there is no stdin), read from its
    file descriptor: a daemon thread blocked in ``sys.stdin.buffer`` holds the
    buffer's lock, and the interpreter aborts (SIGABRT) when it exits meanwhile (a
    bad line ends ``group join`` while stdin is still open)."""
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):
        return ()
    return _fd_lines(fd)


def _fd_lines(fd: int) -> Iterator[bytes]:
    pending = bytearray()
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        start = len(pending)
        pending += chunk
        end = pending.find(b"\n", start)
        while end >= 0:
            yield bytes(pending[:end + 1])
            del pending[:end + 1]
            end = pending.find(b"\n")
    if pending:
        yield bytes(pending)


def stdin_lines(loop: asyncio.AbstractEventLoop) -> StdinLines:
    return StdinLines(loop)


def text_line(line: str, number: int) -> bytes:
    """Stdin line ``number`` without its line end, as UTF-8 (one line naming
    ``stdin:N`` when it is not UTF-8)."""
    return utf8(line.rstrip("\n").rstrip("\r"), f"stdin:{number}")


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
    _int_in(str(args.window), "--window", 1, MAX_CLI_WINDOW)
    timeout = args.timeout / 1e6  # µs -> s, the Channel's unit
    _seconds_in(timeout, "--timeout")
    key = key_option(args)
    channel = Channel(target, key=key, window=args.window, give_up=timeout,
                      service=service_option(args))
    bad: list[UsageError] = []

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
                        bad.append(exc)
                        break
                    await channel.send(data, kind)
            await channel.drain(timeout=None)
        finally:
            channel.close()
            _print_stats_with_units(args, channel, {"srtt": 1, "rto": 1})

    try:
        run(main())
    except ChannelFailed as exc:
        print(f"timebound: {exc}", file=sys.stderr)
        return 1
    if bad:
        raise bad[0]
    return 0


# -- group -------------------------------------------------------------------------


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
                      help="timestamp acks (one scalar) or the vector baseline")
    join.add_argument("--clock", choices=("physical", "lamport"), default="physical",
                      help="message timestamps: the system clock (µs) or a Lamport counter")
    join.add_argument("--group", default="timebound", metavar="G",
                      help="the group's name on the wire (default timebound)")
    join.add_argument("--ack-every", "--ack-every-ms", dest="ack_every", default=20_000,
                      type=duration_type("--ack-every", "ms"), metavar="DURATION",
                      help=duration_help("ack and heartbeat period, at most 60s; "
                                         "--ack-every-ms is the old name, deprecated",
                                         20_000, "ms"))
    join.add_argument("--dead-after", type=duration_type("--dead-after", "s"), default=None,
                      metavar="DURATION",
                      help=duration_help("disconnect a member silent this long, at most 1 "
                                         "day (none: never)", None, "s"))
    join.add_argument("--join-wait", type=duration_type("--join-wait", "s", minimum_us=0),
                      default=2_000_000, metavar="DURATION",
                      help=duration_help("before multicasting its first stdin line, wait "
                                         "until every member has been heard from (their "
                                         "join lines come first), at most this long, "
                                         "at most 60s; 0s: send at once", 2_000_000, "s"))
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
    dead_after = _seconds_in(None if args.dead_after is None else args.dead_after / 1e6,
                             "--dead-after")
    _int_in(str(args.max_buffer), "--max-buffer", 1, 1_000_000)
    key = key_option(args)
    member = Group(args.group, args.name, members, acks=args.acks, clock=args.clock, key=key,
                   ack_every=ack_every, nack_every=ack_every,
                   dead_after=dead_after, max_buffer=args.max_buffer,
                   insecure=args.insecure, service=service_option(args))
    bad: list[BaseException] = []

    async def main() -> None:
        try:
            await member.start()
        except OSError as exc:
            raise UsageError("--members", f"cannot bind {args.name}'s address "
                                          f"{format_address(members[args.name])}: "
                                          f"{exc.strerror or exc}") from None
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
                    await member.send(text_line(line, number))
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
            _print_stats_with_units(  # physical timestamps are µs; Lamport's are counts
                args, member, {"stability_latency_sum": 1, "stability_latency_max": 1}
                if args.clock == "physical" else {})

    run(main())
    if bad:
        raise bad[0]
    return 0


# -- pub-sub -------------------------------------------------------------------------


def _system_options(parser: argparse.ArgumentParser, required: bool = True) -> None:
    from timebound.core.pubsub import MAX_DELTA, MAX_EPSILON, MAX_N

    need = "required" if required else "none: any"
    parser.add_argument("--epsilon", type=duration_type("--epsilon", "ms"), required=required,
                        metavar="DURATION",
                        help=duration_help(f"clock synchronization bound (G1), whole ms, "
                                           f"1ms..{MAX_EPSILON}ms ({need})", None, "ms"))
    parser.add_argument("--delta", type=duration_type("--delta", "ms", minimum_us=0),
                        required=required, metavar="DURATION",
                        help=duration_help(f"message delay bound (G2), whole ms, "
                                           f"0ms..{MAX_DELTA}ms ({need})", None, "ms"))
    parser.add_argument("--n", type=int, default=64, metavar="N",
                        help=f"bound on the number of publishers, 1..{MAX_N} (default 64)")
    add_key_options(parser)


def _check_system(args: argparse.Namespace) -> None:
    from timebound.core.pubsub import MAX_DELTA, MAX_EPSILON, MAX_N

    # µs -> the whole ms the pub-sub services take (their clock ticks in ms)
    args.epsilon = _whole_ms(args.epsilon, "--epsilon", 1, MAX_EPSILON)
    args.delta = _whole_ms(args.delta, "--delta", 0, MAX_DELTA)
    _int_in(str(args.n), "--n", 1, MAX_N)


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
    subscribe.add_argument("--gap-wait", "--gap-wait-ms", dest="gap_wait", default=50_000,
                           type=duration_type("--gap-wait", "ms", minimum_us=0),
                           metavar="DURATION",
                           help=duration_help("wait this long at most for a reordered "
                                              "datagram, whole ms, 0ms..60s; --gap-wait-ms "
                                              "is the old name, deprecated", 50_000, "ms"))
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
                        bad.append(exc)
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
            _print_stats_with_units(args, server,  # the merger's clock ticks in ms
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
        _int_in(str(args.count), "--count", 1, MAX_COUNT)
    gap_wait = _whole_ms(args.gap_wait, "--gap-wait", 0, 60000) or 0
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
