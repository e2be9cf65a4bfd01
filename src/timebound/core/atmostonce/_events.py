"""Verdicts and records of the at-most-once receiver (SCMP, Figs. 2-1 and 2-2).

A verdict is what the receiver decided about one message. ``ACCEPTED`` is the only
one that hands the message to the application; every other verdict refuses it:

- ``DUPLICATE``: the connection is in the table and the timestamp is not newer
  (a duplicate or an out-of-order message: *table-rejected* in the adaptive paper);
- ``STALE``: the connection is not in the table and the timestamp is not above
  ``upper`` (*summary-rejected*; possibly a late non-duplicate, i.e. *lost*);
- ``EARLY``: a resilient receiver refuses a timestamp above ``latest`` (Fig. 2-2 step 1);
- ``DOWN``: the receiver is crashed and not yet recovered;
- ``RECOVERING``: the monotonic-clock alternative of section 2.2 refuses everything
  for epsilon after a restart;
- ``FULL``: the table is at its bound (entries or bytes) after forgetting every entry
  it may forget early, and every remaining entry is one the protocol above keeps (an
  RPC call still running), so a new connection cannot be admitted.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from timebound.core._frozen import by_constructor


class Verdict(enum.Enum):
    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    STALE = "stale"
    EARLY = "early"
    DOWN = "down"
    RECOVERING = "recovering"
    FULL = "full"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class StableRecord:
    """What a resilient receiver keeps on stable storage.

    ``latest`` bounds every timestamp accepted before a crash; ``estimate`` and ``p``
    are the lifetime estimator's state, kept so that a crash does not make it relearn.
    """

    latest: int
    estimate: int
    p: int

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return by_constructor(self)


@dataclass(frozen=True, slots=True)
class ReceiverStatistics:
    """A snapshot of one receiver, for people and metrics."""

    entries: int
    upper: int
    latest: int | None
    estimate: int
    down: bool
    accepted: int
    duplicate: int
    stale: int
    early: int
    refused_down: int
    recovering: int
    full: int
    gcs: int
    evicted: int

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return by_constructor(self)
