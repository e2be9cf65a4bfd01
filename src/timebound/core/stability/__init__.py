"""Message stability by timestamp acknowledgments (Berket, Koch, Moser,
Melliar-Smith; Fig. 1, sections 3-6), with the vector-ack baseline behind the same
interface, pairwise membership (section 6), and physical or Lamport clocks.

>>> s1 = StabilityNode("s1", receivers=["r1"])
>>> r1 = StabilityNode("r1", senders=["s1"])
>>> sent = s1.send(now=10)
>>> r1.receive("s1", sent.ts, now=12)
True
>>> s1.receive_ack(r1.make_ack(now=13).ack, now=17)
[10]
"""

from timebound.core.stability._events import (
    TIMESTAMP_BYTES,
    Ack,
    AckMode,
    ClockMode,
    ReceiverStatistics,
    SenderStatistics,
    TimestampAck,
    VectorAck,
)
from timebound.core.stability._node import Acked, NodeStatistics, Sent, StabilityNode
from timebound.core.stability._receiver import StabilityReceiver
from timebound.core.stability._sender import StabilitySender

__all__ = [
    "TIMESTAMP_BYTES",
    "Ack",
    "AckMode",
    "Acked",
    "ClockMode",
    "NodeStatistics",
    "ReceiverStatistics",
    "SenderStatistics",
    "Sent",
    "StabilityNode",
    "StabilityReceiver",
    "StabilitySender",
    "TimestampAck",
    "VectorAck",
]
