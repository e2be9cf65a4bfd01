"""Slotted-FIFO communication (Baldoni, Beraldi, Prakash; Figs. 3 and 4).

One channel carries four kinds of send: ``FR`` (FIFO, reliable; the slot delimiters),
``R`` (reliable), ``F`` (FIFO within its slot, unreliable) and ``N`` (neither). The
sender stamps each message with ``(slot, type, order)``; the receiver is event-driven:
each arrival returns the deliveries and discards it causes.

>>> sender, receiver = SlottedSender(), SlottedReceiver[str]()
>>> stamps = {name: sender.send(kind) for name, kind in
...           [("a", Kind.R), ("b", Kind.FR), ("c", Kind.N)]}
>>> [type(act).__name__ for act in receiver.receive("b", stamps["b"], now=1)]
[]
>>> [act.message for act in receiver.receive("a", stamps["a"], now=2)]
['a', 'b']
"""

from timebound.core.slotted._events import (
    Action,
    Deliver,
    Discard,
    DiscardReason,
    Kind,
    SlottedStatistics,
    Stamp,
)
from timebound.core.slotted._receiver import SlottedReceiver
from timebound.core.slotted._sender import SlottedSender

__all__ = [
    "Action",
    "Deliver",
    "Discard",
    "DiscardReason",
    "Kind",
    "SlottedReceiver",
    "SlottedSender",
    "SlottedStatistics",
    "Stamp",
]
