"""Deferred writes of ``latest`` (``StableLatest(deferred=True)``, the receiver's
module docstring): the driver writes off its hot path, in its own time, and the
at-most-once guarantee must not notice.

The property runs hostile executions: clocks that step back and jump, messages on few
connections with fresh, repeated and boundary timestamps, writes handed out and left
in flight for many events, writes that fail, writes that land or not before a crash,
and restarts from storage. It checks, on every step: no (conn, ts) is ever accepted
twice across all the receiver's lives; every accepted timestamp is at or below the
``latest`` on storage at that moment (SCMP 2.3's invariant); storage's ``latest``
never goes down; and one write at most is in flight.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from timebound.core.atmostonce import (
    Fixed,
    MemoryStorage,
    Receiver,
    StableLatest,
    StableRecord,
    UnlimitedHorizon,
    Verdict,
)
from timebound.errors import ProtocolUsageError

CONNS = ["a", "b", "c"]


class Disk(MemoryStorage):
    """Memory storage that remembers every record written, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.history: list[int] = []

    def write(self, record: StableRecord) -> None:
        super().write(record)
        self.history.append(record.latest)


@given(data=st.data(), unlimited=st.booleans())
def test_deferred_writes_never_let_a_duplicate_through(data: st.DataObject,
                                                      unlimited: bool) -> None:
    disk = Disk()
    beta = data.draw(st.integers(0, 80), label="beta")
    every = data.draw(st.integers(1, 40), label="latest_every")
    gc_every = data.draw(st.integers(1, 30), label="gc_every")

    def build(start: int) -> Receiver:
        estimator = UnlimitedHorizon() if unlimited else Fixed(
            data.draw(st.integers(1, 50), label="rho"))
        return Receiver(estimator, gc_every=gc_every,
                        resilience=StableLatest(disk, beta, every, deferred=True),
                        start=start)

    now = data.draw(st.integers(0, 50), label="start")
    receiver = build(now)
    accepted: set[tuple[str, int]] = set()
    in_flight: StableRecord | None = None
    for _ in range(data.draw(st.integers(1, 80), label="steps")):
        action = data.draw(st.sampled_from(
            ["msg"] * 6 + ["take", "land", "fail", "timer", "crash"]), label="action")
        now += data.draw(st.integers(-15, 40), label="dt")  # may step back
        if action == "take":
            record = receiver.take_write()
            if record is not None:
                assert in_flight is None, "two writes in flight"
                in_flight = record
        elif action in ("land", "fail") and in_flight is not None:
            if action == "land":
                disk.write(in_flight)
                receiver.write_done(in_flight)
            else:
                receiver.write_failed(in_flight)
            in_flight = None
        elif action == "timer":
            receiver.handle_timer(now=now)
        elif action == "crash":
            # The process dies: its write in flight landed or not, then it restarts
            # from what storage holds, as a new receiver object.
            if in_flight is not None and data.draw(st.booleans(), label="landed"):
                disk.write(in_flight)
            in_flight = None
            now += data.draw(st.integers(0, 100), label="down")
            receiver = build(now)
        else:
            conn = data.draw(st.sampled_from(CONNS), label="conn")
            old = [ts for c, ts in accepted if c == conn]
            if old and data.draw(st.booleans(), label="copy"):
                ts = data.draw(st.sampled_from(sorted(old)), label="old ts")
            else:
                ts = now + data.draw(st.integers(-60, 120), label="skew")
            verdict = receiver.receive(conn, ts, now=now)
            if verdict is Verdict.ACCEPTED:
                assert (conn, ts) not in accepted, "a duplicate was accepted"
                accepted.add((conn, ts))
                stored = disk.record
                assert stored is not None and ts <= stored.latest, \
                    "accepted above the latest on storage"
        assert disk.history == sorted(disk.history), "storage's latest went down"
        latest = receiver.latest
        assert disk.record is not None and latest is not None
        assert latest <= disk.record.latest, "a latest in force that is not durable"


def test_a_refresh_counts_only_once_it_is_durable() -> None:
    disk = MemoryStorage()
    r = Receiver(Fixed(100), gc_every=1000,
                 resilience=StableLatest(disk, 50, 10, deferred=True))
    assert r.latest == 50 and disk.writes == 1  # the first write is synchronous
    r.handle_timer(now=10)  # refresh: wants latest = 60, not yet durable
    assert r.latest == 50 and disk.writes == 1
    assert r.receive("a", 55, now=10) is Verdict.EARLY
    record = r.take_write()
    assert record is not None and record.latest == 60
    assert r.take_write() is None  # one in flight at a time
    r.handle_timer(now=20)  # a newer refresh waits for the one in flight
    disk.write(record)
    r.write_done(record)
    assert r.latest == 60 and r.receive("a", 55, now=20) is Verdict.ACCEPTED
    newer = r.take_write()
    assert newer is not None and newer.latest == 70


def test_a_failed_write_is_wanted_again_and_misuse_is_refused() -> None:
    r = Receiver(Fixed(100), gc_every=1000,
                 resilience=StableLatest(MemoryStorage(), 50, 10, deferred=True))
    r.handle_timer(now=10)
    record = r.take_write()
    assert record is not None
    with pytest.raises(ProtocolUsageError):
        r.write_done(StableRecord(record.latest, record.estimate, record.p))
    r.write_failed(record)
    assert r.latest == 50 and r.take_write() is record
    r.crash(now=11)
    with pytest.raises(ProtocolUsageError, match="in flight"):
        r.restart(now=12)
    r.write_failed(record)  # the driver learned it did not land
    r.restart(now=12)
    assert r.latest == 62 and not r.down


def test_an_estimator_update_never_hands_out_a_smaller_latest() -> None:
    # A refresh is in flight (60), the next one is wanted (70), then GC changes the
    # estimate and rewrites the record: it must carry 70, not the durable 50, or
    # storage would go back from 60 to 50 once both landed.
    disk = MemoryStorage()
    r = Receiver(UnlimitedHorizon(), gc_every=10,
                 resilience=StableLatest(disk, 50, 10, deferred=True))
    r.handle_timer(now=10)
    first = r.take_write()
    assert first is not None and first.latest == 60
    assert r.receive("a", 1, now=15) is Verdict.ACCEPTED  # lifetime 14: a new estimate
    r.handle_timer(now=20)  # refresh (70), then GC updates the estimate
    disk.write(first)
    r.write_done(first)
    second = r.take_write()
    assert second is not None and second.latest == 70 and second.estimate == r.estimate
