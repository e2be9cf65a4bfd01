"""Helpers of the live net tests: start ``timebound rpc serve`` as a process, read RSS,
kernel drops and settled counters."""

from __future__ import annotations

import asyncio
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

TIMEBOUND = [sys.executable, "-m", "timebound.cli"]


def start_server(args: list[str], *, env: dict[str, str] | None = None,
                 timeout: float = 15.0) -> tuple[subprocess.Popen[bytes], tuple[str, int]]:
    """Run ``timebound rpc serve ARGS``; wait for its one ready line."""
    full_env = dict(os.environ, **(env or {}))
    proc = subprocess.Popen(TIMEBOUND + ["rpc", "serve", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=full_env)
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, left))
        if not ready:
            stop(proc)
            raise AssertionError(f"server not ready in {timeout} s")
        chunk = os.read(proc.stdout.fileno(), 1)
        if not chunk:
            err = proc.stderr.read() if proc.stderr else b""
            stop(proc)
            raise AssertionError(f"server exited: {err.decode(errors='replace')}")
        line += chunk
    text = line.decode().strip()
    assert text.startswith("listening on udp://"), text
    hostport = text.removeprefix("listening on udp://")
    host, _, port = hostport.rpartition(":")
    return proc, (host.strip("[]"), int(port))


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def udp_drops(port: int) -> int:
    """Datagrams the kernel dropped at the UDP socket bound to ``port`` (its receive
    buffer was full): the ``drops`` column of /proc/net/udp and udp6."""
    total = 0
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port:
                total += int(fields[-1])
    return total


async def settled_junk(statistics: Callable[[], Mapping[str, Any]],
                       pause: float = 0.02) -> int:
    """Wait until a service's malformed + unauthenticated counters stop moving
    (three reads in a row unchanged) and return their sum."""
    seen, still = -1, 0
    while still < 3:
        await asyncio.sleep(pause)
        stats = statistics()
        count = stats["malformed"] + stats["unauthenticated"]
        still = still + 1 if count == seen else 0
        seen = count
    return seen


def fake_public(monkeypatch: Any, module: Any) -> None:
    """Make ``module``'s ``open_datagram`` bind loopback but report a public
    (documentation, 192.0.2.1) address as bound: the loopback-only default is
    tested without binding, or sending to, any other address."""
    real = module.open_datagram

    async def open_public(owner: Any, local: Any = None, remote: Any = None) -> Any:
        _, port = await real(owner, local=("127.0.0.1", 0), remote=remote)
        return ("192.0.2.1", port)

    monkeypatch.setattr(module, "open_datagram", open_public)
