"""Slotted-FIFO data: send kinds, the ST control stamp, receiver actions, statistics.

Baldoni, Beraldi, Prakash, "Flexible General Purpose Communication Primitives for
Distributed Systems", section 5.1. Every message carries ``ST = (slot, type, order)``:

- ``FR`` (FIFO, reliable) closes slot ``ST.slot`` and opens the next one; its ``order``
  is the number of ``R`` messages sent in the slot it closes (Fig. 3, S2).
- ``R`` (non-FIFO, reliable) and ``N`` (non-FIFO, unreliable) carry no order (Fig. 3
  leaves the field "unassigned"; we store ``None``).
- ``F`` (FIFO, unreliable) carries its 1-based rank among the ``F`` of its slot
  (Fig. 3, S6-S7).

Everything here is a frozen, slotted dataclass that validates itself, after h11.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Generic, TypeVar

from timebound.errors import ProtocolUsageError

#: Type of the caller's message handle (an id, a payload, ...). The core never looks
#: inside it; it only hands it back in the actions.
M = TypeVar("M")


class Kind(enum.Enum):
    """The four send primitives of the paper, by their reliability/ordering letters."""

    FR = "FR"  # FIFO and reliable: the slot delimiter
    R = "R"  # non-FIFO, reliable (the paper's F-bar R)
    F = "F"  # FIFO, unreliable (the paper's F R-bar)
    N = "N"  # neither (the paper's F-bar R-bar)

    @property
    def reliable(self) -> bool:
        return self is Kind.FR or self is Kind.R


class DiscardReason(enum.Enum):
    """Why the receiver dropped an unreliable message (or a transport duplicate)."""

    #: Its slot was already closed (its FR delivered) when it arrived: Fig. 4 R11/R15.
    SLOT_CLOSED = "slot_closed"
    #: An ``F`` of the same slot with a higher order was already delivered, so
    #: delivering this one would break FIFO order within the slot (rule iv).
    OVERTAKEN = "overtaken"
    #: A reliable message that cannot legitimately arrive again (an FR or R of a closed
    #: slot, a second FR for one slot). The transport is meant to remove duplicates
    #: (paper section 6, "message numeration at TL"); these are the ones that are cheap
    #: to recognise here.
    DUPLICATE = "duplicate"


@dataclass(frozen=True, slots=True)
class Stamp:
    """The paper's ST control information: ``(slot, type, order)``."""

    slot: int
    kind: Kind
    order: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.slot, int) or self.slot < 0:
            raise ProtocolUsageError(f"slot must be an integer >= 0, got {self.slot!r}")
        if self.kind is Kind.FR:
            if not isinstance(self.order, int) or self.order < 0:
                raise ProtocolUsageError(f"an FR stamp needs order >= 0, got {self.order!r}")
        elif self.kind is Kind.F:
            if not isinstance(self.order, int) or self.order < 1:
                raise ProtocolUsageError(f"an F stamp needs order >= 1, got {self.order!r}")
        elif self.order is not None:
            raise ProtocolUsageError(f"a {self.kind.value} stamp carries no order")


@dataclass(frozen=True, slots=True)
class Deliver(Generic[M]):
    """The receiver hands ``message`` to the application.

    ``delay`` is the paper's delivery delay T_d: ticks from the arrival (the
    transport-receive event) to this delivery.
    """

    message: M
    stamp: Stamp
    arrived: int
    delivered: int

    @property
    def delay(self) -> int:
        return self.delivered - self.arrived


@dataclass(frozen=True, slots=True)
class Discard(Generic[M]):
    """The receiver drops ``message`` for ``reason``; it is never delivered."""

    message: M
    stamp: Stamp
    reason: DiscardReason
    at: int


Action = Deliver[M] | Discard[M]


@dataclass(frozen=True, slots=True)
class SlottedStatistics:
    """A snapshot of one receiver's counters (trio-style ``statistics()`` record).

    ``buffer_area`` is the integral of the buffer occupancy over time (message-ticks),
    so ``buffer_area / now`` is the paper's average queue length (Fig. 7).
    ``delay_sum[kind] / delivered[kind]`` is its average delivery delay (Figs. 5, 6).
    """

    now: int
    slot: int
    arrived: dict[str, int]
    delivered: dict[str, int]
    discarded: dict[str, int]
    buffered: int
    max_buffered: int
    buffer_area: int
    delay_sum: dict[str, int]
    max_delay: dict[str, int]
