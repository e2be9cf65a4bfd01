"""Stability sender: the sending half of Fig. 1, with section 6's join and leave rules.

Berket et al., "Timestamp Acknowledgments for Determining Message Stability".

The sender keeps its *send buffer* (messages not yet known stable, in timestamp order,
since its timestamps increase) and a *local acknowledgment vector*: for each receiver of
its receiver group R_s, the largest acknowledgment received from it (0 at start-up).
An ack from r raises r's entry if larger (acks travel on unreliable non-FIFO channels,
so a smaller one is stale and ignored); every buffered message with a timestamp at most
the minimum entry is then stable and leaves the buffer (Fig. 1). ``for_sender`` reads a
timestamp ack or the sender's own entry of a vector ack, so both schemes share this.

The minimum is cached and recomputed only when the entry that held it rises, so an ack
costs O(1) unless it came from (one of) the slowest receivers -- then O(|R_s|).

Membership (section 6): ``add_receiver(r)`` is step 3 (message channel open); the first
ack from r records its timestamp, and r enters R_s (step 4) when this sender next sends
a message with a larger timestamp, its entry starting at that ack. Messages buffered
before then were not addressed to r and are never held up by it. ``remove_receiver(r)``
drops r at once and may make messages stable. An ack from a node that is neither a
member nor joining is ignored and counted (``acks_ignored``). If R_s is empty a message
is stable as soon as it is sent (no receiver is owed it).

Verbs: ``send(ts, *, now)``, ``receive_ack(ack, *, now)``, ``remove_receiver(r, *,
now)`` (``now`` keyword-only, for the buffer integral and latencies), ``statistics()``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from timebound.core.stability._events import Ack, SenderStatistics
from timebound.errors import ProtocolUsageError


class StabilitySender:
    """Sender s: send buffer and acknowledgment vector over R_s."""

    def __init__(self, name: str, receivers: Iterable[str] = (), now: int = 0) -> None:
        self.name = name
        self._acks: dict[str, int] = dict.fromkeys(receivers, 0)
        self._joining: dict[str, int | None] = {}
        self._min: int | None = 0 if self._acks else None
        self._buffer: deque[tuple[int, int]] = deque()  # (ts, sent at), ts increasing
        self._last_ts: int | None = None
        self._now = now
        self._sent = 0
        self._stable = 0
        self._max_buffered = 0
        self._area = 0
        self._latency_sum = 0
        self._max_latency = 0
        self._acks_received = 0
        self._acks_ignored = 0

    @property
    def receivers(self) -> frozenset[str]:
        """The receiver group R_s (members only)."""
        return frozenset(self._acks)

    @property
    def joining(self) -> frozenset[str]:
        """Receivers whose message channel is open but that are not in R_s yet."""
        return frozenset(self._joining)

    @property
    def last_ts(self) -> int | None:
        return self._last_ts

    def min_ack(self) -> int | None:
        """The smallest entry of the acknowledgment vector (None when R_s is empty)."""
        return self._min

    def buffered(self) -> list[int]:
        """Timestamps of the messages in the send buffer, oldest first."""
        return [ts for ts, _ in self._buffer]

    def send(self, ts: int, *, now: int) -> list[int]:
        """Place a message stamped ``ts`` in the send buffer; returns messages made
        stable by it (only when R_s is empty)."""
        self._advance(now)
        if self._last_ts is not None and ts <= self._last_ts:
            raise ProtocolUsageError(f"timestamps must increase: {ts} after {self._last_ts}")
        self._last_ts = ts
        for receiver, ack in list(self._joining.items()):
            if ack is not None and ts > ack:
                del self._joining[receiver]
                self._acks[receiver] = ack
                self._min = ack if self._min is None else min(self._min, ack)
        self._buffer.append((ts, now))
        self._sent += 1
        if len(self._buffer) > self._max_buffered:
            self._max_buffered = len(self._buffer)
        return self._release() if self._min is None else []

    def receive_ack(self, ack: Ack, *, now: int) -> list[int]:
        """An acknowledgment arrives; returns the timestamps it made stable, sorted."""
        self._advance(now)
        self._acks_received += 1
        value = ack.for_sender(self.name)
        receiver = ack.receiver
        current = self._acks.get(receiver)
        if value is None or (current is None and receiver not in self._joining):
            self._acks_ignored += 1
            return []
        if current is None:
            seen = self._joining[receiver]
            self._joining[receiver] = value if seen is None else max(seen, value)
            return []
        if value <= current:
            return []
        self._acks[receiver] = value
        if current == self._min:
            self._min = min(self._acks.values())
        return self._release()

    # -- section 6 membership --------------------------------------------------------

    def add_receiver(self, receiver: str) -> None:
        """Step 3 done (message channel to ``receiver`` open); joins per step 4."""
        if receiver not in self._acks:
            self._joining.setdefault(receiver, None)

    def remove_receiver(self, receiver: str, *, now: int) -> list[int]:
        """Disconnection: ``receiver`` leaves R_s; returns messages now stable."""
        self._advance(now)
        self._joining.pop(receiver, None)
        if self._acks.pop(receiver, None) is None:
            return []
        self._min = min(self._acks.values()) if self._acks else None
        return self._release()

    def statistics(self) -> SenderStatistics:
        return SenderStatistics(
            now=self._now, sent=self._sent, stable=self._stable,
            buffered=len(self._buffer), max_buffered=self._max_buffered,
            buffer_area=self._area, latency_sum=self._latency_sum,
            max_latency=self._max_latency, acks_received=self._acks_received,
            acks_ignored=self._acks_ignored,
        )

    # -- internals -------------------------------------------------------------------

    def _advance(self, now: int) -> None:
        if now < self._now:
            raise ProtocolUsageError(f"time went backwards: {now} < {self._now}")
        self._area += len(self._buffer) * (now - self._now)
        self._now = now

    def _release(self) -> list[int]:
        bound = self._min
        buffer = self._buffer
        stable: list[int] = []
        while buffer and (bound is None or buffer[0][0] <= bound):
            ts, sent = buffer.popleft()
            latency = self._now - sent
            self._latency_sum += latency
            if latency > self._max_latency:
                self._max_latency = latency
            stable.append(ts)
        self._stable += len(stable)
        return stable
