"""Each scenario: small runs, determinism, the papers' qualitative claims, and that its
tables replay through ``timebound replay`` to the decisions the simulator recorded."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from timebound.sim import SCENARIOS, read_table, run_rows, run_scenario
from timebound.sim._replay import replay_run

SMALL: dict[str, dict[str, str]] = {
    "scmp": {"clients": "60", "calls": "4", "many_calls": "60", "rhos": "20000,200000,3200000",
             "crash_at": "1000000", "crash_down": "400000", "beta": "300000",
             "latest_every": "250000"},
    "adaptive": {"messages": "3000", "clients": "100", "loads": "bounded,spikes"},
    "slotted": {"duration": "600000", "slots": "2000,50000"},
    "stability": {"sizes": "2,3", "duration": "60000", "fig2_duration": "60"},
    "merge": {"duration": "1500", "publishers": "4", "deltas": "5,30"},
}


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("sim")
    out = {}
    for name, params in SMALL.items():
        out[name] = base / name
        run_scenario(name, str(out[name]), seed=3, params=params)
    return out


def _metrics(path: Path) -> dict[str, dict[str, float]]:
    got: dict[str, dict[str, float]] = {}
    for row in read_table(str(path), "metrics").to_pylist():
        if row["t"] is None:
            got.setdefault(row["run"], {})[row["measure"]] = row["value"]
    return got


def _digest(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", ["scmp", "slotted", "stability", "merge"])
def test_same_seed_same_bytes(name: str, datasets: dict[str, Path], tmp_path: Path) -> None:
    again = tmp_path / "again"
    run_scenario(name, str(again), seed=3, params=SMALL[name])
    assert _digest(again) == _digest(datasets[name])
    other = tmp_path / "other"
    run_scenario(name, str(other), seed=4, params=SMALL[name])
    assert _digest(other) != _digest(datasets[name])


def test_manifest_contract(datasets: dict[str, Path]) -> None:
    for name, path in datasets.items():
        manifest = json.loads((path / "manifest.json").read_text())
        assert manifest["scenario"] == name and manifest["seed"] == 3
        assert manifest["created_by"] == "timebound simulate"
        assert manifest["runs"] and manifest["claims"]
        # every parameter, but those of an experiment beyond the papers only when it ran
        experiments = str(manifest["params"].get("experiments", "")).split(",")
        assert set(manifest["params"]) == {p.name for p in SCENARIOS[name].params
                                           if p.only_for in (None, *experiments)}
        metrics = read_table(str(path), "metrics")
        assert metrics.column_names == ["run", "protocol", "measure", "value", "t"]


def test_scmp_claims(datasets: dict[str, Path]) -> None:
    m = _metrics(datasets["scmp"])
    assert all(v["at_most_once_violations"] == 0 for v in m.values())
    small, mid, big = (m[f"rho={r}"] for r in (20000, 200000, 3200000))
    assert small["lost_rate"] > mid["lost_rate"] >= big["lost_rate"]
    assert big["lost_rate"] == 0  # rho above the section 2.4 bound
    assert 3200000 >= big["bound_rho_min"]
    assert small["table_mean"] < mid["table_mean"] < big["table_mean"]
    assert m["many"]["table_peak"] == 1
    # slow clocks (skew within rho): flagged as duplicates more often (2.3)
    assert m["clients-slow"].get("rows_stale", 0) > m["clients-synced"].get("rows_stale", 0)
    assert m["clients-fast"]["rows_early"] > 0   # fast clocks: refused as too early
    assert m["crash"]["lost_after_crash_plus_beta"] == 0
    assert m["crash"]["rows_down"] > 0


def test_adaptive_claims(datasets: dict[str, Path]) -> None:
    m = _metrics(datasets["adaptive"])
    bounded = {e: m[f"bounded/{e}"] for e in ("small", "large", "unlimited", "limited")}
    assert bounded["small"]["lost_per_accepted"] > 0.05
    assert bounded["unlimited"]["estimate_over_true"] <= 2
    assert bounded["limited"]["estimate_over_true"] <= 2
    assert bounded["large"]["table_mean"] > bounded["unlimited"]["table_mean"]
    assert bounded["unlimited"]["lost_per_accepted"] < 0.01


def test_slotted_claims(datasets: dict[str, Path]) -> None:
    m = _metrics(datasets["slotted"])
    # scheme (b) buffer well below scheme (a) at slot length >= 20 ms
    assert m["b/Ts=50000"]["queue_mean"] * 4 < m["a/Ts=50000"]["queue_mean"]
    assert m["b/Ts=50000"]["fr_delay_ms"] < m["a/Ts=50000"]["fr_delay_ms"]
    for scheme in "ad":
        assert m[f"{scheme}/Ts=2000"]["discard_pct"] == 0  # reliable: nothing dropped


def test_stability_claims(datasets: dict[str, Path]) -> None:
    m = _metrics(datasets["stability"])
    assert m["fig2/vector"]["latency_max_s1"] <= 7
    assert m["fig2/vector"]["latency_max_s2"] <= 14
    assert m["fig2/timestamp"]["latency_max_s1"] <= 11
    for n in (2, 3):
        ratio = m[f"N={n}/vector"]["ack_bytes_per_s"] / m[f"N={n}/timestamp"]["ack_bytes_per_s"]
        assert ratio == pytest.approx(n, rel=0.05)


def test_merge_claims(datasets: dict[str, Path]) -> None:
    m = _metrics(datasets["merge"])
    for run in ("delta=5", "delta=30"):
        assert m[run]["order_mismatches"] == 0
        assert m[run]["max_buffering"] <= m[run]["buffering_bound"]
        assert m[run]["resets"] == 0
    assert m["delta=5"]["late_pct"] > m["delta=30"]["late_pct"]


def _runs(path: Path) -> list[str]:
    return [r["run"] for r in json.loads((path / "manifest.json").read_text())["runs"]]


def test_scmp_and_adaptive_replay_to_same_verdicts(datasets: dict[str, Path],
                                                  tmp_path: Path) -> None:
    for name in ("scmp", "adaptive"):
        for run in _runs(datasets[name]):
            status, out = replay_run(str(datasets[name]), "messages", run, str(tmp_path))
            assert status == 0, run
            sim = run_rows(str(datasets[name]), "sim_messages", run)
            assert [(o["verdict"], o.get("rho"), o.get("entries")) for o in out] == \
                [(s["verdict"], s["rho"], s["entries"]) for s in sim], run


def test_slotted_replays_to_same_actions(datasets: dict[str, Path], tmp_path: Path) -> None:
    for run in _runs(datasets["slotted"]):
        status, out = replay_run(str(datasets["slotted"]), "channel", run, str(tmp_path), "c1")
        assert status == 0
        sim = [r for r in read_table(str(datasets["slotted"]), "sim_channel").to_pylist()
               if r["run"] == run]
        assert [(o["id"], o["action"]) for o in out] == [(s["id"], s["action"]) for s in sim]


def test_stability_replays_to_same_answers(datasets: dict[str, Path], tmp_path: Path) -> None:
    for run in _runs(datasets["stability"]):
        status, out = replay_run(str(datasets["stability"]), "acks", run, str(tmp_path))
        assert status == 0
        sim = run_rows(str(datasets["stability"]), "sim_acks", run)
        for o, s in zip(out, sim, strict=True):
            if o["type"] == "recv":
                assert o["delivered"] == s["delivered"]
            if o["type"] == "ackrecv":
                assert o["stable"] == s["stable"]


def test_merge_replays_to_same_deliveries(datasets: dict[str, Path], tmp_path: Path) -> None:
    for run in _runs(datasets["merge"]):
        status, out = replay_run(str(datasets["merge"]), "arrivals", run, str(tmp_path))
        assert status == 0
        sim = [r for r in read_table(str(datasets["merge"]), "sim_arrivals").to_pylist()
               if r["run"] == run]

        def by_merger(rows: list[dict[str, Any]]) -> dict[str, list[tuple[Any, ...]]]:
            got: dict[str, list[tuple[Any, ...]]] = {}
            for r in rows:
                got.setdefault(r["merger"], []).append(
                    (r["msg"], r["proc"], r["action"], r["time"]))
            return got

        assert by_merger(out) == by_merger(sim)


def test_output_written_atomically_and_replaced(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    run_scenario("stability", str(out), params={"modes": "fig2", "fig2_duration": "30"})
    first = _digest(out)
    run_scenario("stability", str(out), params={"modes": "fig2", "fig2_duration": "40"})
    assert _digest(out) != first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "file.txt").write_text("x")
    from timebound.errors import UsageError
    with pytest.raises(UsageError, match="--out"):
        run_scenario("stability", str(tmp_path / "other"))


def test_scmp_crash_needs_the_gc_pause_of_section_2_4(tmp_path: Path) -> None:
    """Crash longer than rho: the figures' GC strands pending retransmissions; the
    receiver's recovery_grace keeps every message sent after t_cr + beta."""
    run_scenario("scmp", str(tmp_path / "ds"), seed=3,
                 params={"experiments": "crash", "clients": "300"})
    m = _metrics(tmp_path / "ds")
    assert m["crash"]["lost_after_crash_plus_beta"] > 0
    assert m["crash-grace"]["lost_after_crash_plus_beta"] == 0
    assert m["crash-grace"]["sent_after_crash_plus_beta"] == m["crash"]["sent_after_crash_plus_beta"]
    assert m["crash-grace"]["at_most_once_violations"] == 0
