"""Stable multicast groups over datagrams, sans-IO (stability paper, Fig. 1 and §6).

``GroupMember``: reliable FIFO delivery per sender (sequence numbers, NACKs,
retransmission from the send buffer), periodic timestamp (or vector) acks with
heartbeats, release of stable messages from the send buffer, section 6 join and
leave. Frame bodies (kind ``KIND_GROUP``): ``docs/wire.md``.
"""

from timebound.core.group._member import (
    DEFAULT_ACK_EVERY,
    DEFAULT_MAX_BUFFER,
    DEFAULT_MAX_SKEW,
    DEFAULT_NACK_EVERY,
    LAMPORT_SLACK,
    MAX_AHEAD,
    SEQ_LIMIT,
    Delivered,
    Event,
    GroupMember,
    GroupOutput,
    GroupStatistics,
    Joined,
    Left,
    Stable,
)
from timebound.core.group._wire import MAX_NACK, MAX_NAME_BYTES, check_name, decode, encode_ack

__all__ = [
    "DEFAULT_ACK_EVERY",
    "DEFAULT_MAX_BUFFER",
    "DEFAULT_MAX_SKEW",
    "DEFAULT_NACK_EVERY",
    "LAMPORT_SLACK",
    "MAX_AHEAD",
    "MAX_NACK",
    "MAX_NAME_BYTES",
    "SEQ_LIMIT",
    "Delivered",
    "Event",
    "GroupMember",
    "GroupOutput",
    "GroupStatistics",
    "Joined",
    "Left",
    "Stable",
    "check_name",
    "decode",
    "encode_ack",
]
