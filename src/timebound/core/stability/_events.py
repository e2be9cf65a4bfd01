"""Message-stability data: acknowledgments (timestamp and vector) and statistics.

Berket, Koch, Moser, Melliar-Smith, "Timestamp Acknowledgments for Determining Message
Stability", Fig. 1 and section 4. A *timestamp* ack is one scalar: the smallest entry
of the receiver's local timestamp vector, acknowledging every message with a smaller or
equal timestamp from every sender of its sender group. The *vector* ack (the baseline
of section 4, refs. [5, 10]) carries the whole vector, one entry per sender. Both answer
the one question a sender asks of an ack -- "up to which of *my* timestamps has this
receiver got everything?" -- through ``for_sender``, so the sender code is shared.

Sizes for the bandwidth comparison of section 4: a timestamp is ``TIMESTAMP_BYTES``
(a 64-bit integer); a vector ack is positional (sender groups are known to both ends,
section 2), so it costs ``TIMESTAMP_BYTES`` per sender of the group.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

#: Bytes of one timestamp on the wire (a 64-bit integer).
TIMESTAMP_BYTES = 8


class AckMode(enum.Enum):
    TIMESTAMP = "timestamp"
    VECTOR = "vector"


class ClockMode(enum.Enum):
    """Where message timestamps come from (section 5)."""

    #: The caller supplies the reading of a (synchronized) physical clock.
    PHYSICAL = "physical"
    #: The node keeps a Lamport counter: +1 per send, max with every timestamp seen.
    LAMPORT = "lamport"


@dataclass(frozen=True, slots=True)
class TimestampAck:
    """A scalar acknowledgment: ``receiver`` has every message with ts <= ``value``
    from every member of its sender group."""

    receiver: str
    value: int

    def for_sender(self, sender: str) -> int | None:
        return self.value

    @property
    def nbytes(self) -> int:
        return TIMESTAMP_BYTES


@dataclass(frozen=True, slots=True)
class VectorAck:
    """A vector acknowledgment: the last timestamp received from each sender."""

    receiver: str
    entries: Mapping[str, int]

    def for_sender(self, sender: str) -> int | None:
        return self.entries.get(sender)

    @property
    def nbytes(self) -> int:
        return TIMESTAMP_BYTES * len(self.entries)


Ack = TimestampAck | VectorAck


@dataclass(frozen=True, slots=True)
class SenderStatistics:
    """One sender's counters. ``buffer_area`` integrates the send-buffer occupancy
    over time (message-ticks); ``latency_sum / stable`` is the mean stability latency
    (ticks from send to the ack that made the message stable)."""

    now: int
    sent: int
    stable: int
    buffered: int
    max_buffered: int
    buffer_area: int
    latency_sum: int
    max_latency: int
    acks_received: int
    acks_ignored: int


@dataclass(frozen=True, slots=True)
class ReceiverStatistics:
    """One receiver's counters: messages delivered or ignored (Fig. 1), acks sent and
    their bytes."""

    delivered: int
    ignored: int
    acks_sent: int
    ack_bytes: int
