"""Example handlers for ``timebound rpc serve timebound.net.examples:app``.

- ``echo``: the payload back; ``incr``: the payload as an integer, plus one;
- ``record``: appends the payload and a newline to the *execution ledger*, the file
  named by ``$TIMEBOUND_LEDGER`` (one ``O_APPEND`` write per execution, so the ledger
  survives a SIGKILL of the server: the fault tests count executions with it);
- ``sleep``: an ``async`` handler sleeping ``payload`` seconds (default 0.1);
- ``fail``: raises ``ValueError`` (the client sees ``RemoteError``).
"""

from __future__ import annotations

import asyncio
import os
import threading


def echo(payload: bytes) -> bytes:
    return payload


def incr(payload: bytes) -> bytes:
    return str(int(payload or b"0") + 1).encode()


_ledger_fd: int | None = None
_ledger_lock = threading.Lock()  # sync handlers run in the server's worker threads


def record(payload: bytes) -> bytes:
    global _ledger_fd
    with _ledger_lock:
        if _ledger_fd is None:
            path = os.environ.get("TIMEBOUND_LEDGER")
            if not path:
                raise RuntimeError("set TIMEBOUND_LEDGER to the ledger file")
            _ledger_fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        fd = _ledger_fd
    os.write(fd, payload + b"\n")
    return payload


async def sleep(payload: bytes) -> bytes:
    await asyncio.sleep(float(payload or b"0.1"))
    return b"slept"


def fail(payload: bytes) -> bytes:
    raise ValueError(payload.decode("utf-8", "replace") or "failed on purpose")


app = {"echo": echo, "incr": incr, "record": record, "sleep": sleep, "fail": fail}
