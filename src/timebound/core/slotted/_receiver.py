"""Slotted-FIFO receiver: Fig. 4 of Baldoni, Beraldi, Prakash, made event-driven.

Theory of operation
-------------------
Fig. 4 is a RECEIVE handler with WAIT statements; section 5.2 ("Deadlock avoidance")
asks that a waiting handler be *suspended*, not spin, and that suspended handlers be
re-activated, when their conditions become true, in an order consistent with the
partial order of section 5.1 (slot precedence, F order within a slot, everything of a
slot before the FR that closes it). Here that is literal: ``receive(message, stamp,
now=)`` handles one transport-receive event and returns, in order, every ``Deliver``
and ``Discard`` it causes -- its own and those of messages it un-suspends. Nothing
waits, nothing spins: a suspended handler is a buffered record, and the cascade after
each arrival is a loop over the buffers.

State (the paper's names): ``slot`` (FRs delivered so far; slot ``slot`` is open),
``R_R`` (R messages delivered in the open slot), ``R_F`` (order of the last F
delivered in the open slot). Buffers: the F messages of the open slot waiting for a
gap to fill, the FR closing the open slot while it waits for that slot's R messages,
and, per future slot, everything that arrived before its slot opened.

Rules, per arrival of a message of slot ``s``:

- ``s > slot``: it arrived before its slot opened; buffer it (any kind). This is the
  paper's ``wait(ST.slot == slot)`` (R2, R8, R13, R17) for every kind.
- ``s < slot``: its slot is closed. An F or N is discarded (R11-R12, R15-R16,
  ``slot_closed``); an FR or R can only be a transport duplicate (its slot could not
  have closed without it) and is discarded as ``duplicate``.
- ``s == slot``: ``R`` and ``N`` are delivered at once (R8-R10, R13-R14). An ``F``
  with ``order == R_F + 1`` is delivered, then every buffered F that now follows in
  sequence; with ``order <= R_F`` it is discarded (``overtaken``: a later F of the
  slot was already delivered, so delivering it would break rule iv); otherwise it
  waits for the gap. An ``FR`` waits until ``R_R`` reaches its ``order`` (R2).
- Whenever the open slot's FR is present and ``R_R == order``, the slot closes: every
  buffered F of the slot is delivered in order (gaps are given up: "all pending F
  messages must be immediately delivered in the correct order before the received FR
  message be delivered"), then the FR; ``slot`` advances, the counters reset, and the
  messages that arrived early for the new slot are activated as if they had just
  arrived -- R and N first, in arrival order, then F in order -- followed by the new
  slot's FR if it is already here, and so on down the cascade.

A reliable message therefore never waits on an unreliable one: an R waits only for its
slot to open, and an FR only for its slot's R messages and the FRs before it. (Pinned
by ``tests/test_slotted_properties.py::test_reliable_never_waits_on_unreliable``, which
checks that reliable deliveries are unchanged when every unreliable message is removed.)

Where we improve on Fig. 4
--------------------------
Fig. 4 has one ``end_slot`` flag, set by *any* FR arrival. It drops and holds messages
needlessly in two ways, and we replace it by a per-slot FR buffer:

1. An FR of a *later* slot arriving early sets ``end_slot`` although the open slot is
   not ending: Fig. 4 would then discard every F of the open slot that arrives (R16)
   and stop waiting for F gaps (R17) -- for as long as the open slot lasts. Here an
   early FR is buffered with its own slot and has no effect on the open one
   (``test_early_fr_of_later_slot_does_not_end_open_slot``).
2. When the open slot's FR has arrived but still waits for some R, Fig. 4 discards
   every F that arrives meanwhile (R15-R16), even one that could still be delivered in
   order, and has already flushed the waiting F past their gaps, so a late F that fills
   a gap is lost too. Here the slot ends only when the FR is *deliverable*: until then
   an arriving F is delivered if it is next in order, buffered if it is ahead, and
   discarded only if a later F of its slot was already delivered
   (``test_f_after_fr_arrival_still_delivered``). The price is that F waiting behind a
   gap wait until the FR is deliverable rather than until it arrives; the FR itself is
   never delayed by this.

With this rule an F waits behind a gap until its slot ends, and a late F is always
``slot_closed``: nothing is ever ``overtaken`` (except a transport duplicate). The
optional ``f_hold`` (ticks) bounds that wait instead, trading discards for the F delay
that dominates Fig. 6 for long slots: an F that has waited ``f_hold`` ticks is
delivered past its gaps (with every waiting F before it), and the F it skipped are
discarded as ``overtaken`` if they arrive later in the slot. ``next_deadline()`` /
``handle_timer(now=)`` expose that timer, aioquic style, and ``receive`` also fires it
first (``test_f_hold_delivers_past_gap_and_overtakes``). Replay uses the default
(``None``: wait for the slot's end).

Other choices where the figure is silent:

- An FR closes its slot when ``R_R >= order`` (not only ``==``): with a transport that
  duplicates an R, ``==`` would block the channel forever; ``>=`` keeps liveness and
  is identical when there are no duplicates.
- R and N of one slot are concurrent in the partial order; early ones are delivered in
  arrival order when their slot opens.
- Time: every call takes ``now`` (an integer tick, never decreasing, else
  ``ProtocolUsageError``); the receiver reads no clock. It is used only for the
  measurements the paper plots: delivery delay per message (Figs. 5, 6) and the time
  integral of the buffer occupancy (Fig. 7).

Verbs (aioquic's): ``receive(message, stamp, *, now)``, ``handle_timer(*, now)``,
``next_deadline()``, ``statistics()``. ``advance(now)`` is a time-only verb:
it moves time for the occupancy integral without firing the ``f_hold`` timer
(with ``f_hold=None`` it equals ``handle_timer(now=now)``).
"""

