"""Unit tests of the at-most-once receiver and its estimators (exact values)."""

from __future__ import annotations

from pathlib import Path

import pytest

from timebound.core.atmostonce import (
    ClassifiedReceiver,
    Fixed,
    LimitedHorizon,
    MemoryStorage,
    MonotonicClock,
    Receiver,
    StableLatest,
    StableRecord,
    UnlimitedHorizon,
    Verdict,
    crc32_class,
    crc32_classifier,
    nextpow2,
)
from timebound.errors import ProtocolUsageError, StorageError
from timebound.storage import FileStorage

A, D, S, E = Verdict.ACCEPTED, Verdict.DUPLICATE, Verdict.STALE, Verdict.EARLY


def test_nextpow2() -> None:
    assert [nextpow2(v) for v in (1, 2, 3, 4, 5, 8, 9, 1000)] == [1, 2, 4, 4, 8, 8, 16, 1024]


def test_fig_2_1_rules() -> None:
    r = Receiver(Fixed(10), gc_every=5)
    assert r.receive("a", 3, now=4) is A
    assert r.receive("a", 3, now=4) is D           # same message again
    assert r.receive("a", 2, now=4) is D           # older on the same connection
    assert r.receive("a", 4, now=4) is A
    assert r.lookup("a") == 4
    # GC at 15: 4 <= 15 - 10 -> forgotten, upper = 4
    assert r.receive("b", 1, now=15) is S and r.entries == 0 and r.upper == 4
    assert r.receive("a", 4, now=15) is S          # the duplicate is still caught
    assert r.receive("a", 5, now=15) is A
    assert r.next_deadline() == 20


def test_unlimited_rises_falls_and_charges_only_on_a_real_fall() -> None:
    u = UnlimitedHorizon()
    u.observe(5, A)
    assert u.update() and u.estimate == 8 and u.p == 1
    u.observe(5, A)                             # max 5 < 8 but nextpow2(5) == 8
    assert not u.update() and u.estimate == 8 and u.p == 1 and u.numacc == 2
    u.observe(3, A)
    assert u.update() and u.estimate == 4 and u.p == 2 and u.numacc == 3
    for _ in range(3):
        u.observe(1, S)
    u.observe(2, A)                             # numacc 4 <= 2 * 3: no fall
    assert not u.update() and u.estimate == 4
    assert not u.update()                      # empty period: max 0, nothing


def test_limited_uses_the_h_plus_1st_largest_and_charges_one_more() -> None:
    est = LimitedHorizon(window=4, spikes=1, p=2)
    due = [est.observe(life, A) for life in (100, 3, 7, 2)]
    assert due == [False, False, False, True]
    assert est.update() and est.estimate == 8      # 2nd largest is 7
    for life in (1000, 2, 3, 1):
        est.observe(life, A)
    assert est.update() and est.estimate == 4      # falls; numacc 8 - 2*0 - 1
    assert est.numacc == 7 and est.p == 2


def test_limited_gc_runs_at_the_message_that_completes_the_window() -> None:
    r = Receiver(LimitedHorizon(window=2, spikes=0, p=1))
    assert r.next_deadline() is None
    r.receive("a", 1, now=10)
    r.receive("b", 2, now=40)                       # 2nd lifetime: GC at 40, estimate 64
    assert r.estimate == 64 and r.entries == 2


def test_constructor_misuse() -> None:
    with pytest.raises(ProtocolUsageError):
        Receiver(Fixed(5))                      # no gc_every
    with pytest.raises(ProtocolUsageError):
        Receiver(LimitedHorizon(3, 0, 1), gc_every=4)
    with pytest.raises(ProtocolUsageError):
        Fixed(0)
    with pytest.raises(ProtocolUsageError):
        LimitedHorizon(3, 3, 1)
    with pytest.raises(ProtocolUsageError):
        Receiver(Fixed(5), gc_every=5).crash(now=0)  # a non-resilient receiver cannot recover


