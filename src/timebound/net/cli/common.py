"""What every network command's line shares (``rpc``, ``net proxy``, ``channel``,
``group``, ``pubsub``): the bind, key and stats options, target and host parsing (a
host is checked with ``getaddrinfo`` before anything binds or sends; the addresses an
unconnected socket sends to are resolved to numeric addresses of one family), argv
text as UTF-8, the readiness line, reading ``--key-file`` and checking ``--service``.
Every bad input is a ``UsageError``: one line and exit status 2."""

from __future__ import annotations

import argparse
import json
import socket
import sys
from typing import Any, TextIO

from timebound._safety import check_int
from timebound.durations import format_duration, readable_duration
from timebound.errors import TimeboundError, UsageError


def command_group(commands: Any, name: str, help: str,
                   description: str | None = None) -> Any:
    """The subcommands (``dest`` ``<name>_command``, required) of a new command."""
    parser = commands.add_parser(name, help=help, description=description)
    return parser.add_subparsers(dest=f"{name}_command", metavar="COMMAND", required=True)


def add_key_options(parser: argparse.ArgumentParser) -> None:
    """``--key-file`` and ``--service`` (every server and client command)."""
    parser.add_argument("--key-file", metavar="F",
                        help="shared key for HMAC-SHA256 frames: a file of mode 0600 "
                             "holding 64 lowercase hex characters ('timebound key new "
                             "F' writes one)")
    parser.add_argument("--service", metavar="ID",
                        help="service id (1..64 UTF-8 bytes) mixed under the HMAC tag, so "
                             "a frame meant for one server fails at another sharing the "
                             "key; give the same ID to servers and clients; needs "
                             "--key-file")


def add_bind_options(parser: argparse.ArgumentParser) -> None:
    """``--host``, ``--port`` and ``--insecure`` (every server command alike)."""
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0,
                        help="UDP port 0..65535 (default 0: the system picks one, "
                             "announced in the listening line)")
    add_insecure_option(parser)


def add_insecure_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--insecure", action="store_true",
                        help="bind a non-loopback address without a key (anyone who can "
                             "reach it can forge frames); prints a warning")


def add_stats_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stats", action="store_true", help="counters to stderr at exit")


def print_stats(args: argparse.Namespace, endpoint: Any) -> None:
    """``endpoint``'s counters as one JSON line on stderr, with ``--stats``."""
    if args.stats:
        print(json.dumps(endpoint.statistics(), sort_keys=True), file=sys.stderr)


def parse_target(text: str, option: str = "HOST:PORT") -> tuple[str, int]:
    """``HOST:PORT`` or ``[V6]:PORT`` (also ``::1:PORT``)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise UsageError(option, f"expected HOST:PORT, got {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, parse_port(port, option)


def parse_port(text: str | int, option: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise UsageError(option, f"port must be an integer, got {text!r}") from None
    if not 0 <= port <= 65535:
        raise UsageError(option, f"port must be in 0..65535, got {port}")
    return port


def utf8(text: str, where: str) -> bytes:
    """``text`` (from argv or stdin, where a byte that is not UTF-8 arrives as a
    surrogate) as UTF-8; a ``UsageError`` naming ``where`` and the first bad byte."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start]
        byte = f"0x{ord(bad) - 0xDC00:02x}" if 0xDC80 <= ord(bad) <= 0xDCFF else repr(bad)
        raise UsageError(where, f"not valid UTF-8 (byte {byte} at character "
                                f"{exc.start + 1})") from None


def addresses(host: str, port: int, option: str) -> list[tuple[int, tuple[str, int]]]:
    """``(family, (ip, port))`` of every address ``host`` resolves to (one line and
    exit 2 for a host that is not a valid name or does not resolve)."""
    if not host:
        raise UsageError(option, "empty host (give an address: 127.0.0.1, ::1, 0.0.0.0)")
    utf8(host, option)
    try:
        infos = socket.getaddrinfo(host, port, 0, socket.SOCK_DGRAM)
    except UnicodeError:  # the IDNA codec: an empty or over-long label (bad..host)
        raise UsageError(option, f"{host!r} is not a valid host name") from None
    except (OSError, ValueError) as exc:  # socket.gaierror, an embedded NUL
        reason = getattr(exc, "strerror", None) or str(exc)
        raise UsageError(option, f"cannot resolve host {host!r}: {reason}") from None
    found: list[tuple[int, tuple[str, int]]] = [
        (int(family), (str(sockaddr[0]), int(sockaddr[1])))
        for family, _kind, _proto, _name, sockaddr in infos
        if family in (socket.AF_INET, socket.AF_INET6)]
    if not found:
        raise UsageError(option, f"cannot resolve host {host!r}: no IP address")
    return found


def check_host(host: str, option: str) -> str:
    """``host`` once it resolves (a ``UsageError`` naming ``option`` otherwise): a
    server's ``--host``, a client's target."""
    addresses(host, 0, option)
    return host


def check_exposure(host: str, *, keyed: bool, insecure: bool, service: str) -> None:
    """Refuse a ``--host`` that resolves to a non-loopback address without a key or
    ``--insecure`` before the service is built (so nothing, a storage file
    included, is made first). The service applies ``guard_exposure`` to the address
    it bound too; with ``--insecure`` that one prints the warning (once)."""
    from timebound.net._endpoint import guard_exposure, is_loopback

    if keyed or insecure:
        return
    for _family, (address, _) in addresses(host, 0, "--host"):
        if not is_loopback(address):
            guard_exposure(address, keyed=False, insecure=False, service=service)


