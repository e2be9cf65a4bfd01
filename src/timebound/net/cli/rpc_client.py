"""``timebound rpc call`` and ``rpc stats``: the client side of the RPC's command line.

A call's payload (``call_payload``), its timeout (``--timeout``, a duration with its
unit, at most ``MAX_TIMEOUT``), and what the caller is told: the reply on stdout, or
one line on stderr and the exit status of its outcome (``failure_status``,
``timebound.exitcodes``): a timeout (the call ran at most once), a refusal and what it
proves (``rejection_line``), a remote error.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from timebound.durations import format_duration
from timebound.errors import UsageError
from timebound.exitcodes import (
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_REFUSED_UNKNOWN,
    EXIT_REMOTE_ERROR,
    EXIT_TIMEOUT,
)
from timebound.net.cli.common import check_host, key_option, parse_target, service_option, utf8

#: Largest --timeout, seconds and µs.
MAX_TIMEOUT = 3600.0
MAX_TIMEOUT_US = 3_600_000_000
#: Most payload bytes ``rpc call`` sends (a CALL must fit one datagram, with a long
#: procedure name, a key's tag and the frame around it).
MAX_PAYLOAD = 65_000


def _timeout(micros: int) -> float:
    """``--timeout`` (µs) in seconds, at most ``MAX_TIMEOUT``."""
    if not 0 < micros <= MAX_TIMEOUT * 1e6:
        raise UsageError("--timeout", f"must be at most {MAX_TIMEOUT:g}s, got "
                                      f"{format_duration(micros)}")
    return micros / 1e6


def timeout_line(target: str, micros: int) -> str:
    """The one line ``rpc call`` and ``rpc stats`` print on a timeout."""
    return (f"timebound: timeout: no reply from {target} within {format_duration(micros)} "
            "(the call ran at most once)")


def _client_call(args: argparse.Namespace, proc: str, payload: bytes) -> bytes:
    from timebound.net._client import RpcClient
    from timebound.net._loop import run

    target = parse_target(args.target)
    check_host(target[0], "HOST:PORT")
    timeout = _timeout(args.timeout)
    key = key_option(args)
    service = service_option(args)

    async def main() -> bytes:
        async with RpcClient(target, key=key, service=service) as client:
            return await client.call(proc, payload, timeout=timeout)

    try:
        result = run(main())
    except OSError as exc:
        raise UsageError("HOST:PORT", f"cannot reach {args.target}: {exc.strerror or exc}") from None
    assert isinstance(result, bytes)
    return result


def run_call(args: argparse.Namespace) -> int:
    from timebound.net._errors import CallRejected, CallTimeout, RemoteError

    if not args.proc or len(utf8(args.proc, "PROC")) > 255:
        raise UsageError("PROC", "procedure name must be 1..255 UTF-8 bytes")
    payload = call_payload(args.payload)
    try:
        reply = _client_call(args, args.proc, payload)
    except CallTimeout:
        print(timeout_line(args.target, args.timeout), file=sys.stderr)
        return EXIT_TIMEOUT
    except CallRejected as exc:
        print(f"timebound: rejected: {rejection_line(exc)}", file=sys.stderr)
        return failure_status(exc)
    except RemoteError as exc:
        print(f"timebound: remote error: {exc.message}", file=sys.stderr)
        return EXIT_REMOTE_ERROR
    sys.stdout.write(reply.decode("utf-8", "backslashreplace") + "\n")
    return EXIT_OK


def failure_status(exc: Exception) -> int:
    """The exit status of a call that failed with ``exc`` (``timebound.exitcodes``): a
    timeout 3; a refusal 4 when it proves the call did not run (``CallRejected.ran is
    False``), else 5; a remote error 6."""
    from timebound.net._errors import CallRejected, CallTimeout

    if isinstance(exc, CallTimeout):
        return EXIT_TIMEOUT
    if isinstance(exc, CallRejected):
        return EXIT_REFUSED if exc.ran is False else EXIT_REFUSED_UNKNOWN
    return EXIT_REMOTE_ERROR


def call_payload(text: str) -> bytes:
    """``rpc call``'s PAYLOAD: ``-`` is stdin, ``@FILE`` a regular file's bytes,
    ``@@TEXT`` the text ``@TEXT``, anything else UTF-8 text; at most ``MAX_PAYLOAD``
    bytes (one datagram), else a ``UsageError``."""
    from timebound.net._keys import read_small_file
    from timebound.storage import read_at_most

    too_large = "a call's payload must fit one datagram"
    if text == "-":
        data = read_at_most(sys.stdin.fileno(), MAX_PAYLOAD)
        where = "stdin"
    elif text.startswith("@") and not text.startswith("@@"):
        return read_small_file(text[1:], "PAYLOAD", MAX_PAYLOAD, too_large)
    else:
        data = utf8(text[1:] if text.startswith("@@") else text, "PAYLOAD")
        where = "the text"
    if len(data) > MAX_PAYLOAD:
        raise UsageError("PAYLOAD", f"{where} is larger than {MAX_PAYLOAD} bytes: {too_large}")
    return data


#: What each refusal means (docs/net.md), as ``rpc call`` prints it.
REJECTION_MEANING = {
    "early": "the call did not run",
    "overloaded": "the call did not run",
    "expired": "the server did not start the call: its deadline had passed",
    "stale": "this copy did not run; an earlier copy may have run once",
    "down": "this copy did not run; an earlier copy may have run once",
}


def rejection_line(exc: Any) -> str:
    """``REASON (meaning)`` of a ``CallRejected``; a refusal that was not
    authenticated (no key) is not certain: anyone on the path can forge one, so the
    call may have run."""
    reason = str(exc.reason)
    if not getattr(exc, "authenticated", True):
        return (f"{reason} (unauthenticated: the server's refusal could be forged; "
                "the call may have run)")
    meaning = REJECTION_MEANING.get(reason)
    return reason if meaning is None else f"{reason} ({meaning})"


def run_stats(args: argparse.Namespace) -> int:
    from timebound.net._errors import CallTimeout, RpcError
    from timebound.net._server import STATS_PROCEDURE

    try:
        reply = _client_call(args, STATS_PROCEDURE, b"")
    except CallTimeout:
        print(timeout_line(args.target, args.timeout), file=sys.stderr)
        return EXIT_TIMEOUT
    except RpcError as exc:
        print(f"timebound: {exc}", file=sys.stderr)
        return failure_status(exc)
    stats = json.loads(reply)
    if args.json:
        print(json.dumps(stats, sort_keys=True))
    else:
        for name, value in stats.items():
            print(f"{name:>22}  {value}")
    return 0
