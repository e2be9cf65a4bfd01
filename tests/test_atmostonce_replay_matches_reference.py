"""The product replay equals the literal reference of docs/replay-atmostonce.md on generated traces,
for every estimator, with and without resilience and classes."""

from __future__ import annotations

import argparse

from hypothesis import given
from hypothesis import strategies as st

from tests.atmostonce_reference import Options, reference_replay
from timebound.adapters import Row
from timebound.replay.atmostonce import add_arguments
from timebound.replay.atmostonce import build as build_replayer


def replay(rows: list[dict], o: Options) -> list[dict]:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    argv = ["-i", "x.jsonl", "-o", "y.jsonl", "--estimator", o.estimator]
    for name in ("rho", "gc_every", "window", "spikes", "p", "beta", "latest_every",
                 "recovery_grace"):
        value = getattr(o, name)
        if value is not None:
            argv += ["--" + name.replace("_", "-"), str(value)]
    if o.resilient:
        argv.append("--resilient")
    argv += ["--classes", str(o.classes)]
    replayer = build_replayer(parser.parse_args(argv))
    out: list[dict] = []
    for line, row in enumerate(rows, start=1):
        out.extend(replayer.feed(Row("t", line, row)))
    return out


@st.composite
def options(draw) -> Options:
    kind = draw(st.sampled_from(["fixed", "unlimited", "limited"]))
    o = Options(estimator=kind)
    if kind == "fixed":
        o.rho = draw(st.integers(1, 400))
    if kind in ("fixed", "unlimited"):
        o.gc_every = draw(st.integers(1, 120))
    else:
        o.window = draw(st.integers(1, 12))
        o.spikes = draw(st.integers(0, o.window - 1))
        o.p = draw(st.integers(1, 4))
    if draw(st.booleans()):
        o.resilient = True
        o.beta = draw(st.integers(0, 300))
        o.latest_every = draw(st.integers(1, 150))
        o.recovery_grace = draw(st.sampled_from([None, None, 0, 50, 300]))
    o.classes = draw(st.sampled_from([1, 1, 2, 3]))
    return o


@st.composite
def traces(draw, resilient: bool) -> list[dict]:
    receivers = draw(st.lists(st.sampled_from(["s1", "s2", "s3"]), min_size=1, max_size=2, unique=True))
    conns = [f"c{i}" for i in range(draw(st.integers(1, 6)))]
    now = dict.fromkeys(receivers, 0)
    recover = dict.fromkeys(receivers, 0)
    rows: list[dict] = []
    for _ in range(draw(st.integers(1, 60))):
        r = draw(st.sampled_from(receivers))
        now[r] += draw(st.integers(0, 150))
        at = now[r]
        if resilient and at >= recover[r] and draw(st.integers(0, 9)) == 0:
            down = draw(st.integers(1, 400))
            rows.append({"type": "crash", "receiver": r, "at": at, "down": down})
            recover[r] = at + down
            continue
        # Lifetimes from negative (sender clock ahead) to very late; duplicates by
        # reusing a recent timestamp.
        if rows and draw(st.integers(0, 4)) == 0:
            previous = draw(st.sampled_from([row for row in rows if row["type"] == "msg"] or [None]))
            if previous is not None:
                rows.append(dict(previous, receiver=r, at=at))
                continue
        ts = max(1, at - draw(st.integers(-100, 700)))
        rows.append({"type": "msg", "receiver": r, "conn": draw(st.sampled_from(conns)),
                     "ts": ts, "at": at})
    return rows


@given(data=st.data())
def test_replay_equals_reference(data) -> None:
    o = data.draw(options())
    rows = data.draw(traces(o.resilient))
    assert replay(rows, o) == reference_replay(rows, o)


def test_reference_sees_the_idle_gap_rule() -> None:
    """One GC after a long gap equals all the GCs of the gap (estimator included)."""
    o = Options(estimator="unlimited", gc_every=10)
    rows = [
        {"type": "msg", "receiver": "s", "conn": "a", "ts": 1, "at": 60},
        {"type": "msg", "receiver": "s", "conn": "b", "ts": 100, "at": 2000},
        {"type": "msg", "receiver": "s", "conn": "a", "ts": 2, "at": 2001},
    ]
    ours = replay(rows, o)
    assert ours == reference_replay(rows, o)
    # The GC at 70 raised the estimate to 64 and forgot a (upper = 1); the 193 GCs
    # of the gap changed nothing more.
    assert [row["verdict"] for row in ours] == ["accepted", "accepted", "accepted"]
    assert [row["rho"] for row in ours] == [1, 64, 64]