def test_resilient_latest_crash_and_restart_from_storage() -> None:
    storage = MemoryStorage()
    r = Receiver(Fixed(100), gc_every=50, resilience=StableLatest(storage, 30, 10))
    assert r.latest == 30 and storage.record == StableRecord(30, 100, 1)
    assert r.receive("a", 31, now=5) is E
    assert r.receive("a", 31, now=10) is A          # refresh at 10: latest 40
    assert r.latest == 40
    r.crash(now=12)
    assert r.down and r.receive("a", 32, now=13) is Verdict.DOWN
    r.restart(now=20)                               # upper = 40, latest = max(40, 50)
    assert r.upper == 40 and r.latest == 50 and r.entries == 0
    assert r.receive("a", 31, now=21) is S          # the pre-crash message again
    assert r.receive("b", 41, now=21) is A


def test_crash_with_duration_recovers_on_its_own_and_skips_timers_while_down() -> None:
    storage = MemoryStorage()
    r = Receiver(Fixed(10), gc_every=7, resilience=StableLatest(storage, 5, 4))
    r.crash(now=3, down=10)
    writes = storage.writes
    assert r.next_deadline() == 13
    r.handle_timer(now=12)
    assert r.down and storage.writes == writes   # nothing fired while down
    r.handle_timer(now=13)
    assert not r.down and r.latest == 18 and r.upper == 5
    assert r.next_deadline() == 14               # gc at 14, refresh at 16


def test_monotonic_clock_alternative() -> None:
    r = Receiver(Fixed(100), gc_every=50, resilience=MonotonicClock(epsilon=10))
    assert r.receive("a", 111, now=100) is E        # ts > now + epsilon
    assert r.receive("a", 110, now=100) is A
    r.crash(now=105)
    r.restart(now=200)
    assert r.receive("b", 500, now=205) is Verdict.RECOVERING
    assert r.receive("a", 110, now=210) is S        # window over: upper = 210
    assert r.upper == 210
    assert r.receive("b", 211, now=211) is A


def test_capacity_evicts_only_when_almost_full_then_forgets_oldest_early() -> None:
    r = Receiver(Fixed(10), gc_every=5, capacity=4, high_water=3)
    assert r.receive("a", 1, now=1) is A and r.receive("b", 2, now=2) is A
    r.handle_timer(now=20)                               # 2 entries < high water: kept
    assert r.entries == 2 and r.upper == 0
    assert r.receive("c", 18, now=20) is A and r.receive("d", 19, now=20) is A
    # Full: a new connection forces eviction of the expired a and b.
    assert r.receive("e", 19, now=20) is A and r.entries == 3 and r.upper == 2
    assert r.receive("f", 20, now=20) is A
    # Full of live entries: the oldest (c, CT 18) is forgotten early, upper over it.
    assert r.receive("g", 20, now=20) is A
    assert r.lookup("c") is None and r.upper == 18 and r.entries == 4
    assert r.forced == 1 and r.statistics().full == 0
    assert r.receive("c", 18, now=21) is S               # its late copy: stale


def test_capacity_full_only_when_nothing_may_go() -> None:
    keep = {"a", "b"}
    r = Receiver(Fixed(10), gc_every=5, capacity=2,
                 evictable=lambda conn, now: conn not in keep)
    assert r.receive("a", 1, now=1) is A and r.receive("b", 2, now=2) is A
    assert r.receive("c", 3, now=3) is Verdict.FULL     # both kept: nothing may go
    assert r.entries == 2 and r.statistics().full == 1 and r.upper == 0
    keep.discard("b")
    assert r.receive("c", 3, now=3) is A                 # b goes, a (older) stays
    assert r.lookup("a") == 1 and r.lookup("b") is None and r.upper == 2


def test_retain_keeps_entries_in_use() -> None:
    keep = {"a"}
    r = Receiver(Fixed(10), gc_every=5, retain=lambda conn, now: conn in keep)
    r.receive("a", 1, now=1)
    r.receive("b", 1, now=1)
    r.handle_timer(now=20)
    assert r.lookup("a") == 1 and r.lookup("b") is None and r.upper == 1


