"""The stability scenario's measured rows: ack bytes as the live group
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
from timebound.sim._reproduce import scalars
from timebound.sim.scenarios.stability import skew_offsets

SIZES = (2, 3, 5, 12)
#: long enough for a few acks per receiver after the start (skew + 1 ticks)
DURATION = 40_000


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("stability") / "acks"
    run_scenario("stability", str(out), seed=5, params={
        "modes": "sweep", "sizes": ",".join(map(str, SIZES)), "duration": str(DURATION),
        "variants": "timestamp,vector", "uneven": "1"})
    return out


def test_wire_bytes_are_the_group_encoding(sweep: Path) -> None:
    metrics = scalars(str(sweep))
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
        metrics = scalars(str(out))
        assert set(metrics) == {"N=2/timestamp-skewed", "N=3/timestamp-skewed"}
        for run in metrics:
            assert metrics[run]["offset_spread"] == 10_000
        # evenly spread: the clocks run ahead of the slowest by skew/2 on average
        assert metrics["N=2/timestamp-skewed"]["offset_above_slowest_mean"] == 5_000
        assert metrics["N=3/timestamp-skewed"]["offset_above_slowest_mean"] == 5_000


# -- the rows' checks (timebound.claims) ---------------------------------------------

def _stability_runs(wire: dict[int, tuple[float, float]],
                    mean_plus: float = 4.0) -> dict[str, dict[str, float]]:
    """Runs of the stability job: per N, (timestamp, vector) wire bytes per second,
    and a skewed run whose mean latency is ``mean_plus`` ms above the synchronized one
    (offsets spread 20 ms, 10 ms above the slowest clock on average)."""
    runs: dict[str, dict[str, float]] = {}
    for n, (ts, vec) in wire.items():
        runs[f"N={n}/timestamp"] = {"ack_wire_bytes_per_s": ts, "latency_mean": 40_000.0,
                                    "latency_max": 80_000.0}
        runs[f"N={n}/vector"] = {"ack_wire_bytes_per_s": vec}
        runs[f"N={n}/timestamp-skewed"] = {
            "latency_mean": 40_000.0 + 1000 * mean_plus, "latency_max": 90_000.0,
            "offset_spread": 20_000.0, "offset_above_slowest_mean": 10_000.0}
    return runs


def _wire(n: int, per_ack_vector: float | None = None) -> tuple[float, float]:
    """The wire bytes of N receivers acking 1000 times a second, names s1..sN."""
    vector = len(encode_ack(VectorAck("r1", {f"s{i + 1}": 1 for i in range(n)})))
    return 9000.0 * n, 1000.0 * n * (vector if per_ack_vector is None else per_ack_vector)


def _row(sources: dict[str, dict[str, dict[str, float]]], text: str) -> str:
    from timebound.claims import evaluate

    rows = evaluate([sources] * 3, only=["stability"])
    return next(r for r in rows if text in r.claim).verdict


def test_bandwidth_row_is_measured_and_can_fail() -> None:
    good = {n: _wire(n) for n in (2, 4, 8)}
    assert _row({"stability": _stability_runs(good)}, "bandwidth") == "agrees"
    # the larger N of the stability-acks job join the row
    wide = {"stability": _stability_runs(good),
            "stability-acks": _stability_runs({n: _wire(n) for n in (16, 32)})}
    assert _row(wide, "bandwidth") == "agrees"
    # a vector ack of constant size (leaves senders out): vector / timestamp falls
    # below N_s at N = 8
    flat = {n: _wire(n, per_ack_vector=30) for n in (2, 4, 8)}
    assert _row({"stability": _stability_runs(flat)}, "bandwidth").startswith("differs")
    # a timestamp ack growing with the senders: bytes per receiver not flat in N
    growing = {n: (9000.0 * n * (1 + n / 8), _wire(n)[1] * (1 + n / 8)) for n in (2, 4, 8)}
    assert _row({"stability": _stability_runs(growing)}, "bandwidth").startswith("differs")
    # a wide job that disagrees is read too
    wide["stability-acks"] = _stability_runs({32: _wire(32, per_ack_vector=9 * 32 * 3)})
    assert _row(wide, "bandwidth").startswith("differs")
    # no wire bytes (a dataset written before the wire measure): not measured
    old = {"stability": {k: {m: x for m, x in v.items() if m != "ack_wire_bytes_per_s"}
                         for k, v in _stability_runs(good).items()}}
    assert _row(old, "bandwidth").startswith("not measured here")


def test_skew_row_needs_growth_beyond_its_share() -> None:
    good = {n: _wire(n) for n in (2, 4, 8)}
    assert _row({"stability": _stability_runs(good, mean_plus=3.0)}, "clock skew") == "agrees"
    # the old check (> 0) passed on any growth; a growth of 1 ms under 10 ms of clocks
    # ahead of the slowest is within the synchronized run's seed-to-seed noise
    small = _row({"stability": _stability_runs(good, mean_plus=1.0)}, "clock skew")
    assert small.startswith("differs (0 of 3 seeds agree)")
    # no skew at all cannot agree
    none = _stability_runs(good, mean_plus=0.0)
    for n in (2, 4, 8):
        none[f"N={n}/timestamp-skewed"].update(offset_spread=0.0,
                                               offset_above_slowest_mean=0.0)
    assert _row({"stability": none}, "clock skew").startswith("differs")
