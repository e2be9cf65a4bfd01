"""Slotted-FIFO channels over datagrams, sans-IO (slotted paper sections 4-6; SCMP
section 3 for the opening).

- ``ChannelSender``: one channel's sending end: Fig. 3 stamps, sequence numbers,
  retransmission of FR and R with acknowledgments, a send window (back-pressure);
- ``ChannelReceiver``: every channel towards one endpoint: the opening through an SCMP
  ``Receiver``, duplicate suppression, acknowledgments, Fig. 4 delivery;
- the frame bodies (kind ``KIND_CHANNEL``): ``docs/wire.md``.
"""

from timebound.core.channel._receiver import (
    DEFAULT_IDLE,
    DEFAULT_MAX_HELD_BYTES,
    DEFAULT_MAX_SESSIONS,
    ChannelReceiver,
    ChannelReceiverOutput,
    ChannelReceiverStatistics,
    Delivery,
)
from timebound.core.channel._sender import (
    DEFAULT_GIVE_UP,
    DEFAULT_MAX_RTO,
    DEFAULT_MIN_RTO,
    DEFAULT_WINDOW,
    MAX_WINDOW,
    ChannelSender,
    SenderStatistics,
)
from timebound.core.channel._wire import (
    MAX_CONN_BYTES,
    MAX_SACK,
    UNKNOWN_SESSION,
    Ack,
    Refuse,
    Segment,
    decode,
    encode_ack,
    encode_refuse,
    encode_segment,
)

__all__ = [
    "UNKNOWN_SESSION",
    "DEFAULT_GIVE_UP",
    "DEFAULT_IDLE",
    "DEFAULT_MAX_HELD_BYTES",
    "DEFAULT_MAX_RTO",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_MIN_RTO",
    "DEFAULT_WINDOW",
    "MAX_CONN_BYTES",
    "MAX_SACK",
    "MAX_WINDOW",
    "Ack",
    "ChannelReceiver",
    "ChannelReceiverOutput",
    "ChannelReceiverStatistics",
    "ChannelSender",
    "Delivery",
    "Refuse",
    "Segment",
    "SenderStatistics",
    "decode",
    "encode_ack",
    "encode_refuse",
    "encode_segment",
]
