"""Per-class receivers (SCMP section 2.4).

"The server ... can use different rhos for different classes of clients ... it would
need to maintain a different G.upper for each category." A ``ClassifiedReceiver``
holds one complete ``Receiver`` per class (its own estimator, table, ``upper`` and,
when resilient, its own ``latest``) and a classifier the caller supplies that maps a
connection id to a class index. A crash hits every class at once: they share a node.

``crc32_classifier(k)`` is the classifier of ``timebound replay atmostonce --classes
K`` and of the Spark operator: class = ``crc32(utf-8 conn) mod K``, stable across
processes and machines (unlike Python's ``hash``).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence

from timebound.core.atmostonce._events import Verdict
from timebound.core.atmostonce._receiver import Receiver
from timebound.errors import ProtocolUsageError

Classifier = Callable[[str], int]


def crc32_class(conn: str, classes: int) -> int:
    """The class of a connection id among ``classes`` hash classes."""
    return zlib.crc32(conn.encode("utf-8")) % classes


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

    def receive(self, conn: str, ts: int, now: int) -> Verdict:
        return self.receiver_for(conn).receive(conn, ts, now)

    def advance(self, now: int) -> None:
        for receiver in self.receivers:
            receiver.advance(now)

    def crash(self, now: int, down: int | None = None) -> None:
        for receiver in self.receivers:
            receiver.advance(now)
        if any(receiver.down for receiver in self.receivers):
            raise ProtocolUsageError("crash of a node that is already down")
        for receiver in self.receivers:
            receiver.crash(now, down)

    def restart(self, now: int) -> None:
        for receiver in self.receivers:
            receiver.restart(now)

    @property
    def down(self) -> bool:
        return self.receivers[0].down

    @property
    def entries(self) -> int:
        return sum(receiver.entries for receiver in self.receivers)

    def next_deadline(self) -> int | None:
        deadlines = [d for r in self.receivers if (d := r.next_deadline()) is not None]
        return min(deadlines) if deadlines else None
