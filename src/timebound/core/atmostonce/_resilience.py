"""How a resilient receiver survives a crash (SCMP Fig. 2-2 and section 2.2): the
stable storage it keeps ``latest`` on, and the two resilience options.

Kept apart from ``_receiver`` (which the mypyc build compiles: ``timebound._compiled``)
so that these stay plain Python classes: a driver may subclass ``MemoryStorage`` or
implement ``StableStorage``, and the records pickle as usual.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from timebound.core.atmostonce._events import StableRecord
from timebound.errors import ProtocolUsageError


class StableStorage(Protocol):
    """Where a resilient receiver keeps ``latest`` (and the estimator's state).

    Drivers implement it (a file written atomically, a database row...); ``write``
    must be durable when it returns. ``timebound.core`` ships only ``MemoryStorage``.
    """

    def read(self) -> StableRecord | None: ...

    def write(self, record: StableRecord) -> None: ...


class MemoryStorage:
    """Stable storage that survives a simulated crash of the receiver object only."""

    def __init__(self, record: StableRecord | None = None) -> None:
        self.record = record
        self.writes = 0

    def read(self) -> StableRecord | None:
        return self.record

    def write(self, record: StableRecord) -> None:
        self.record = record
        self.writes += 1


@dataclass(frozen=True, slots=True)
class StableLatest:
    """Fig. 2-2 resilience: ``latest`` on stable storage, refreshed periodically.

    ``deferred`` (default False) lets a driver write off its hot path (module
    docstring, "Deferred writes"): the receiver's refreshes are handed out by
    ``take_write()`` and count only once ``write_done`` reports them durable."""

    storage: StableStorage
    beta: int
    latest_every: int
    deferred: bool = False

    def __post_init__(self) -> None:
        if self.beta < 0:
            raise ProtocolUsageError(f"beta must be >= 0, got {self.beta}")
        if self.latest_every < 1:
            raise ProtocolUsageError(f"latest_every must be >= 1, got {self.latest_every}")


@dataclass(frozen=True, slots=True)
class MonotonicClock:
    """Section 2.2's alternative for a monotonic clock: no storage, epsilon windows."""

    epsilon: int

    def __post_init__(self) -> None:
        if self.epsilon < 0:
            raise ProtocolUsageError(f"epsilon must be >= 0, got {self.epsilon}")


Resilience = StableLatest | MonotonicClock


def aligned_records(records: Sequence[StableRecord | None], classes: int,
                    start: StableRecord | None) -> list[StableRecord | None]:
    """What each of a start's ``classes`` class storages must hold before the
    receivers are built (None: leave it as it is), the rule that keeps at-most-once
    across a change of ``--classes``: a connection whose class changed is still
    bounded by the ``latest`` its old class wrote, so every class starts from the
    largest ``latest`` of any class storage.

    ``records``: what each storage holds (None: nothing yet), this start's classes
    first (``records[:classes]``), then the storages of a run with more classes.
    ``start``: the record of a start without one (``latest = now``), or None. An empty
    class storage gets ``latest = max(start.latest, the largest latest)`` (the
    largest record's estimate and ``p``); one behind the largest is raised to it,
    keeping its own estimate and ``p``. With one class and no other storage, nothing
    is rewritten."""
    if len(records) < classes:
        raise ProtocolUsageError(f"{len(records)} records for {classes} classes")
    present = [r for r in records if r is not None]
    wanted: list[StableRecord | None] = [None] * classes
    if not present and start is None:
        return wanted
    if classes == 1 and len(records) == 1 and records[0] is not None:
        return wanted
    top = max(present, key=lambda r: r.latest) if present else None
    for k, record in enumerate(records[:classes]):
        if record is None:
            source = top if top is not None else start
            assert source is not None
            latest = source.latest if start is None else max(source.latest, start.latest)
            wanted[k] = StableRecord(latest, source.estimate, source.p)
        elif top is not None and record.latest < top.latest:
            wanted[k] = StableRecord(top.latest, record.estimate, record.p)
    return wanted
