"""A stability node: sender and/or receiver of Fig. 1, with its clock (section 5).

Berket et al., "Timestamp Acknowledgments for Determining Message Stability".

Typically every node is both a sender and a receiver (section 2). A node that is both
receives its own messages as it sends them and its own acknowledgments as it sends
them -- so its own entry of its timestamp vector and of its acknowledgment vector keep
up without a network round trip. That is what the replay contract prescribes, and what
Theorem 2 needs: with timestamp acks, ``stable_bound()`` is a bound up to which every
message of *every* sender is stable (all nodes have received it), because each scalar
ack covers all senders.

Clocks (section 5) are a parameter:
- ``ClockMode.PHYSICAL``: the caller supplies the timestamp of each send (by default
  ``now``, its synchronized clock reading); the node reads no clock.
- ``ClockMode.LAMPORT``: the node keeps a Lamport counter: each send stamps
  ``counter + 1``; every message and (timestamp) ack it receives raises the counter to
  at least its timestamp. Passing ``ts`` to ``send`` is then a usage error.
``now`` is still taken on every call, for the statistics (buffer integral, latency).

Verbs (aioquic's, ``now`` keyword-only): ``send(*, now, ts=None)``, ``receive(sender,
ts, *, now)``, ``make_ack(*, now)``, ``receive_ack(ack, *, now)``, ``statistics()``.
Fig. 1 has no timer (the acknowledgment period is the driver's choice), so
``next_deadline()`` is always None and ``handle_timer(*, now)`` only moves time; both
exist so that every core answers to the same verbs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from timebound.core.stability._events import (
    Ack,
    AckMode,
    ClockMode,
    ReceiverStatistics,
    SenderStatistics,
    TimestampAck,
)
from timebound.core.stability._receiver import StabilityReceiver
from timebound.core.stability._sender import StabilitySender
from timebound.errors import ProtocolUsageError


@dataclass(frozen=True, slots=True)
class Sent:
    """What ``StabilityNode.send`` did: the message's timestamp, whether the node
    delivered it to itself, and messages made stable (only with an empty R_s)."""

    ts: int
    self_delivered: bool
    stable: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Acked:
    """What ``StabilityNode.make_ack`` did: the ack, and the node's own messages it
    made stable when the node is also a sender (it receives its own ack)."""

    ack: Ack
    stable: list[int] | None


@dataclass(frozen=True, slots=True)
class NodeStatistics:
    """A snapshot of a node: its sender part's and receiver part's counters (None
    for a role the node does not have)."""

    sender: SenderStatistics | None
    receiver: ReceiverStatistics | None


class StabilityNode:
    """One node: an optional sender part, an optional receiver part, a clock."""

    def __init__(
        self,
        name: str,
        *,
        senders: Iterable[str] | None = None,
        receivers: Iterable[str] | None = None,
        acks: AckMode = AckMode.TIMESTAMP,
        clock: ClockMode = ClockMode.PHYSICAL,
        now: int = 0,
    ) -> None:
        """``receivers`` makes the node a sender with that receiver group; ``senders``
        makes it a receiver with that sender group (None: not that role; an empty
        group: that role, with members to join by section 6)."""
        self.name = name
        self.clock_mode = clock
        self.sender = None if receivers is None else StabilitySender(name, receivers, now)
        self.receiver = None if senders is None else StabilityReceiver(name, senders, acks)
        self._lamport = 0
        self._now = now

    @property
    def clock(self) -> int:
        """The Lamport counter (Lamport mode), else the last ``now``."""
        return self._lamport if self.clock_mode is ClockMode.LAMPORT else self._now

    def send(self, *, now: int, ts: int | None = None) -> Sent:
        sender = self._need_sender()
        self._at(now)
        if self.clock_mode is ClockMode.LAMPORT:
            if ts is not None:
                raise ProtocolUsageError("a Lamport node stamps its own messages")
            self._lamport += 1
            ts = self._lamport
        elif ts is None:
            ts = now
        stable = sender.send(ts, now=now)
        mine = self.receiver is not None and self.name in self.receiver.senders
        delivered = mine and self.receiver is not None and self.receiver.receive(self.name, ts)
        return Sent(ts, delivered, stable)

    def receive(self, sender: str, ts: int, *, now: int) -> bool:
        """A message from ``sender``: True if delivered, False if Fig. 1 ignores it."""
        receiver = self._need_receiver()
        self._at(now)
        self._observe(ts)
        return receiver.receive(sender, ts)

    def make_ack(self, *, now: int) -> Acked:
        receiver = self._need_receiver()
        self._at(now)
        ack = receiver.make_ack(self.clock)
        stable = None
        if self.sender is not None:
            stable = self.sender.receive_ack(ack, now=now)
        return Acked(ack, stable)

    def receive_ack(self, ack: Ack, *, now: int) -> list[int]:
        """An ack arrives at this node's sender part; returns its messages made stable."""
        sender = self._need_sender()
        self._at(now)
        if isinstance(ack, TimestampAck):
            self._observe(ack.value)
        return sender.receive_ack(ack, now=now)

    def next_deadline(self) -> int | None:
        """Always None: Fig. 1 has no timer."""
        return None

    def handle_timer(self, *, now: int) -> list[int]:
        """Nothing is due (no timer); checks that time does not go backwards and
        returns the messages made stable by it: none."""
        self._at(now)
        return []

    def statistics(self) -> NodeStatistics:
        sender = None if self.sender is None else self.sender.statistics()
        receiver = None if self.receiver is None else self.receiver.statistics()
        return NodeStatistics(sender, receiver)

    def stable_bound(self) -> int | None:
        """Theorem 2 (timestamp acks, every node sender and receiver): every message of
        any sender with a timestamp <= this bound has been received by every member of
        this node's receiver group."""
        return self._need_sender().min_ack()

    # -- internals -------------------------------------------------------------------

    def _at(self, now: int) -> None:
        if now < self._now:
            raise ProtocolUsageError(f"time went backwards at {self.name}: {now} < {self._now}")
        self._now = now

    def _observe(self, ts: int) -> None:
        if self.clock_mode is ClockMode.LAMPORT and ts > self._lamport:
            self._lamport = ts

    def _need_sender(self) -> StabilitySender:
        if self.sender is None:
            raise ProtocolUsageError(f"{self.name} is not a sender")
        return self.sender

    def _need_receiver(self) -> StabilityReceiver:
        if self.receiver is None:
            raise ProtocolUsageError(f"{self.name} is not a receiver")
        return self.receiver
