"""A full connection table forgets its oldest entries early instead of refusing new
connections, within an entry bound and a byte bound (``core/atmostonce/_table.py``,
"Bounds"; ``_receiver.py``, "Capacity").

- Properties over hostile executions (floods of new connection ids, replays of
  accepted messages, clocks stepping back, crashes of resilient receivers, hash
  classes, reorder windows, entries the protocol above pins or retains, stored
  bytes): no message is ever accepted twice; every class stays within its
  ``capacity`` and its ``max_bytes``, and its byte count is exactly the sum over
  its entries; a new connection is refused ``FULL`` only when every entry left is
  one that may not go.
- Examples: oldest first (smallest current timestamp, a refreshed entry counts by
  its new one), pinned entries skipped, ``store_bytes`` forgetting its own
  connection as the last resort.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from timebound.core.atmostonce import (
    ClassifiedReceiver,
    Fixed,
    MemoryStorage,
    MonotonicClock,
    Receiver,
    StableLatest,
    Verdict,
    crc32_classifier,
)
from timebound.errors import ProtocolUsageError

A, S, F = Verdict.ACCEPTED, Verdict.STALE, Verdict.FULL

#: Connections of honest callers (replayed, pinned, charged); the flood uses fresh ids.
HONEST = ("a", "b", "c", "d")


def _counted(receiver: Receiver, stored: dict[str, int]) -> int:
    """The byte count of ``receiver`` recomputed from scratch."""
    return sum(receiver.entry_bytes + len(conn) + stored.get(conn, 0)
               for conn in receiver._table)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), mode=st.sampled_from(["plain", "stable", "monotonic"]),
       classes=st.integers(1, 3), window=st.sampled_from([1, 1, 3]))
def test_flood_never_accepts_a_duplicate_and_stays_within_bounds(
        data: st.DataObject, mode: str, classes: int, window: int) -> None:
    pinned: set[str] = set()
    retained: set[str] = set()
    capacity = data.draw(st.one_of(st.none(), st.integers(1, 4)), label="capacity")
    max_bytes = data.draw(st.integers(12, 120) if capacity is None
                          else st.one_of(st.none(), st.integers(12, 120)), label="max_bytes")
    entry_bytes = data.draw(st.integers(0, 12), label="entry_bytes")

    def build() -> Receiver:
        resilience: StableLatest | MonotonicClock | None = None
        if mode == "stable":
            resilience = StableLatest(MemoryStorage(), data.draw(st.integers(0, 60)),
                                      data.draw(st.integers(1, 40)))
        elif mode == "monotonic":
            resilience = MonotonicClock(data.draw(st.integers(0, 40), label="epsilon"))
        return Receiver(Fixed(data.draw(st.integers(1, 60), label="rho")),
                        gc_every=data.draw(st.integers(1, 30), label="gc"),
                        resilience=resilience, capacity=capacity, max_bytes=max_bytes,
                        entry_bytes=entry_bytes, reorder_window=window,
                        retain=lambda conn, now: conn in retained,
                        evictable=lambda conn, now: conn not in pinned)

    receivers = [build() for _ in range(classes)]
    node = ClassifiedReceiver(receivers, crc32_classifier(classes))
    stored: dict[str, int] = {}  # what store_bytes declared (a crash forgets it)
    accepted: set[tuple[str, int]] = set()
    accepted_order: list[tuple[str, int]] = []
    known: set[str] = set(HONEST)
    fresh = 0
    now = 0
    for _ in range(data.draw(st.integers(1, 80), label="steps")):
        action = data.draw(st.sampled_from(
            ["flood", "flood", "flood", "honest", "honest", "again", "store", "pin",
             "retain", "tick", "crash"]), label="action")
        # The clock may step back, but for the monotonic-clock alternative (its premise).
        now += data.draw(st.integers(0 if mode == "monotonic" else -15, 25), label="dt")
        if action == "tick":
            node.handle_timer(now=now)
        elif action == "crash":
            node.handle_timer(now=now)
            if any(receiver.down for receiver in receivers):
                for receiver in receivers:
                    if receiver.down:
                        receiver.restart(now=now)
            elif mode != "plain":
                node.crash(now=now, down=data.draw(st.one_of(st.none(), st.integers(1, 40))))
                stored.clear()
        elif action == "pin":
            conn = data.draw(st.sampled_from(sorted(known)), label="pin")
            pinned.symmetric_difference_update({conn})
        elif action == "retain":
            conn = data.draw(st.sampled_from(sorted(known)), label="retain")
            retained.symmetric_difference_update({conn})
        elif action == "store":
            conn = data.draw(st.sampled_from(sorted(known)), label="store")
            receiver = node.receiver_for(conn)
            if receiver.lookup(conn) is not None and not node.down:
                nbytes = data.draw(st.integers(0, 80), label="nbytes")
                kept = receiver.store_bytes(conn, nbytes, now=now)
                assert kept == (receiver.lookup(conn) is not None)
                if kept and nbytes:
                    stored[conn] = nbytes
                else:
                    stored.pop(conn, None)
        else:
            if action == "flood":
                conn = f"f{fresh}"
                fresh += 1
                known.add(conn)
            elif action == "again" and accepted_order:
                conn, ts = data.draw(st.sampled_from(accepted_order), label="replay")
            else:
                conn = data.draw(st.sampled_from(HONEST), label="conn")
            if action != "again" or not accepted_order:
                ts = max(1, now + data.draw(st.integers(-40, 40), label="skew"))
            receiver = node.receiver_for(conn)
            # What ``receive`` does first, done here so that an entry GC forgets is
            # dropped from ``stored`` before the same id can be accepted again.
            receiver.handle_timer(now=now)
            if receiver.lookup(conn) is None:
                stored.pop(conn, None)
            new = receiver.lookup(conn) is None
            verdict = node.receive(conn, ts, now=now)
            if verdict is A:
                assert (conn, ts) not in accepted, ("accepted twice", conn, ts)
                accepted.add((conn, ts))
                accepted_order.append((conn, ts))
            elif verdict is F:
                # Refused only when no entry may go: every one left is pinned (or
                # the new entry alone exceeds the byte bound).
                assert new
                alone = entry_bytes + len(conn)
                assert (max_bytes is not None and alone > max_bytes) or all(
                    c in pinned for c in receiver._table), (receiver._table, pinned)
        for receiver in receivers:
            # What the table forgot is no longer stored.
            for conn in list(stored):
                if node.receiver_for(conn) is receiver and receiver.lookup(conn) is None:
                    del stored[conn]
            if capacity is not None:
                assert receiver.entries <= capacity
            if max_bytes is not None:
                assert receiver.bytes_used <= max_bytes
            assert receiver.bytes_used == _counted(receiver, stored)
            assert len(receiver._expiry) == len(receiver._table)


def _receiver(capacity: int | None = None, max_bytes: int | None = None,
              evictable: Callable[[str, int], bool] | None = None) -> Receiver:
    return Receiver(Fixed(100), gc_every=50, capacity=capacity, max_bytes=max_bytes,
                    entry_bytes=10, evictable=evictable)


def test_oldest_goes_first_by_current_timestamp() -> None:
    r = _receiver(capacity=3)
    assert r.receive("a", 1, now=1) is A and r.receive("b", 2, now=2) is A
    assert r.receive("c", 3, now=3) is A
    assert r.receive("a", 4, now=4) is A          # a refreshed: b is now the oldest
    assert r.receive("d", 5, now=5) is A
    assert r.lookup("b") is None and r.upper == 2 and r.forced == 1
    assert r.receive("e", 6, now=6) is A           # then c
    assert r.lookup("c") is None and r.upper == 3
    assert r.receive("b", 2, now=7) is S           # late copies of the forgotten
    assert r.receive("c", 3, now=7) is S
    assert sorted(r._table) == ["a", "d", "e"]


def test_byte_bound_forgets_the_oldest_for_a_new_connection() -> None:
    r = _receiver(max_bytes=33)                    # three entries of 11 bytes
    for i, conn in enumerate("abc", start=1):
        assert r.receive(conn, i, now=i) is A
    assert r.bytes_used == 33
    assert r.receive("dd", 4, now=4) is A          # 12 bytes: a and b go
    assert r.lookup("a") is None and r.lookup("b") is None and r.bytes_used == 23
    assert r.upper == 2 and r.forced == 2


def test_store_bytes_makes_room_and_last_forgets_its_own_connection() -> None:
    keep = {"a"}
    r = _receiver(max_bytes=100, evictable=lambda conn, now: conn not in keep)
    for i, conn in enumerate("abc", start=1):
        assert r.receive(conn, i, now=i) is A
    assert r.store_bytes("c", 60, now=4)           # 93 bytes: fits
    assert r.bytes_used == 93
    assert r.store_bytes("c", 68, now=5)           # b (the oldest that may go) goes
    assert r.lookup("b") is None and r.bytes_used == 90 and r.upper == 2
    keep.add("c")
    assert not r.store_bytes("c", 200, now=6)      # nothing else may go: c goes
    assert r.lookup("c") is None and r.lookup("a") == 1 and r.bytes_used == 11
    assert r.upper == 3 and len(r._expiry) == 1
    r.handle_timer(now=500)                        # the heap stayed consistent
    assert r.entries == 0 and r.bytes_used == 0
    with pytest.raises(ProtocolUsageError):
        r.store_bytes("c", 1, now=501)


def test_full_when_the_new_entry_alone_exceeds_the_byte_bound() -> None:
    r = _receiver(max_bytes=12)
    assert r.receive("abc", 1, now=1) is F and r.entries == 0
    assert r.receive("ab", 1, now=1) is A and r.bytes_used == 12


def test_bounds_are_checked() -> None:
    with pytest.raises(ProtocolUsageError):
        Receiver(Fixed(1), gc_every=1, max_bytes=0)
    with pytest.raises(ProtocolUsageError):
        Receiver(Fixed(1), gc_every=1, entry_bytes=-1)
