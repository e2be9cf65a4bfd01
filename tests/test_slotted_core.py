"""Slotted-FIFO sender stamps (Fig. 3) and hand-computed receiver cases, including
where this receiver does better than Fig. 4's single end_slot flag."""

from __future__ import annotations

import pytest

from timebound.core.slotted import (
    Deliver,
    Discard,
    DiscardReason,
    Kind,
    SlottedReceiver,
    SlottedSender,
    Stamp,
)
from timebound.errors import ProtocolUsageError


def stamp_all(kinds: str) -> list[Stamp]:
    sender = SlottedSender()
    return [sender.send(Kind(k)) for k in kinds.split()]


def feed(receiver: SlottedReceiver[int], stamps: list[Stamp], order: list[int],
         start: int = 0) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for step, i in enumerate(order, start=start):
        for act in receiver.receive(i, stamps[i], now=step):
            out.append((act.message, "deliver" if isinstance(act, Deliver) else act.reason.value))
    return out


def test_sender_stamps_per_figure_3() -> None:
    assert stamp_all("R F N R F FR F R FR") == [
        Stamp(0, Kind.R), Stamp(0, Kind.F, 1), Stamp(0, Kind.N), Stamp(0, Kind.R),
        Stamp(0, Kind.F, 2), Stamp(0, Kind.FR, 2), Stamp(1, Kind.F, 1), Stamp(1, Kind.R),
        Stamp(1, Kind.FR, 1),
    ]


def test_stamp_validation() -> None:
    with pytest.raises(ProtocolUsageError):
        Stamp(0, Kind.F, 0)
    with pytest.raises(ProtocolUsageError):
        Stamp(-1, Kind.N)
    with pytest.raises(ProtocolUsageError):
        Stamp(0, Kind.R, 3)


def test_messages_before_first_fr() -> None:
    stamps = stamp_all("N R F")
    assert feed(SlottedReceiver(), stamps, [2, 1, 0]) == [(2, "deliver"), (1, "deliver"),
                                                          (0, "deliver")]


def test_fr_waits_for_its_slots_r_then_cascades() -> None:
    # slot 0: R0; FR1 closes it; slot 1: R2, N3; FR4 closes it
    stamps = stamp_all("R FR R N FR")
    receiver: SlottedReceiver[int] = SlottedReceiver()
    assert feed(receiver, stamps, [4, 3, 2, 1]) == []
    assert receiver.buffered == 4
    assert feed(receiver, stamps, [0], start=4) == [
        (0, "deliver"), (1, "deliver"), (3, "deliver"), (2, "deliver"), (4, "deliver")]
    stats = receiver.statistics()
    assert stats.slot == 2 and stats.buffered == 0 and stats.max_buffered == 4
    # FR4 arrived at 0, delivered at 4; N3 at 1; R2 at 2; FR1 at 3
    assert stats.delay_sum == {"FR": 4 + 1, "R": 2, "N": 3, "F": 0}
    assert stats.buffer_area == 1 + 2 + 3 + 4  # occupancy 1,2,3,4 for one tick each


def test_late_unreliable_of_closed_slot_is_discarded() -> None:
    stamps = stamp_all("F N FR")
    assert feed(SlottedReceiver(), stamps, [2, 1, 0]) == [
        (2, "deliver"), (1, "slot_closed"), (0, "slot_closed")]


def test_gap_f_flushed_in_order_before_fr() -> None:
    stamps = stamp_all("F F F R FR")
    # F3 and F2 wait for F1 (lost); FR waits for R; R arrives -> flush F2, F3, then FR
    assert feed(SlottedReceiver(), stamps, [2, 4, 1, 3]) == [
        (3, "deliver"), (1, "deliver"), (2, "deliver"), (4, "deliver")]


def test_early_fr_of_later_slot_does_not_end_open_slot() -> None:
    # Fig. 4 would set end_slot on FR5's arrival and discard F1 and F2 of slot 0.
    stamps = stamp_all("F F R FR R FR")
    out = feed(SlottedReceiver(), stamps, [5, 1, 0, 2, 3, 4])
    assert out == [(0, "deliver"), (1, "deliver"), (2, "deliver"), (3, "deliver"),
                   (4, "deliver"), (5, "deliver")]


def test_f_after_fr_arrival_still_delivered() -> None:
    # FR3 waits for R2; Fig. 4 discards F0 and F1 that arrive meanwhile (end_slot).
    stamps = stamp_all("F F R FR")
    assert feed(SlottedReceiver(), stamps, [3, 1, 0, 2]) == [
        (0, "deliver"), (1, "deliver"), (2, "deliver"), (3, "deliver")]


def test_f_hold_delivers_past_gap_and_overtakes() -> None:
    stamps = stamp_all("F F F")
    receiver: SlottedReceiver[int] = SlottedReceiver(f_hold=5)
    assert receiver.receive(1, stamps[1], now=0) == []
    assert receiver.next_deadline() == 5
    assert receiver.handle_timer(now=4) == []
    acts = receiver.handle_timer(now=5)
    assert [(a.message, a.delay) for a in acts if isinstance(a, Deliver)] == [(1, 5)]
    assert receiver.next_deadline() is None
    late = receiver.receive(0, stamps[0], now=6)
    assert len(late) == 1 and isinstance(late[0], Discard)
    assert late[0].reason is DiscardReason.OVERTAKEN
    assert receiver.statistics().discarded["overtaken"] == 1


def test_duplicates_of_reliable_messages_are_discarded() -> None:
    stamps = stamp_all("FR FR")
    receiver: SlottedReceiver[int] = SlottedReceiver()
    assert feed(receiver, stamps, [1, 1]) == [(1, "duplicate")]
    assert feed(receiver, stamps, [0, 0], start=2) == [
        (0, "deliver"), (1, "deliver"), (0, "duplicate")]


def test_time_must_not_go_backwards() -> None:
    receiver: SlottedReceiver[int] = SlottedReceiver()
    receiver.receive(0, Stamp(0, Kind.N), now=5)
    with pytest.raises(ProtocolUsageError):
        receiver.receive(1, Stamp(0, Kind.N), now=4)