def test_classes_are_independent_and_crash_together() -> None:
    classify = crc32_classifier(3)
    assert crc32_class("c7", 3) == classify("c7")
    receivers = [Receiver(Fixed(10 * (i + 1)), gc_every=5,
                          resilience=StableLatest(MemoryStorage(), 100, 50)) for i in range(3)]
    node = ClassifiedReceiver(receivers, classify)
    assert node.receive("c7", 5, now=6) is A
    assert node.receiver_for("c7").entries == 1 and node.entries == 1
    node.crash(now=10, down=5)
    assert all(r.down for r in receivers)
    node.handle_timer(now=15)
    assert not node.down


def test_idle_gap_is_constant_time() -> None:
    r = Receiver(UnlimitedHorizon(), gc_every=1, resilience=StableLatest(MemoryStorage(), 5, 1))
    r.receive("a", 1, now=3)
    r.handle_timer(now=10**15)                           # would never finish tick by tick
    assert r.next_deadline() == 10**15 + 1 and r.entries == 0 and r.estimate == 2


def test_file_storage_round_trip_and_restart(tmp_path: Path) -> None:
    path = tmp_path / "latest.json"
    storage = FileStorage(path)
    assert storage.read() is None
    r = Receiver(UnlimitedHorizon(), gc_every=10, resilience=StableLatest(storage, 50, 10))
    r.receive("a", 40, now=45)
    r.handle_timer(now=60)
    before = storage.read()
    assert before is not None and before.latest == 110 and before.estimate == 8
    # The process dies; a new one starts from the file and recovers.
    again = Receiver(UnlimitedHorizon(), gc_every=10, resilience=StableLatest(FileStorage(path), 50, 10), start=70)
    assert again.upper == 110 and again.latest == 120 and again.estimate == 8
    assert again.receive("a", 40, now=71) is S
    assert [p.name for p in tmp_path.iterdir()] == ["latest.json"]


def test_file_storage_removes_only_its_own_leftover_temporaries(tmp_path: Path) -> None:
    # A SIGKILL between mkstemp and the rename leaves a temporary behind; the next
    # start (read) removes it, and never a file of another target or of the user.
    path = tmp_path / "latest.json"
    FileStorage(path).write(StableRecord(5, 2, 1))
    ours = tmp_path / ".latest.json.ab_12xyz.timebound-tmp"
    theirs = [tmp_path / n for n in (".latest.json.1.ab_12xyz.timebound-tmp",
                                     ".latest.json.notes", ".latest.abcdefgh",
                                     ".latest.json.abc.timebound-tmp", "latest.json.bak")]
    for f in [ours, *theirs]:
        f.write_text("x")
    assert FileStorage(path).read() == StableRecord(5, 2, 1)
    assert not ours.exists() and all(f.exists() for f in theirs)


def test_file_storage_write_failure_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "latest.json"
    path.mkdir()  # the rename over a folder fails after the temporary is written
    with pytest.raises(StorageError):
        FileStorage(path).write(StableRecord(5, 2, 1))
    assert [p.name for p in tmp_path.iterdir()] == ["latest.json"]


def test_file_storage_refuses_garbage(tmp_path: Path) -> None:
    path = tmp_path / "latest.json"
    path.write_text("{not json")
    with pytest.raises(StorageError):
        FileStorage(path).read()
    path.write_text('{"latest": "x", "estimate": 1, "p": 1}')
    with pytest.raises(StorageError):
        FileStorage(path).read()


def test_recovery_grace_keeps_pending_retransmissions() -> None:
    def run(grace: int) -> Verdict:
        r = Receiver(Fixed(10), gc_every=5, resilience=StableLatest(MemoryStorage(), 20, 100),
                     recovery_grace=grace)
        r.crash(now=1, down=99)                      # recovers at 100: upper = 20
        r.receive("new", 110, now=101)               # accepted after recovery
        # A client's call sent at 60 (after t_cr + beta) is still being retransmitted;
        # without grace the GC at 125 forgets "new" (110 <= 115) and upper = 110.
        return r.receive("old", 60, now=130)
    assert run(0) is S
    assert run(50) is A
