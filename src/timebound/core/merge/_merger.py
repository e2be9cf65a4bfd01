"""The causal deterministic merger (causal merge paper, section 4.2).

A merger buffers each message ``m`` until its clock reaches the deadline
``delcond``: ``r.m + c.m + δ + ε``. Any message that causally precedes ``m`` was sent
at a clock value ``<= r.m + c.m`` (``less`` orders by ``r + c`` first), so by G2 it
reached its receiver by ``r.m + c.m + δ`` on the sender's clock and by G1 by the
deadline on the merger's: waiting until then suffices for causal delivery (Theorem
4.5). Every merger computes the same deadline from the message alone, and messages due
at the same deadline are delivered in one fixed order -- the paper's ``less``, then the
publishing process id, then the message id -- so any two mergers deliver their
common messages in the same order (Theorem 4.4). Among equal deadlines ``less`` is a
lexicographic comparison (``Timestamp.tiebreak``; for ⟨r, c⟩, ``r``), so the order is
the sort key ``(deadline, tiebreak, proc, msg)``, a total order, and the buffer is a
heap on it.

Inputs and outputs, sans-IO (aioquic's shape): ``receive(envelope, now=)`` classifies
one arrival; ``next_deadline()`` is when the driver should call back;
``handle_timer(now=)`` returns every buffered message with deadline ``<= now`` in
order; ``flush()`` empties
the buffer at the end of a finite input; ``statistics()`` is a frozen snapshot. No
busy waiting: idle time costs nothing.

Classification at time ``now`` (the order the replay contract fixes): a message whose
deadline is ``< now`` can no longer be placed and is ``LATE`` (dropped, counted); else
a repeat of a message already buffered or delivered -- same ``(proc, msg)`` -- is a
``DUPLICATE`` (dropped, counted); else it is ``BUFFERED``. A late copy is not
remembered, so it does not make a later copy a duplicate. Choice: message identity is
the pair ``(proc, msg)``, since the order uses process id then message id.

A driver that wants the exact timing of the contract calls ``handle_timer(now=now -
1)`` before the arrivals at ``now`` and ``handle_timer(now=now)`` after them;
delivering later never changes the *order*, which depends on the key alone. With
``retain`` set, remembered ids are forgotten when ``handle_timer`` runs, so a driver
that sleeps until ``next_deadline()`` forgets later than one that ticks: only the
verdict on a repeat of an id due to be forgotten can differ.

Stabilization (Theorem 4.6): nothing here trusts the timestamp beyond using it as a
key, so garbage (negative or huge values, an arbitrary ``kn``) is buffered and
delivered at its deadline like any message and never blocks the others; nothing
depends on ``now`` having been monotone. The remembered ids are the one piece of
state that could grow without bound: ``retain`` (ticks) forgets a delivered id once
its deadline is more than ``retain`` in the past -- with ``retain >= 0`` a repeat
carrying the same timestamp is ``LATE`` by then anyway. ``None`` (the default, and
the replay's) remembers every id, as the replay contract reads.

Stacking (Theorem 4.3): with ``c < ε`` a message is delivered at most ``δ + 2ε - 1``
after its ``r`` on the merger's clock, hence within ``δ + 3ε`` on any clock, so
a merger's output is a publisher of ``ds(ε, δ + 3ε)``: ``level_parameters`` gives the
next level's ``(ε, δ)``. Messages keep their timestamps from level to level.
"""

from __future__ import annotations

import enum
import heapq
from collections import deque
from dataclasses import dataclass
from typing import Protocol

from timebound.errors import ProtocolUsageError


class Stamp(Protocol):
    """What the merger needs of a timestamp (``Timestamp`` or ``RCTimestamp``)."""

    @property
    def r(self) -> int: ...

    @property
    def c(self) -> int: ...

    def tiebreak(self) -> tuple[int, ...]: ...


class Verdict(enum.Enum):
    BUFFERED = "buffered"
    LATE = "late"
    DUPLICATE = "duplicate"


@dataclass(frozen=True, slots=True)
class Envelope:
    """A published message as a merger receives it."""

    proc: str
    msg: str
    stamp: Stamp


@dataclass(frozen=True, slots=True)
class Delivery:
    """One delivered message: ``time`` is its deadline, ``arrived`` when it came in."""

    envelope: Envelope
    time: int
    arrived: int

    @property
    def buffered_for(self) -> int:
        return self.time - self.arrived


