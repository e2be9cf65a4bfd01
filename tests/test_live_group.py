"""The group service's live checks (``timebound.net.live group``): live
members on loopback UDP with timestamp and vector acks, read by the stability rows'
live column (``claims._live_group``).

One quick measurement (seed 1, N = 2 and 4) serves every test: its runs carry the
measures the live checks read; the bandwidth check passes on them and fails on acks
that do not scale as the paper says; the latency check fails on what the live members
measure, for the measured cause its ``why`` states (about one ack period more with
timestamp acks, while the loopback delivery is a small part of that period), and
passes on latencies that are only slightly larger.
"""

from __future__ import annotations

import pytest

import timebound.claims as claims
from timebound.claims._live_group import JOB, JOBS, LIVE
from timebound.net._live_group import MODES, QUICK_SIZES, measure

pytestmark = pytest.mark.waits

Runs = dict[str, dict[str, float]]

BANDWIDTH = "ack bandwidth: timestamp O(N_r), vector O(N_r N_s)"
LATENCY = "timestamp latency only slightly larger than vector"
READ = ("ack_wire_bytes_per_s", "latency_mean", "latency_p99", "ack_every", "delivery_mean")


@pytest.fixture(scope="module")
def runs() -> Runs:
    return measure(1, True)


def _values(claim: str, runs: Runs) -> dict[str, float]:
    return {label: x for label, x, _ in LIVE[claim].measure({JOB: runs})}


def test_runs_have_what_the_checks_read(runs: Runs) -> None:
    assert JOBS == {JOB: "group"}
    assert set(runs) == {f"N={n}/{mode}" for n in QUICK_SIZES for mode in MODES}
    for name, v in runs.items():
        for measure_name in READ:
            assert v[measure_name] > 0, (name, measure_name)
        assert v["sent"] > 0 and v["stable"] == v["sent"] and v["unstable"] == 0, name
    # the same traffic in both modes
    for n in QUICK_SIZES:
        assert runs[f"N={n}/timestamp"]["sent"] == runs[f"N={n}/vector"]["sent"]


def test_keys_name_rows_of_the_table() -> None:
    rows = {c.claim: c for c in claims.CLAIMS}
    for claim in LIVE:
        assert claim in rows
        assert rows[claim].live is LIVE[claim]


def test_bandwidth_check_passes_on_the_live_acks(runs: Runs) -> None:
    v = _values(BANDWIDTH, runs)
    assert LIVE[BANDWIDTH].check(v), v
    # a timestamp ack is 9 B on the wire, one per member per ack period
    per_receiver = [x for k, x in v.items() if k.endswith("per receiver")]
    period = runs["N=2/timestamp"]["ack_every"] / 1e6
    assert all(x == pytest.approx(9 / period, rel=0.1) for x in per_receiver)


def _scaled(runs: Runs, run: str, factor: float) -> Runs:
    out = {k: dict(v) for k, v in runs.items()}
    out[run]["ack_wire_bytes_per_s"] *= factor
    return out


def test_bandwidth_check_fails_on_acks_that_break_the_claim(runs: Runs) -> None:
    check = LIVE[BANDWIDTH].check
    # the timestamp ack grows with N (the vector ack's ratio kept)
    grown = _scaled(_scaled(runs, "N=4/timestamp", 2.0), "N=4/vector", 2.0)
    assert not check(_values(BANDWIDTH, grown))
    # the vector ack no larger than the timestamp ack (entries left out)
    flat = {k: dict(v) for k, v in runs.items()}
    for n in QUICK_SIZES:
        flat[f"N={n}/vector"]["ack_wire_bytes_per_s"] = \
            flat[f"N={n}/timestamp"]["ack_wire_bytes_per_s"]
    assert not check(_values(BANDWIDTH, flat))
    # the vector ack growing as N_s squared
    assert not check(_values(BANDWIDTH, _scaled(runs, "N=4/vector", 4.0)))


def test_latency_check_fails_live_for_the_measured_cause(runs: Runs) -> None:
    v = _values(LATENCY, runs)
    assert not LIVE[LATENCY].check(v), v
    # timestamp acks wait for every member's next heartbeat: a large part of an ack
    # period more than vector acks (at one size at least: a burst of load on this
    # machine may slow one run), while delivery takes a small part of it
    assert max(v[f"N={n} timestamp - vector, ack periods"] for n in QUICK_SIZES) >= 0.3, v
    for n in QUICK_SIZES:
        assert v[f"N={n} delivery"] < v[f"N={n} ack period"] / 4, v
        assert v[f"N={n} timestamp p99"] >= v[f"N={n} timestamp"]


def test_latency_check_passes_on_slightly_larger_latencies(runs: Runs) -> None:
    slight = {k: dict(v) for k, v in runs.items()}
    for n in QUICK_SIZES:
        slight[f"N={n}/timestamp"]["latency_mean"] = \
            1.2 * slight[f"N={n}/vector"]["latency_mean"]
    assert LIVE[LATENCY].check(_values(LATENCY, slight))
    for n in QUICK_SIZES:  # smaller than vector: differs too
        slight[f"N={n}/timestamp"]["latency_mean"] = \
            0.8 * slight[f"N={n}/vector"]["latency_mean"]
    assert not LIVE[LATENCY].check(_values(LATENCY, slight))


def test_latency_cause_quotes_the_runs(runs: Runs) -> None:
    """The live latency row's cause is computed from the runs: each figure it quotes
    is the runs' own, and it follows a change of them."""
    why = LIVE[LATENCY].why
    assert callable(why)
    v = _values(LATENCY, runs)
    text = why([{JOB: runs}])
    period = {f"{v[f'N={n} ack period']:.0f}" for n in QUICK_SIZES}
    assert len(period) == 1 and f"ack period ({period.pop()} ms)" in text, text
    extra = [v[f"N={n} timestamp - vector, ack periods"] for n in QUICK_SIZES]
    assert f"{min(extra):.2f}" in text and f"{max(extra):.2f}" in text, text
    slower = {k: dict(x) for k, x in runs.items()}
    for n in QUICK_SIZES:
        slower[f"N={n}/timestamp"]["latency_mean"] = 3 * slower[f"N={n}/vector"]["latency_mean"]
    assert "3.00x the vector acks' mean latency" in why([{JOB: slower}])
    assert why([{JOB: slower}]) != text
