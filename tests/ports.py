"""Loopback ports a test can give a process that binds them later.

A port found by binding port 0 and closing the socket is a port the kernel hands out
again: to the next socket that binds port 0 or connects anywhere, in any process (the
other pytest worker's services and clients, a JVM). A test that gives such a port to a
process started a moment later can then find it taken ("already in use"), and fail
without a fault of the code under test.

:func:`free_ports` picks ports outside the kernel's ephemeral range
(``/proc/sys/net/ipv4/ip_local_port_range``), which it never hands out by itself, from a
slab of its own for each pytest-xdist worker, in turn, so two tests of one run never get
the same port; each port is checked free (UDP and TCP) on 127.0.0.1 before it is given.
"""

from __future__ import annotations

import itertools
import os
import socket
from pathlib import Path

#: ports each pytest worker takes its ports from, in turn
SLAB = 1500
#: the lowest port used (below it: well-known and registered services' usual ports)
LOWEST = 15000
HIGHEST = 65535


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def _slab() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    index = int(worker) if worker.isdigit() else 0
    low, high = _ephemeral_range()
    # a machine whose ephemeral range leaves no slab outside it: slabs inside it (a
    # port may then be taken between the check and its use, as with port 0)
    slabs = (_slabs([(LOWEST, low - 1), (high + 1, HIGHEST)])
             or _slabs([(LOWEST, HIGHEST)]))
    return slabs[index % len(slabs)]


def _slabs(spans: list[tuple[int, int]]) -> list[range]:
    """The slabs of ``SLAB`` ports that fit in ``spans`` (first and last port each)."""
    return [range(start, start + SLAB)
            for first, last in spans
            for start in range(first, last - SLAB + 2, SLAB)]


_SLAB = _slab()
#: where in its slab this process starts (two runs side by side start apart)
_NEXT = itertools.cycle(itertools.chain(_SLAB[os.getpid() % len(_SLAB):],
                                        _SLAB[:os.getpid() % len(_SLAB)]))


def _is_free(port: int) -> bool:
    for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
        with socket.socket(socket.AF_INET, kind) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports, free on 127.0.0.1 now, that no other test of this run
    gets and the kernel does not give to a socket bound to port 0."""
    found: list[int] = []
    for _ in range(len(_SLAB)):
        port = next(_NEXT)
        if port not in found and _is_free(port):
            found.append(port)
            if len(found) == count:
                return found
    raise RuntimeError(f"fewer than {count} free ports in {_SLAB}")


def free_port() -> int:
    """One port, as :func:`free_ports` gives them."""
    return free_ports(1)[0]
