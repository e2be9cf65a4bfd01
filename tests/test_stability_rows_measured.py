"""The stability scenario's measured rows (issue 32): ack bytes as the live group
encodes them, and clock skew of an exact, controlled spread.

- ``ack_wire_bytes_per_s`` is the number of acks times ``len(encode_ack(ack))``, the
  group's own encoding (``docs/wire.md``): 9 B per timestamp ack at every N, 3 B plus
  1 + name + 8 B per sender for a vector ack.
- The skewed run's offsets are spread evenly over ``[-skew/2, skew/2]``, spread exactly
  ``skew`` for every N >= 2 and every seed, dealt to the senders in a per-seed order.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from timebound.core.group import decode, encode_ack
from timebound.core.stability import TimestampAck, VectorAck
from timebound.sim import read_table, run_scenario
from timebound.sim.scenarios.stability import skew_offsets

SIZES = (2, 3, 5, 12)
#: long enough for a few acks per receiver after the start (skew + 1 ticks)
DURATION = 40_000


def _metrics(path: Path) -> dict[str, dict[str, float]]:
    got: dict[str, dict[str, float]] = {}
    for row in read_table(str(path), "metrics").to_pylist():
        if row["t"] is None:
            got.setdefault(row["run"], {})[row["measure"]] = row["value"]
    return got


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("stability") / "acks"
    run_scenario("stability", str(out), seed=5, params={
        "modes": "sweep", "sizes": ",".join(map(str, SIZES)), "duration": str(DURATION),
        "variants": "timestamp,vector", "uneven": "1"})
    return out


def test_wire_bytes_are_the_group_encoding(sweep: Path) -> None:
    metrics = _metrics(sweep)
    acks = Counter(row["run"] for row in read_table(str(sweep), "acks").to_pylist()
                   if row["type"] == "ack")
    assert set(metrics) == {f"N={n}/{v}" for n in SIZES for v in ("timestamp", "vector")}
    for n in SIZES:
        senders = {f"s{i + 1}": 1 for i in range(n)}
        # the layout of docs/wire.md, spelled out: the encoding is the one measured
        assert len(encode_ack(TimestampAck("r1", 1))) == 9
        vector = VectorAck("r1", senders)
        assert len(encode_ack(vector)) == 3 + sum(1 + len(s) + 8 for s in senders)
        for run, ack in ((f"N={n}/timestamp", TimestampAck("r1", 1)),
                         (f"N={n}/vector", vector)):
            m = metrics[run]
            seconds = acks[run] * ack.nbytes / m["ack_bytes_per_s"]  # run time, s
            assert acks[run] >= n  # every receiver acknowledged
            assert m["ack_wire_bytes_per_s"] * seconds == pytest.approx(
                acks[run] * len(encode_ack(ack)), rel=1e-9)
        ratio = (metrics[f"N={n}/vector"]["ack_wire_bytes_per_s"]
                 / metrics[f"N={n}/timestamp"]["ack_wire_bytes_per_s"])
        # the same acks in both runs: the ratio is the size ratio of one ack
        assert ratio == pytest.approx(len(encode_ack(vector)) / 9, rel=1e-9)
        assert 1 < ratio / n < 2


def test_encode_ack_is_the_heartbeats_ack() -> None:
    """The exported ``encode_ack`` is what a heartbeat carries: a heartbeat body ends
    with exactly these bytes and decodes back to the ack."""
    from timebound.core.group._wire import Head, encode_heartbeat

    for ack in (TimestampAck("r1", 77), VectorAck("r1", {"s2": 5, "s1": 9})):
        body = encode_heartbeat(Head("g", "r1", 1), 4, 2, 3, ack)
        assert body.endswith(encode_ack(ack))
        assert decode(body).ack == ack  # type: ignore[union-attr]


@pytest.mark.parametrize("skew", [0, 1, 7, 20_000, 20_001])
def test_skew_offsets_spread_exactly_skew(skew: int) -> None:
    orders: set[tuple[int, ...]] = set()
    for n in (1, 2, 3, 8, 33):
        for seed in range(1, 13):
            offsets = skew_offsets(n, skew, random.Random(f"{seed}/stability/{n}/offsets"))
            assert len(offsets) == n
            if n == 1:
                assert offsets == [0]
                continue
            assert max(offsets) - min(offsets) == skew
            assert min(offsets) == -(skew // 2)
            gaps = [b - a for a, b in zip(sorted(offsets), sorted(offsets)[1:])]
            assert max(gaps) - min(gaps) <= 1  # evenly spread
            if n == 8:
                orders.add(tuple(offsets))
    if skew > 0:
        assert len(orders) > 1  # the fast clock goes to a different sender per seed


def test_skewed_runs_record_the_spread(tmp_path: Path) -> None:
    for seed in (1, 2, 3):
        out = tmp_path / f"seed{seed}"
        run_scenario("stability", str(out), seed=seed, params={
            "modes": "sweep", "sizes": "2,3", "duration": "30000", "skew": "10000",
            "variants": "timestamp-skewed", "uneven": "1"})
        metrics = _metrics(out)
        assert set(metrics) == {"N=2/timestamp-skewed", "N=3/timestamp-skewed"}
        for run in metrics:
            assert metrics[run]["offset_spread"] == 10_000
        # evenly spread: the clocks run ahead of the slowest by skew/2 on average
        assert metrics["N=2/timestamp-skewed"]["offset_above_slowest_mean"] == 5_000
        assert metrics["N=3/timestamp-skewed"]["offset_above_slowest_mean"] == 5_000
