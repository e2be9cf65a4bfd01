"""Stability receiver: the receiving half of Fig. 1, with section 6's join rule.

Berket et al., "Timestamp Acknowledgments for Determining Message Stability".

The receiver keeps a *local timestamp vector*: for each sender of its sender group S_r,
the timestamp of the last message delivered from it (0 at start-up). A message whose
timestamp is not above its sender's entry is ignored (Fig. 1: it was covered when the
sender joined, section 6); any other message is delivered and its timestamp recorded.
An acknowledgment is the minimum of the vector (timestamp mode) or a copy of it
(vector mode, the section 4 baseline) -- same interface, ``make_ack``.

Membership (section 6, connection steps 1-2): ``add_sender(s)`` records that the ack
channel to ``s`` is established; ``s`` enters S_r when r sends its next ack, and that
ack's timestamp becomes ``s``'s entry, so r claims nothing from ``s`` it has not got:
everything ``s`` sends later with a larger timestamp will be delivered and required.
``remove_sender(s)`` is the abrupt disconnection of the same section. A message from a
node that is not (yet) in S_r is ignored. Groups given to the constructor are members
from start-up with entry 0 (static membership, as the replay contract requires).

Choices where the paper is silent:
- With an empty sender group there is no minimum; the ack is then the caller's clock
  reading ``clock`` (any value is safe, because the sender's join rule 4 only counts r
  for later messages with larger timestamps). In vector mode a joining sender's entry is
  that clock reading too, since there is no scalar to copy.
  (``tests/test_stability_theorems.py::test_fig4_prevented_by_section_6_rules``)
"""

from __future__ import annotations

from collections.abc import Iterable

from timebound.core.stability._events import (
    Ack,
    AckMode,
    ReceiverStatistics,
    TimestampAck,
    VectorAck,
)


class StabilityReceiver:
    """Receiver r: local timestamp vector over S_r, acks by ``make_ack``."""

    def __init__(self, name: str, senders: Iterable[str] = (),
                 acks: AckMode = AckMode.TIMESTAMP) -> None:
        self.name = name
        self.mode = acks
        self._vector: dict[str, int] = dict.fromkeys(senders, 0)
        self._joining: list[str] = []
        self._delivered = 0
        self._ignored = 0
        self._acks_sent = 0
        self._ack_bytes = 0

    @property
    def senders(self) -> frozenset[str]:
        """The sender group S_r (members only, not those still joining)."""
        return frozenset(self._vector)

    def last(self, sender: str) -> int | None:
        """The timestamp vector entry for ``sender`` (None if not a member)."""
        return self._vector.get(sender)

    def receive(self, sender: str, ts: int) -> bool:
        """A message from ``sender`` stamped ``ts``: True if delivered (Fig. 1)."""
        last = self._vector.get(sender)
        if last is None or ts <= last:
            self._ignored += 1
            return False
        self._vector[sender] = ts
        self._delivered += 1
        return True

    def make_ack(self, clock: int) -> Ack:
        """The acknowledgment to send now; ``clock`` is the node's clock reading."""
        ack: Ack
        if self.mode is AckMode.TIMESTAMP:
            value = min(self._vector.values()) if self._vector else clock
            for sender in self._joining:
                self._vector[sender] = value
            ack = TimestampAck(self.name, value)
        else:
            for sender in self._joining:
                self._vector[sender] = clock
            ack = VectorAck(self.name, dict(self._vector))
        self._joining.clear()
        self._acks_sent += 1
        self._ack_bytes += ack.nbytes
        return ack

    # -- section 6 membership --------------------------------------------------------

    def add_sender(self, sender: str) -> None:
        """Step 1 done (ack channel to ``sender`` open); it joins S_r at the next ack."""
        if sender not in self._vector and sender not in self._joining:
            self._joining.append(sender)

    def remove_sender(self, sender: str) -> None:
        """Disconnection: ``sender`` leaves S_r at once."""
        self._vector.pop(sender, None)
        if sender in self._joining:
            self._joining.remove(sender)

    def statistics(self) -> ReceiverStatistics:
        return ReceiverStatistics(self._delivered, self._ignored, self._acks_sent,
                                  self._ack_bytes)