from __future__ import annotations

from typing import Generic

from timebound.core.slotted._events import (
    Action,
    Deliver,
    Discard,
    DiscardReason,
    Kind,
    M,
    SlottedStatistics,
    Stamp,
)
from timebound.errors import ProtocolUsageError


class _Held(Generic[M]):
    """A suspended RECEIVE handler: the message, its stamp and when it arrived."""

    __slots__ = ("message", "stamp", "arrived")

    def __init__(self, message: M, stamp: Stamp, arrived: int) -> None:
        self.message = message
        self.stamp = stamp
        self.arrived = arrived


class SlottedReceiver(Generic[M]):
    """The receiving end of one slotted-FIFO channel (event-driven Fig. 4)."""

    def __init__(self, now: int = 0, *, f_hold: int | None = None) -> None:
        if f_hold is not None and f_hold < 0:
            raise ProtocolUsageError(f"f_hold must be >= 0 or None, got {f_hold}")
        self._f_hold = f_hold
        self._now = now
        self._slot = 0
        self._r_delivered = 0  # R_{F-bar R}
        self._f_last = 0  # R_{F R-bar}
        self._f_waiting: dict[int, _Held[M]] = {}  # open slot's F behind a gap
        self._fr_waiting: _Held[M] | None = None  # open slot's FR waiting for its R
        self._early: dict[int, list[_Held[M]]] = {}  # future slot -> non-FR arrivals
        self._early_fr: dict[int, _Held[M]] = {}  # future slot -> its FR
        self._buffered = 0
        self._max_buffered = 0
        self._area = 0
        names = [kind.value for kind in Kind]
        self._arrived = dict.fromkeys(names, 0)
        self._delivered = dict.fromkeys(names, 0)
        self._delay_sum = dict.fromkeys(names, 0)
        self._max_delay = dict.fromkeys(names, 0)
        self._discarded = {reason.value: 0 for reason in DiscardReason}

    # -- inputs ------------------------------------------------------------------

    def receive(self, message: M, stamp: Stamp, *, now: int) -> list[Action[M]]:
        """One transport-receive event; returns every delivery and discard it causes."""
        self._advance(now)
        out: list[Action[M]] = []
        self._expire_f(out)
        self._arrived[stamp.kind.value] += 1
        held = _Held(message, stamp, now)
        if stamp.slot > self._slot:
            if stamp.kind is Kind.FR:
                if stamp.slot in self._early_fr:
                    self._discard(held, DiscardReason.DUPLICATE, out)
                    return out
                self._early_fr[stamp.slot] = held
            else:
                self._early.setdefault(stamp.slot, []).append(held)
            self._hold()
            return out
        if stamp.slot < self._slot:
            reason = DiscardReason.DUPLICATE if stamp.kind.reliable else DiscardReason.SLOT_CLOSED
            self._discard(held, reason, out)
            return out
        self._take(held, out)
        self._close_ready_slots(out)
        return out

    def advance(self, now: int) -> None:
        """Move the receiver's notion of time to ``now`` (for the occupancy integral);
        it does not fire the ``f_hold`` timer (``handle_timer`` does)."""
        self._advance(now)

    def next_deadline(self) -> int | None:
        """When ``handle_timer`` has work (an F hold expires), or None (no timer)."""
        if self._f_hold is None or not self._f_waiting:
            return None
        return min(held.arrived for held in self._f_waiting.values()) + self._f_hold

    def handle_timer(self, *, now: int) -> list[Action[M]]:
        """Give up the F gaps whose hold expired by ``now``; returns the deliveries."""
        self._advance(now)
        out: list[Action[M]] = []
        self._expire_f(out)
        return out

    # -- observations ----------------------------------------------------------------

    @property
    def slot(self) -> int:
        """The open slot (the number of FR messages delivered so far)."""
        return self._slot

    @property
    def buffered(self) -> int:
        """Messages arrived but neither delivered nor discarded (resequencing buffer)."""
        return self._buffered

    def held(self) -> list[tuple[M, Stamp]]:
        """The buffered messages, in no particular order (for end-of-run reports)."""
        records: list[_Held[M]] = list(self._f_waiting.values())
        if self._fr_waiting is not None:
            records.append(self._fr_waiting)
        for group in self._early.values():
            records.extend(group)
        records.extend(self._early_fr.values())
        return [(record.message, record.stamp) for record in records]

    def statistics(self) -> SlottedStatistics:
        return SlottedStatistics(
            now=self._now,
            slot=self._slot,
            arrived=dict(self._arrived),
            delivered=dict(self._delivered),
            discarded=dict(self._discarded),
            buffered=self._buffered,
            max_buffered=self._max_buffered,
            buffer_area=self._area,
            delay_sum=dict(self._delay_sum),
            max_delay=dict(self._max_delay),
        )

    # -- the rules -----------------------------------------------------------------

    def _take(self, held: _Held[M], out: list[Action[M]]) -> None:
        """Handle a message of the open slot that is not (or no longer) buffered."""
        stamp = held.stamp
        kind = stamp.kind
        if kind is Kind.R:
            self._r_delivered += 1
            self._deliver(held, out)
        elif kind is Kind.N:
            self._deliver(held, out)
        elif kind is Kind.F:
            assert stamp.order is not None
            order = stamp.order
            if order <= self._f_last:
                self._discard(held, DiscardReason.OVERTAKEN, out)
            elif order in self._f_waiting:
                self._discard(held, DiscardReason.DUPLICATE, out)
            elif order == self._f_last + 1:
                self._f_last = order
                self._deliver(held, out)
                self._deliver_f_in_sequence(out)
            else:
                self._f_waiting[order] = held
                self._hold()
        else:
            if self._fr_waiting is not None:
                self._discard(held, DiscardReason.DUPLICATE, out)
            else:
                self._fr_waiting = held
                self._hold()

    def _deliver_f_in_sequence(self, out: list[Action[M]]) -> None:
        waiting = self._f_waiting
        while waiting:
            nxt = waiting.pop(self._f_last + 1, None)
            if nxt is None:
                return
            self._buffered -= 1
            self._f_last += 1
            self._deliver(nxt, out)

    def _expire_f(self, out: list[Action[M]]) -> None:
        """With ``f_hold``: an F that waited that long is delivered past its gaps,
        together with every waiting F before it; the missing ones become
        ``overtaken`` if they arrive later."""
        if self._f_hold is None or not self._f_waiting:
            return
        limit = self._now - self._f_hold
        due = [order for order, held in self._f_waiting.items() if held.arrived <= limit]
        if not due:
            return
        last = max(due)
        for order in sorted(o for o in self._f_waiting if o <= last):
            self._buffered -= 1
            self._deliver(self._f_waiting.pop(order), out)
        self._f_last = last
        self._deliver_f_in_sequence(out)

    def _close_ready_slots(self, out: list[Action[M]]) -> None:
        while True:
            fr = self._fr_waiting
            if fr is None:
                return
            assert fr.stamp.order is not None
            if self._r_delivered < fr.stamp.order:
                return
            for order in sorted(self._f_waiting):
                self._buffered -= 1
                self._deliver(self._f_waiting[order], out)
            self._f_waiting = {}
            self._fr_waiting = None
            self._buffered -= 1
            self._deliver(fr, out)
            self._slot += 1
            self._r_delivered = 0
            self._f_last = 0
            early = self._early.pop(self._slot, ())
            for held in early:
                self._buffered -= 1
                self._take(held, out)
            next_fr = self._early_fr.pop(self._slot, None)
            if next_fr is not None:
                self._buffered -= 1
                self._take(next_fr, out)

    # -- bookkeeping -----------------------------------------------------------------

    def _advance(self, now: int) -> None:
        if now < self._now:
            raise ProtocolUsageError(f"time went backwards: {now} < {self._now}")
        self._area += self._buffered * (now - self._now)
        self._now = now

    def _hold(self) -> None:
        self._buffered += 1
        if self._buffered > self._max_buffered:
            self._max_buffered = self._buffered

    def _deliver(self, held: _Held[M], out: list[Action[M]]) -> None:
        kind = held.stamp.kind.value
        delay = self._now - held.arrived
        self._delivered[kind] += 1
        self._delay_sum[kind] += delay
        if delay > self._max_delay[kind]:
            self._max_delay[kind] = delay
        out.append(Deliver(held.message, held.stamp, held.arrived, self._now))

    def _discard(self, held: _Held[M], reason: DiscardReason, out: list[Action[M]]) -> None:
        self._discarded[reason.value] += 1
        out.append(Discard(held.message, held.stamp, reason, self._now))
