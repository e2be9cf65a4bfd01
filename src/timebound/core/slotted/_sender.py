"""Slotted-FIFO sender: Fig. 3 of Baldoni, Beraldi, Prakash (the XY-SEND primitive).

The sender keeps three counters and stamps every message with ``ST = (slot, type,
order)``; the stamp is all the receiver needs. Transmission (and, for reliable kinds,
retransmission) belongs to the transport layer below, i.e. to the driver.

- ``FR``: ``order = S_R`` (the R messages of the slot it closes), then ``S_R = 0``,
  ``slot += 1``, ``S_F = 0`` (S2-S4).
- ``R``: ``S_R += 1`` (S5).
- ``F``: ``S_F += 1``, ``order = S_F`` (S6-S7).
- ``N``: nothing (S8).

The paper assumes the first and last messages are FR; we do not. Messages sent before
the first FR belong to slot 0, which the receiver holds open from the start, so slot 0
simply has no opening FR (``tests/test_slotted_core.py::test_messages_before_first_fr``).
"""

from __future__ import annotations

from timebound.core.slotted._events import Kind, Stamp


class SlottedSender:
    """Stamps the messages of one channel ``c(p, q)`` in send order."""

    __slots__ = ("_slot", "_sent_r", "_sent_f")

    def __init__(self) -> None:
        self._slot = 0
        self._sent_r = 0  # S_{F-bar R}: R messages sent in the current slot
        self._sent_f = 0  # S_{F R-bar}: F messages sent in the current slot

    @property
    def slot(self) -> int:
        """The slot the next non-FR message will belong to."""
        return self._slot

    def send(self, kind: Kind) -> Stamp:
        """Stamp the next message of ``kind`` (Fig. 3); the caller transmits it."""
        slot = self._slot
        if kind is Kind.FR:
            order = self._sent_r
            self._sent_r = 0
            self._slot += 1
            self._sent_f = 0
            return Stamp(slot, kind, order)
        if kind is Kind.R:
            self._sent_r += 1
            return Stamp(slot, kind)
        if kind is Kind.F:
            self._sent_f += 1
            return Stamp(slot, kind, self._sent_f)
        return Stamp(slot, Kind.N)
