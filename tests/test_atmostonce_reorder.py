"""Reorder window (our extension beyond SCMP): W = 1 is the paper's receiver,
no duplicate is ever accepted for any W, and a reordered genuine message within the
window is accepted. The argument and its invariant: the module docstring of
``timebound.core.atmostonce._table``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.atmostonce_reference import reference_replay
from tests.test_atmostonce_replay_matches_reference import options, traces
from timebound.adapters.atmostonce import AtMostOnceOptions
from timebound.core.atmostonce import (
    ClassifiedReceiver,
    Fixed,
    LimitedHorizon,
    MemoryStorage,
    MonotonicClock,
    Receiver,
    ReceiverConfig,
    StableLatest,
    UnlimitedHorizon,
    Verdict,
    crc32_classifier,
    receiver_snapshot,
    restore_receiver,
)
from timebound.errors import ProtocolUsageError, UsageError

WINDOWS = (1, 2, 3, 4, 8, 32)


# -- W = 1 is the paper's receiver (differential) -------------------------------------


@given(st.data())
def test_window_one_equals_the_papers_receiver(data) -> None:
    """``--reorder-window 1`` (explicitly) decides every row as the literal reference
    of docs/replay-atmostonce.md (SCMP Figs. 2-1/2-2, adaptive Figs. 1-3) does."""
    o = data.draw(options())
    rows = data.draw(traces(o.resilient))
    expected = reference_replay(rows, o)
    got = replay_with_window(rows, o, 1)
    assert got == expected


def replay_with_window(rows: list[dict], o, window: int) -> list[dict]:
    from timebound.adapters import Row
    from timebound.adapters.atmostonce import AtMostOnceAdapter

    values = {k: getattr(o, k) for k in ("estimator", "rho", "gc_every", "window", "spikes",
                                         "p", "resilient", "beta", "latest_every",
                                         "recovery_grace", "classes")}
    values["reorder_window"] = window
    adapter = AtMostOnceAdapter(AtMostOnceOptions.from_values(values))
    out: list[dict] = []
    for line, row in enumerate(rows, start=1):
        out.extend(adapter.feed(Row("t", line, row)))
    return out


def test_default_is_window_one() -> None:
    assert ReceiverConfig().reorder_window == 1
    assert ReceiverConfig(rho=5, gc_every=1).new_receiver()._windows is None


# -- no duplicate, for any W (property) -----------------------------------------------


def _estimator(kind: str, draw):
    if kind == "fixed":
        return Fixed(draw(st.integers(1, 300)))
    if kind == "unlimited":
        return UnlimitedHorizon()
    window = draw(st.integers(1, 10))
    return LimitedHorizon(window, draw(st.integers(0, window - 1)), draw(st.integers(1, 4)))


@st.composite
def hostile_runs(draw):
    """A node (classes, estimator, resilience, capacity) and a trace whose receiver
    clock jumps back and forth, whose senders' clocks are anywhere, with duplicates,
    crashes and restarts."""
    window = draw(st.sampled_from(WINDOWS))
    kind = draw(st.sampled_from(["fixed", "unlimited", "limited"]))
    resilience = draw(st.sampled_from(["none", "stable", "monotonic"]))
    classes = draw(st.sampled_from([1, 1, 2, 3]))
    capacity = draw(st.sampled_from([None, None, 2, 5]))
    grace = draw(st.sampled_from([0, 0, 100]))
    receivers = []
    for _ in range(classes):
        est = _estimator(kind, draw)
        res = None
        if resilience == "stable":
            res = StableLatest(MemoryStorage(), draw(st.integers(0, 300)),
                               draw(st.integers(1, 150)))
        elif resilience == "monotonic":
            res = MonotonicClock(draw(st.integers(0, 200)))
        receivers.append(Receiver(est, gc_every=None if est.gc_by_count else
                                  draw(st.integers(1, 100)), resilience=res,
                                  capacity=capacity, recovery_grace=grace,
                                  reorder_window=window))
    node = ClassifiedReceiver(receivers, crc32_classifier(classes))
    conns = [f"c{i}" for i in range(draw(st.integers(1, 5)))]
    steps = []
    now = 0
    for _ in range(draw(st.integers(1, 120))):
        # Hostile: the receiver's clock steps back too -- except with the monotonic-
        # clock alternative, which SCMP 2.2 offers only for a clock known to be monotonic.
        back = 0 if resilience == "monotonic" else -200
        now = max(0, now + draw(st.integers(back, 250)))
        action = draw(st.integers(0, 19))
        if action == 0 and resilience != "none":
            steps.append(("crash", now, draw(st.sampled_from([None, 1, 50, 400]))))
        elif action == 1 and resilience != "none":
            steps.append(("restart", now, None))
        else:
            conn = draw(st.sampled_from(conns))
            ts = max(1, now - draw(st.integers(-300, 600)))
            steps.append(("msg", now, (conn, ts)))
            if draw(st.integers(0, 3)) == 0:  # a duplicate of an earlier message, later
                earlier = [s[2] for s in steps if s[0] == "msg"]
                now += draw(st.integers(0, 400))
                steps.append(("msg", now, draw(st.sampled_from(earlier))))
    return node, steps


@given(hostile_runs())
def test_no_duplicate_for_any_window(run) -> None:
    node, steps = run
    accepted: set[tuple[str, int]] = set()
    for kind, now, arg in steps:
        if kind == "crash":
            node.handle_timer(now=now)
            if not any(r.down for r in node.receivers):
                node.crash(now=now, down=arg)
        elif kind == "restart":
            for receiver in node.receivers:
                if receiver.down:
                    receiver.restart(now=now)
        else:
            assert arg is not None
            conn, ts = arg
            if node.receive(conn, ts, now=now) is Verdict.ACCEPTED:
                assert (conn, ts) not in accepted, f"duplicate {conn} {ts} accepted"
                accepted.add((conn, ts))
        for receiver in node.receivers:  # accounting: entries == remembered timestamps
            windows = receiver._windows
            if windows is not None:
                assert receiver.entries == sum(len(w) - 1 for w in windows.values())
                assert all(len(w) - 1 <= receiver.reorder_window for w in windows.values())
                assert all(w == sorted(set(w)) and w[-1] == receiver.lookup(c)
                           for c, w in windows.items())
            if receiver.capacity is not None:
                assert receiver.entries <= receiver.capacity


# -- a reordered genuine message within the window is accepted (unit) -----------------


def _receiver(window: int) -> Receiver:
    return Receiver(Fixed(1000), gc_every=100, reorder_window=window)


@pytest.mark.parametrize("window", [2, 4, 8, 32])
def test_reordered_genuine_message_within_window_accepted(window: int) -> None:
    """Message 10 is overtaken by W - 1 later messages of its connection: accepted
    with a window of W (and refused as duplicate by SCMP, W = 1); its copy is refused."""
    for w, expected in ((window, Verdict.ACCEPTED), (1, Verdict.DUPLICATE)):
        r = _receiver(w)
        for i in range(1, window):
            assert r.receive("c", 10 + i, now=20) is Verdict.ACCEPTED
        assert r.receive("c", 10, now=21) is expected
        assert r.receive("c", 10, now=22) is Verdict.DUPLICATE


def test_below_a_full_window_above_the_floor_is_accepted_and_becomes_the_floor() -> None:
    """A full window [0, 11..14]: 10 is above the floor and not remembered, so the
    receiver can tell it never accepted it: accepted, and it becomes the floor (the
    smallest of five), so its copy and everything at or below it are refused."""
    r = _receiver(4)
    for ts in (11, 12, 13, 14):
        assert r.receive("c", ts, now=20) is Verdict.ACCEPTED
    assert r.receive("c", 10, now=21) is Verdict.ACCEPTED
    assert r.receive("c", 10, now=22) is Verdict.DUPLICATE
    assert r.receive("c", 9, now=22) is Verdict.DUPLICATE  # at or below the floor
    assert r.entries == 4 and r.connections == 1


def test_at_or_below_the_floor_is_refused() -> None:
    """12..16 after 10: 16 drops 12 into the floor, so 11 (never accepted, but at or
    below the floor: the receiver cannot tell) is refused, 15 (a copy) too."""
    r = _receiver(4)
    for ts in (10, 12, 13, 14, 15, 16):
        assert r.receive("c", ts, now=20) is Verdict.ACCEPTED
    assert r.receive("c", 11, now=21) is Verdict.DUPLICATE
    assert r.receive("c", 12, now=21) is Verdict.DUPLICATE
    assert r.receive("c", 15, now=21) is Verdict.DUPLICATE
    assert r.entries == 4 and r.connections == 1


@given(st.sampled_from((2, 3, 4, 8)),
       st.lists(st.integers(1, 40), min_size=1, max_size=60))
def test_a_genuine_message_is_refused_only_below_w_larger_accepted_ones(
        window: int, stamps: list[int]) -> None:
    """One connection, nothing forgotten (no GC): a copy is always refused, and a
    message never accepted before is refused exactly when more than W timestamps of
    its connection above it were accepted (they have pushed the floor up to or past
    it: the receiver can no longer tell). Fails with a full window's bound at ``s_1``
    (which refuses it below only W) or with a floor that forgets (copies accepted)."""
    r = _receiver(window)
    accepted: set[int] = set()
    for i, ts in enumerate(stamps):
        verdict = r.receive("c", ts, now=ts + i)
        above = sum(1 for a in accepted if a > ts)
        genuine = ts not in accepted and above <= window
        assert verdict is (Verdict.ACCEPTED if genuine else Verdict.DUPLICATE), (ts, accepted)
        if verdict is Verdict.ACCEPTED:
            accepted.add(ts)


def test_gc_forgets_whole_window_and_raises_upper() -> None:
    r = Receiver(Fixed(10), gc_every=10, reorder_window=4)
    for ts in (5, 7, 6):
        r.receive("c", ts, now=8)
    assert r.entries == 3
    r.handle_timer(now=20)
    assert r.entries == 0 and r.upper == 7
    assert r.receive("c", 6, now=21) is Verdict.STALE


def test_snapshot_round_trip_keeps_the_window() -> None:
    r = _receiver(4)
    for ts in (10, 14, 12):
        r.receive("c", ts, now=20)
    snap = receiver_snapshot(r)
    assert snap["windows"] == [["c"], [[0, 10, 12, 14]]]
    back = restore_receiver(_receiver(4), json.loads(json.dumps(snap)))
    assert receiver_snapshot(back) == snap and back.entries == 3
    assert back.receive("c", 13, now=21) is Verdict.ACCEPTED
    assert back.receive("c", 12, now=21) is Verdict.DUPLICATE
    assert receiver_snapshot(_receiver(1))["windows"] is None
    with pytest.raises(ProtocolUsageError):
        restore_receiver(_receiver(1), snap)


def test_window_range_is_checked() -> None:
    with pytest.raises(ProtocolUsageError):
        Receiver(Fixed(5), gc_every=1, reorder_window=0)
    base = {"estimator": "fixed", "rho": 5, "gc_every": 1}
    assert AtMostOnceOptions.from_values({**base, "reorder_window": 4096}).receiver \
        .reorder_window == 4096
    for bad in (0, 4097):
        with pytest.raises(UsageError):
            AtMostOnceOptions.from_values({**base, "reorder_window": bad})


def test_replay_cli_reorder_window(tmp_path) -> None:
    trace = tmp_path / "t.jsonl"
    rows = [(11, 20), (12, 21), (10, 22), (10, 23)]
    trace.write_text("".join(json.dumps({"type": "msg", "receiver": "s", "conn": "c",
                                         "ts": ts, "at": at}) + "\n" for ts, at in rows))
    base = [os.path.join(os.path.dirname(sys.executable), "timebound"), "replay", "atmostonce", "--input", str(trace),
            "--estimator", "fixed", "--rho", "100", "--gc-every", "10"]
    for w, verdicts in (("1", ["accepted", "accepted", "duplicate", "duplicate"]),
                        ("4", ["accepted", "accepted", "accepted", "duplicate"])):
        out = tmp_path / f"o{w}.jsonl"
        done = subprocess.run([*base, "--output", str(out), "--reorder-window", w],
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        got = [json.loads(line) for line in out.read_text().splitlines()]
        assert [r["verdict"] for r in got] == verdicts
        assert got[-1]["entries"] == (1 if w == "1" else 3)
    bad = subprocess.run([*base, "--output", str(tmp_path / "x.jsonl"),
                          "--reorder-window", "0"], capture_output=True, text=True,
                         check=False)
    assert bad.returncode == 2
    assert bad.stderr.startswith("timebound: error: ") and "--reorder-window" in bad.stderr
