"""The live RPC server's defaults: its receiver (SCMP Figs. 2-1 and 2-2 with the
paper's five-minute rho, a resilient ``latest`` on stable storage), its table bound
and its range of hash classes (``RpcServer``, the channel listener and the command
line's ``--help`` read them here). Ticks are microseconds.

Not compiled with mypyc (read once, when a server is made): plain Python.
"""

from __future__ import annotations

import os

from timebound.core.atmostonce import ReceiverConfig
from timebound.net._clock import seconds


def _default_capacity() -> int:
    """Connection-table entries a server keeps by default, over all its classes:
    one per KiB of a sixteenth of physical memory (an entry with its RPC state takes
    about 0.65 KiB), between 10,000 and 1,000,000."""
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        memory = 1 << 30
    return min(1_000_000, max(10_000, memory // 16 // 1024))


#: The default table bound (``capacity=None``); ``capacity=0`` is unbounded.
DEFAULT_CAPACITY = _default_capacity()

#: Defaults of the receiver (ticks are microseconds): the paper's five minutes.
DEFAULT_RHO = seconds(300)
DEFAULT_GC_EVERY = seconds(1)
DEFAULT_BETA = seconds(2)
DEFAULT_LATEST_EVERY = seconds(1)

#: Most hash classes (the replay's ``--classes`` range).
MAX_CLASSES = 4096


def default_receiver() -> ReceiverConfig:
    return ReceiverConfig("fixed", rho=DEFAULT_RHO, gc_every=DEFAULT_GC_EVERY,
                          resilient=True, beta=DEFAULT_BETA, latest_every=DEFAULT_LATEST_EVERY)