def host_family(host: str, option: str) -> int:
    """The address family a socket bound to ``host`` gets (its first address)."""
    return addresses(host, 0, option)[0][0]


def resolve_targets(targets: list[tuple[str, int]], option: str,
                    family: int = 0) -> list[tuple[str, int]]:
    """``targets`` as numeric addresses of one family (an unconnected socket sends to
    them: asyncio's ``sendto`` takes no name): IPv4 when every host has one, else
    IPv6; only ``family`` when given (the family of the socket that sends)."""
    resolved = [addresses(host, port, option) for host, port in targets]
    for candidate in (socket.AF_INET, socket.AF_INET6):
        if family and candidate != family:
            continue
        if all(any(f == candidate for f, _ in each) for each in resolved):
            return [next(a for f, a in each if f == candidate) for each in resolved]
    wanted = {int(socket.AF_INET): "IPv4", int(socket.AF_INET6): "IPv6"}.get(family, "")
    raise UsageError(option, f"give addresses of one family{' (' + wanted + ')' if wanted else ''}"
                             ": some hosts resolve only to IPv4, others only to IPv6")


def format_address(address: tuple[str, int]) -> str:
    host, port = address[0], address[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def announce(address: tuple[str, int], file: TextIO | None = None) -> None:
    """The readiness line ``listening on udp://HOST:PORT`` (default: stdout)."""
    print(f"listening on udp://{format_address(address)}", file=file, flush=True)


def bind_error(exc: BaseException, host: str, port: int, *, host_option: str = "--host",
               port_option: str = "--port", what: str = "") -> UsageError:
    """The one line for a socket that could not bind ``host:port``: a port in use
    (or one that needs privileges) names ``port_option``, an address that is not
    this machine's (or any other failure) ``host_option``. ``what`` names the
    address (default ``HOST:PORT``). The errno may sit on the error's cause
    (uvloop): ``_endpoint.bind_errno``."""
    import errno

    from timebound.net._endpoint import bind_errno

    code = bind_errno(exc)
    where = what or format_address((host, port))
    if code == errno.EADDRINUSE:
        return UsageError(port_option, f"{where} is already in use (another socket is "
                                       "bound to it): stop that process or choose "
                                       "another port (0: the system picks a free one)")
    if code in (errno.EACCES, errno.EPERM):
        return UsageError(port_option, f"cannot bind {where}: permission denied (ports "
                                       "below 1024 need privileges)")
    if code == errno.EADDRNOTAVAIL:
        return UsageError(host_option, f"cannot bind {where}: {host} is not an address "
                                       "of this machine (give one of its own addresses, "
                                       "127.0.0.1, or 0.0.0.0 for all of them)")
    reason = getattr(exc, "strerror", None) or str(exc)
    return UsageError(host_option, f"cannot bind {where}: {reason}")


async def bind_listener(host: str, port: int) -> Any:
    """A UDP socket bound to ``host:port`` (``_endpoint.bind_udp``) for a service to
    start on (``start(sock=...)``), bound before the service opens its storage file:
    a port in use or an address not of this machine is one line (``bind_error``)
    and nothing is created."""
    from timebound.net._endpoint import bind_udp

    try:
        return await bind_udp(host, port)
    except OSError as exc:
        raise bind_error(exc, host, port) from None


async def start_bound(endpoint: Any, host: str, port: int, sock: Any = None) -> None:
    """``endpoint.start()`` (on ``sock``, when bound already: ``bind_listener``);
    failing to bind is one line naming ``--port`` or ``--host`` (``bind_error``)."""
    try:
        await (endpoint.start() if sock is None else endpoint.start(sock=sock))
    except OSError as exc:
        raise bind_error(exc, host, port) from None


def key_option(args: argparse.Namespace, name: str = "key_file") -> bytes | None:
    from timebound.net._keys import read_key

    path = getattr(args, name, None)
    return None if path is None else read_key(path, "--" + name.replace("_", "-"))


def service_option(args: argparse.Namespace) -> str:
    """``--service`` checked ("" without it); it needs ``--key-file``: without a key
    no tag is computed, so a service id would protect nothing."""
    service = getattr(args, "service", None)
    if service is None:
        return ""
    if getattr(args, "key_file", None) is None:
        raise UsageError("--service", "needs --key-file (the service id is mixed under "
                                      "the HMAC tag; without a key there is no tag)")
    from timebound.core.wire import service_prefix

    utf8(service, "--service")
    try:
        service_prefix(service)
    except TimeboundError as exc:
        raise UsageError("--service", str(exc)) from None
    return str(service)


#: Largest --count / --timeout.
MAX_COUNT = 10**9
MAX_SECONDS = 86400.0


def seconds_in(value: float | None, option: str, low: float = 0.0,
                high: float = MAX_SECONDS) -> float | None:
    if value is None:
        return None
    if not low < value <= high:
        raise UsageError(option, f"must be in ({low:g}, {high:g}] s, got {value}")
    return value


def whole_ms(micros: int | None, option: str, low: int, high: int) -> int | None:
    """A duration option's microseconds as the whole milliseconds the pub-sub services
    take (their clock ticks in ms), in [``low``, ``high``] ms."""
    if micros is None:
        return None
    if micros % 1000:
        raise UsageError(option, f"must be a whole number of milliseconds, got "
                                 f"{format_duration(micros)}")
    return check_int(micros // 1000, option, low, high)


def print_stats_with_units(args: argparse.Namespace, endpoint: Any,
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