@dataclass(frozen=True, slots=True)
class MergerStatistics:
    received: int
    delivered: int
    late: int
    duplicates: int
    #: messages in the buffer now, and the most ever
    buffered: int
    max_buffered: int
    #: buffering time (deadline - arrival) over delivered messages, in ticks
    total_buffering: int
    max_buffering: int


def level_parameters(epsilon: int, delta: int) -> tuple[int, int]:
    """``(ε, δ)`` of the system a merger's output forms: ``ds(ε, δ + 3ε)``, Theorem 4.3."""
    return epsilon, delta + 3 * epsilon


class Merger:
    """One causal deterministic merger of ``ds(epsilon, delta)`` (module docstring)."""

    def __init__(self, epsilon: int, delta: int, *, retain: int | None = None) -> None:
        if epsilon < 1:
            raise ProtocolUsageError(f"epsilon must be >= 1, got {epsilon}")
        if delta < 0:
            raise ProtocolUsageError(f"delta must be >= 0, got {delta}")
        if retain is not None and retain < 0:
            raise ProtocolUsageError(f"retain must be >= 0, got {retain}")
        self.epsilon = epsilon
        self.delta = delta
        self.retain = retain
        self._wait = delta + epsilon
        # heap of (deadline, tiebreak, proc, msg, arrived, envelope); the first four
        # are unique per buffered message, so the envelope is never compared.
        self._heap: list[tuple[int, tuple[int, ...], str, str, int, Envelope]] = []
        self._seen: set[tuple[str, str]] = set()
        self._forget: deque[tuple[int, tuple[str, str]]] = deque()
        self._received = 0
        self._delivered = 0
        self._late = 0
        self._duplicates = 0
        self._max_buffered = 0
        self._total_buffering = 0
        self._max_buffering = 0

    def deadline(self, stamp: Stamp) -> int:
        """``r + c + δ + ε``: the clock value at which the message is delivered."""
        return stamp.r + stamp.c + self._wait

    def receive(self, envelope: Envelope, *, now: int) -> Verdict:
        """Classify an arrival at clock ``now``; a ``BUFFERED`` one waits for its deadline."""
        self._received += 1
        due = self.deadline(envelope.stamp)
        if due < now:
            self._late += 1
            return Verdict.LATE
        key = (envelope.proc, envelope.msg)
        if key in self._seen:
            self._duplicates += 1
            return Verdict.DUPLICATE
        self._seen.add(key)
        heapq.heappush(
            self._heap,
            (due, envelope.stamp.tiebreak(), envelope.proc, envelope.msg, now, envelope),
        )
        if len(self._heap) > self._max_buffered:
            self._max_buffered = len(self._heap)
        return Verdict.BUFFERED

    def next_deadline(self) -> int | None:
        """The earliest deadline in the buffer (when to call ``handle_timer``), or None."""
        return self._heap[0][0] if self._heap else None

    def handle_timer(self, *, now: int) -> list[Delivery]:
        """Deliver, in order, every buffered message whose deadline is ``<= now``."""
        out: list[Delivery] = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            out.append(self._pop())
        if self.retain is not None:
            horizon = now - self.retain
            forget = self._forget
            while forget and forget[0][0] < horizon:
                self._seen.discard(forget.popleft()[1])
        return out

    def flush(self) -> list[Delivery]:
        """End of input: deliver everything still buffered, in order."""
        out: list[Delivery] = []
        while self._heap:
            out.append(self._pop())
        return out

    def _pop(self) -> Delivery:
        due, _, proc, msg, arrived, envelope = heapq.heappop(self._heap)
        waited = due - arrived
        self._delivered += 1
        self._total_buffering += waited
        if waited > self._max_buffering:
            self._max_buffering = waited
        if self.retain is not None:
            self._forget.append((due, (proc, msg)))
        return Delivery(envelope, due, arrived)

    def statistics(self) -> MergerStatistics:
        return MergerStatistics(
            received=self._received,
            delivered=self._delivered,
            late=self._late,
            duplicates=self._duplicates,
            buffered=len(self._heap),
            max_buffered=self._max_buffered,
            total_buffering=self._total_buffering,
            max_buffering=self._max_buffering,
        )
