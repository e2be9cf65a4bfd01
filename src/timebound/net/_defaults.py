"""The live RPC server's defaults: its receiver (SCMP Figs. 2-1 and 2-2 with the
paper's five-minute rho, a resilient ``latest`` on stable storage), its table bounds
(entries and bytes) and its range of hash classes (``RpcServer``, the channel listener and the command
line's ``--help`` read them here). Ticks are microseconds.

Not compiled with mypyc (read once, when a server is made): plain Python.
"""

from __future__ import annotations

import os

from timebound.core.atmostonce import ReceiverConfig
from timebound.net._clock import seconds


def _physical_memory() -> int:
    """Bytes of physical memory (1 GiB where the platform does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return 1 << 30


def _default_capacity() -> int:
    """Connection-table entries a server keeps by default, over all its classes:
    one per KiB of a sixteenth of physical memory (an entry with its RPC state takes
    about 0.5 KiB without its reply: ``core.rpc._server.ENTRY_BYTES``), between
    10,000 and 1,000,000."""
    return min(1_000_000, max(10_000, _physical_memory() // 16 // 1024))


def _default_max_bytes() -> int:
    """Bytes a server's tables keep by default, over all its classes, stored replies
    included (``core.atmostonce._table``, "Bounds"): a sixteenth of physical memory,
    at least 64 MiB. ``DEFAULT_CAPACITY`` entries with short replies take about half
    of it (0.5 KiB each); large replies meet this bound first (the entry bound alone
    would let 1,000,000 replies of 59 KiB take about 57 GiB)."""
    return max(64 << 20, _physical_memory() // 16)


#: The default table bound (``capacity=None``); ``capacity=0`` is unbounded.
DEFAULT_CAPACITY = _default_capacity()
#: The default byte bound of the tables, over all classes (``rpc serve
#: --max-bytes``; ``default_receiver``); 0 on the command line is unbounded.
DEFAULT_MAX_BYTES = _default_max_bytes()

#: Defaults of the receiver (ticks are microseconds): the paper's five minutes.
DEFAULT_RHO = seconds(300)
DEFAULT_GC_EVERY = seconds(1)
DEFAULT_BETA = seconds(2)
DEFAULT_LATEST_EVERY = seconds(1)

#: Most hash classes (the replay's ``--classes`` range).
MAX_CLASSES = 4096


def default_receiver(classes: int = 1) -> ReceiverConfig:
    """The live receiver's config, its table bounded to ``DEFAULT_MAX_BYTES`` split
    over ``classes`` (the config is each class's)."""
    return ReceiverConfig("fixed", rho=DEFAULT_RHO, gc_every=DEFAULT_GC_EVERY,
                          resilient=True, beta=DEFAULT_BETA, latest_every=DEFAULT_LATEST_EVERY,
                          max_bytes=max(1, DEFAULT_MAX_BYTES // max(1, classes)))
