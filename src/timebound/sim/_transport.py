"""A retransmitting reliable transport: positive acks, timeout, retransmission.

Simulator machinery, not protocol logic: SCMP (section 2.4) and the slotted paper
(section 6) both assume a transport that resends a datagram every ``timeout`` ticks
until it is acknowledged, at most ``max_retries`` times (the N of SCMP's
``RT(N)``; ``None``: forever). The payload keeps its identity and its sender
timestamp across copies -- a retransmission is the *same* message -- which is what
makes duplicate detection at the receiver meaningful.

``Reliable.send(packet)`` transmits ``packet`` on ``packet.fwd``; at every arrival of a
copy the transport calls ``packet.arrive(packet)``; if that returns True (the receiving
node is up and took the copy) an ack goes back on ``packet.back`` and its arrival stops
the retransmissions. Timers are cancelled lazily: a timeout that finds the packet
acknowledged does nothing. ``RT(N) = N * timeout``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from timebound.sim._engine import Engine
from timebound.sim._links import Link


class Packet:
    """One message and its retransmission state."""

    __slots__ = ("payload", "fwd", "back", "arrive", "sent_at", "attempts", "acked",
                 "arrivals", "acked_at")

    def __init__(self, payload: Any, fwd: Link, back: Link | None,
                 arrive: Callable[[Packet], bool]) -> None:
        self.payload = payload
        self.fwd = fwd
        self.back = back
        self.arrive = arrive
        self.sent_at = 0
        self.attempts = 0
        self.acked = False
        self.arrivals = 0
        self.acked_at: int | None = None


class Reliable:
    """Positive-ack retransmission over a pair of links (module docstring)."""

    def __init__(self, engine: Engine, timeout: int, max_retries: int | None) -> None:
        self.engine = engine
        self.timeout = timeout
        self.max_retries = max_retries
        self.transmissions = 0
        self.retransmissions = 0
        self.gave_up = 0

    def rt(self, n: int) -> int:
        """RT(N): time from the first transmission to the N-th retransmission."""
        return n * self.timeout

    def send(self, packet: Packet) -> None:
        packet.sent_at = self.engine.now
        self._transmit(packet)

    def _transmit(self, packet: Packet) -> None:
        packet.attempts += 1
        self.transmissions += 1
        packet.fwd.send(self._arrived, packet)
        self.engine.schedule(self.timeout, self._timeout, packet)

    def _timeout(self, packet: Packet) -> None:
        if packet.acked:
            return
        if self.max_retries is not None and packet.attempts > self.max_retries:
            self.gave_up += 1
            return
        self.retransmissions += 1
        self._transmit(packet)

    def _arrived(self, packet: Packet) -> None:
        packet.arrivals += 1
        if packet.arrive(packet) and packet.back is not None:
            packet.back.send(self._acked, packet)

    def _acked(self, packet: Packet) -> None:
        if not packet.acked:
            packet.acked = True
            packet.acked_at = self.engine.now


class NotingReliable(Reliable):
    """``Reliable`` whose acknowledgments carry a note from the receiving node.

    ``note(packet)`` is read when the ack is sent (at the arrival of the copy it
    acknowledges, the node up), and ``on_ack(packet, note, first)`` is called at each
    ack arrival, ``first`` true for the ack that stopped the retransmissions;
    ``on_give_up(packet)`` when the transport gives up on a packet. The traffic (every
    datagram, delay and loss) is ``Reliable``'s: only what is handed to the callbacks
    differs. The ``scmp`` restart experiment uses it to carry a server's incarnation
    number to the client, as an RPC reply or refusal would.
    """

    def __init__(self, engine: Engine, timeout: int, max_retries: int | None, *,
                 note: Callable[[Packet], Any],
                 on_ack: Callable[[Packet, Any, bool], None],
                 on_give_up: Callable[[Packet], None]) -> None:
        super().__init__(engine, timeout, max_retries)
        self.note = note
        self.on_ack = on_ack
        self.on_give_up = on_give_up

    def _timeout(self, packet: Packet) -> None:
        gave_up = self.gave_up
        super()._timeout(packet)
        if self.gave_up != gave_up:
            self.on_give_up(packet)

    def _arrived(self, packet: Packet) -> None:
        packet.arrivals += 1
        if packet.arrive(packet) and packet.back is not None:
            packet.back.send(self._noted, (packet, self.note(packet)))

    def _noted(self, item: tuple[Packet, Any]) -> None:
        packet, note = item
        first = not packet.acked
        self._acked(packet)
        self.on_ack(packet, note, first)


class Geometric:
    """The slotted paper's transport model (section 6): ``T_tra = alpha T_to + T_ntw``.

    A reliable message is resent only when a copy is *lost*: each copy is lost with
    probability ``loss`` (``1 - P_succ``), and the first copy that is not lost arrives
    after one network delay, so ``P(alpha = k) = P_succ (1 - P_succ)^k``. There is no
    race between copies (a late copy is never overtaken by a retransmission), which is
    what keeps the delay tail that drives reordering. ``send(payload, arrive)`` calls
    ``arrive(payload)`` once, at ``alpha * timeout + delay``.
    """

    def __init__(self, engine: Engine, timeout: int, delay: Any, loss: float,
                 rng: Any) -> None:
        self.engine = engine
        self.timeout = timeout
        self.delay = delay
        self.loss = loss
        self.rng = rng
        self.transmissions = 0
        self.retransmissions = 0

    def send(self, payload: Any, arrive: Callable[[Any], None]) -> None:
        alpha = 0
        while self.rng.random() < self.loss:
            alpha += 1
        self.transmissions += alpha + 1
        self.retransmissions += alpha
        when = alpha * self.timeout + max(0, self.delay.sample(self.rng))
        self.engine.schedule(when, arrive, payload)
