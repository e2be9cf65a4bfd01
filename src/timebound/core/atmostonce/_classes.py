"""Per-class receivers (SCMP section 2.4).

"The server ... can use different rhos for different classes of clients ... it would
need to maintain a different G.upper for each category." A ``ClassifiedReceiver``
holds one complete ``Receiver`` per class (its own estimator, table, ``upper`` and,
when resilient, its own ``latest``) and a classifier the caller supplies that maps a
connection id to a class index. A crash hits every class at once: they share a node.

``crc32_classifier(k)`` is the classifier of ``timebound replay atmostonce --classes
K`` and of the Spark operator: class = ``crc32(utf-8 conn) mod K``, stable across
processes and machines (unlike Python's ``hash``).

Verbs: the ``Receiver``'s (``receive(conn, ts, *, now)``, ``handle_timer(*, now)``,
``crash(*, now, down=None)``, ``restart(*, now)``, ``next_deadline()``,
``statistics()``).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from timebound.core.atmostonce._events import ReceiverStatistics, Verdict
from timebound.core.atmostonce._receiver import Receiver
from timebound.errors import ProtocolUsageError

Classifier = Callable[[str], int]


@dataclass(frozen=True, slots=True)
class ClassifiedStatistics:
    """A snapshot of every class (in class order) and the node's verdict totals."""

    classes: tuple[ReceiverStatistics, ...]
    entries: int
    accepted: int
    duplicate: int
    stale: int
    early: int
    refused_down: int
    recovering: int
    full: int


def crc32_class(conn: str, classes: int) -> int:
    """The class of a connection id among ``classes`` hash classes."""
    return zlib.crc32(conn.encode("utf-8")) % classes


def crc32_classes(conns: Sequence[str], classes: int) -> list[int]:
    """``crc32_class`` of every id, in one pass (the column-wise drivers classify each
    distinct id of a column once)."""
    if classes == 1:
        return [0] * len(conns)
    crc32 = zlib.crc32
    return [crc32(conn.encode("utf-8")) % classes for conn in conns]


def crc32_classifier(classes: int) -> Classifier:
    if classes < 1:
        raise ProtocolUsageError(f"classes must be >= 1, got {classes}")
    if classes == 1:
        return lambda conn: 0
    return lambda conn: zlib.crc32(conn.encode("utf-8")) % classes


class ClassifiedReceiver:
    """A node's receivers, one per class of connections."""

    def __init__(self, receivers: Sequence[Receiver], classifier: Classifier) -> None:
        if not receivers:
            raise ProtocolUsageError("at least one class is needed")
        self.receivers = list(receivers)
        self.classifier = classifier

    def receiver_for(self, conn: str) -> Receiver:
        index = self.classifier(conn)
        if not 0 <= index < len(self.receivers):
            raise ProtocolUsageError(f"classifier sent {conn!r} to class {index}")
        return self.receivers[index]

    def receive(self, conn: str, ts: int, *, now: int, marked: bool = False) -> Verdict:
        return self.receiver_for(conn).receive(conn, ts, now=now, marked=marked)

    def handle_timer(self, *, now: int) -> None:
        for receiver in self.receivers:
            receiver.handle_timer(now=now)

    def crash(self, *, now: int, down: int | None = None) -> None:
        self.handle_timer(now=now)
        if any(receiver.down for receiver in self.receivers):
            raise ProtocolUsageError("crash of a node that is already down")
        for receiver in self.receivers:
            receiver.crash(now=now, down=down)

    def restart(self, *, now: int) -> None:
        for receiver in self.receivers:
            receiver.restart(now=now)

    def statistics(self) -> ClassifiedStatistics:
        classes = tuple(receiver.statistics() for receiver in self.receivers)
        return ClassifiedStatistics(
            classes=classes,
            entries=sum(s.entries for s in classes),
            accepted=sum(s.accepted for s in classes),
            duplicate=sum(s.duplicate for s in classes),
            stale=sum(s.stale for s in classes),
            early=sum(s.early for s in classes),
            refused_down=sum(s.refused_down for s in classes),
            recovering=sum(s.recovering for s in classes),
            full=sum(s.full for s in classes),
        )

    @property
    def down(self) -> bool:
        return self.receivers[0].down

    @property
    def entries(self) -> int:
        return sum(receiver.entries for receiver in self.receivers)

    def next_deadline(self) -> int | None:
        deadlines = [d for r in self.receivers if (d := r.next_deadline()) is not None]
        return min(deadlines) if deadlines else None
