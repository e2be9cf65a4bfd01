"""The declared measures (``timebound.measures``): each one's partial / merge / finish
gives the same value over any split of the rows merged in any order (Hypothesis); the
published ones are the contract's; a ratio over zero is null -- no row -- in the
simulator's metrics as in the pipeline's in-worker measures."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from timebound import contract, measures
from timebound.core.atmostonce import ReceiverConfig
from timebound.measures import AGGREGATES, Aggregate, Kind, Tally
from timebound.sim._dataset import DatasetWriter
from timebound.sim._links import Constant
from timebound.sim.scenarios._amo import AmoRun, NetConfig, open_messages, write_metrics
from timebound.spark.traces._partial_metrics import Gathered, GroupGatherer

_maybe_int = st.one_of(st.none(), st.integers(-50, 500))
ROWS = st.lists(st.fixed_dictionaries({
    "verdict": st.sampled_from([*contract.VERDICTS, None]),
    "original": st.sampled_from([True, False, None]),
    "entries": _maybe_int, "lifetime": _maybe_int, "latency": _maybe_int,
    "ack_bytes": _maybe_int, "value": _maybe_int,
    "action": st.sampled_from([*contract.MERGE_ACTIONS, None]),
    "type": st.sampled_from(["send", "ack", "recv", None]),
    "delivered": st.sampled_from([True, False, None]),
    "accepted": st.integers(0, 2),
    "receiver": st.sampled_from(["a", "b", None]), "cls": st.integers(0, 1),
    "conn": st.sampled_from(["x", "y"]), "ts": st.integers(0, 3), "rho": _maybe_int,
}), max_size=40)


def _uses_last(measure: Aggregate) -> bool:
    parts = measure.parts if measure.kind is Kind.RATIO else (measure,)
    return any(p.kind is Kind.LAST for p in parts)


@settings(max_examples=150, deadline=None)
@given(rows=ROWS, cuts=st.lists(st.integers(0, 40), max_size=6), seed=st.integers(0, 99))
def test_every_measure_merges_the_same_in_any_split(rows: list[dict[str, Any]],
                                                    cuts: list[int], seed: int) -> None:
    order = list(range(len(rows)))  # ``seq``: unique, in any order (LAST_BY's ``by``)
    random.Random(seed + 1).shuffle(order)
    rows = [{**row, "seq": n} for row, n in zip(rows, order)]
    bounds = [0, *sorted(min(c, len(rows)) for c in cuts), len(rows)]
    chunks = [rows[a:b] for a, b in zip(bounds, bounds[1:])]
    for measure in AGGREGATES:
        whole = measure.finish(measure.partial(rows))
        partials = [measure.partial(chunk) for chunk in chunks]
        merged = partials[0]
        for partial in partials[1:]:
            merged = measure.merge(merged, partial)
        assert measure.finish(merged) == whole, measure.name
        if not _uses_last(measure):  # LAST merges in row order; the others in any
            random.Random(seed).shuffle(partials)
            merged = partials[0]
            for partial in partials[1:]:
                merged = measure.merge(merged, partial)
            assert measure.finish(merged) == whole, (measure.name, "shuffled")
        if measure.kind is not Kind.RATIO:  # one row at a time, as the simulator adds
            running = measure.partial([])
            for row in rows:
                running = measure.add(running, row)
            assert measure.finish(running) == whole, (measure.name, "added")


#: Contract ratios finished by another declared measure (same formula), and the step
#: loads' ratios to 2 x2 (the divisor is never 0: x2 >= 1 tick).
FINISHED_AS = {"lost_over_accepted": "lost_per_accepted",
               "lost_per_accepted_at_<pct>pct": "lost_per_accepted"}
UNDECLARED = {"step_estimate_over_2x2", "step_final_over_2x2"}


def test_last_by_and_repeated_finish_what_they_declare() -> None:
    rows = [{"receiver": "a", "cls": 0, "seq": 3, "entries": 5, "rho": 7},
            {"receiver": "a", "cls": 0, "seq": 9, "entries": None, "rho": 8},
            {"receiver": "b", "cls": 0, "seq": 4, "entries": 2, "rho": None}]
    assert measures.aggregate("atmostonce", "estimate_final").finish(
        measures.aggregate("atmostonce", "estimate_final").partial(rows)) == 8.0
    assert measures.aggregate("atmostonce", "table_size").finish(
        measures.aggregate("atmostonce", "table_size").partial(rows)) == 7.0
    assert measures.aggregate("atmostonce", "estimate").finish(
        measures.aggregate("atmostonce", "estimate").partial(rows)) == 7.0
    twice = measures.aggregate("atmostonce", "at_most_once_violations")
    copy = {"verdict": "accepted", "receiver": "a", "conn": "x", "ts": 1}
    assert twice.finish(twice.partial([])) is None
    assert twice.finish(twice.partial([copy, {**copy, "ts": 2}])) == 0.0
    assert twice.finish(twice.partial([copy, {**copy, "verdict": "stale"}, copy])) == 1.0
    assert Tally("atmostonce", ("at_most_once_violations",)).finish(twice.name) == 0.0


def test_published_measures_are_the_contracts() -> None:
    for measure in AGGREGATES:
        if measure.published:
            found = contract.measure(measure.protocol, measure.name)
            assert found is not None, (measure.protocol, measure.name)
    for protocol, defined in contract.MEASURES.items():
        for m in defined:
            if m.unit == "ratio" and m.name not in UNDECLARED:
                name = FINISHED_AS.get(m.name, m.name)
                assert measures.aggregate(protocol, name).kind is Kind.RATIO, m.name
    for name in ("lost_rate", "lost_per_accepted", "table_mean", "never_accepted_rate"):
        assert measures.aggregate("atmostonce", name).kind is Kind.RATIO
    assert measures.aggregate("merge", "late_rate").kind is Kind.RATIO
    assert measures.aggregate("stability", "ack_bytes_per_ack").kind is Kind.RATIO


def test_a_ratio_over_zero_is_null() -> None:
    assert measures.ratio(0, 0) is None and measures.ratio(3, None) is None
    assert measures.ratio(None, 2) is None and measures.ratio(1, 4, times=100.0) == 25.0
    tally = Tally("atmostonce", ("lost", "accepted", "originals"))
    assert tally.finish("lost_per_accepted") is None and tally.finish("lost") == 0.0
    tally.add({"verdict": "stale", "original": True})
    assert tally.finish("lost_rate") == 1.0 and tally.finish("lost_per_accepted") is None


def _amo_run(folder: str) -> tuple[DatasetWriter, AmoRun]:
    ds = DatasetWriter(folder)
    opts = ReceiverConfig(rho=1000, gc_every=100)
    open_messages(ds, [opts])
    net = NetConfig(clients=0, servers=1, calls=1, gap=Constant(1), spread=1,
                    delay=Constant(1), loss=0.0, duplicate=0.0, reorder=0.0,
                    reorder_extra=0, timeout=10, retries=1, epsilon=1, drift_ppm=0.0,
                    resync=1000)
    return ds, AmoRun(ds, "z", net, opts, random.Random(1), 1000)


def test_simulator_and_pipeline_leave_a_ratio_over_zero_null(tmp_path: Any) -> None:
    """Nothing accepted, no original judged: lost_rate and lost_per_accepted are null
    -- no row -- in the simulator's metrics table and in the pipeline's (the gathered
    path; tests/test_pipeline_partial_metrics.py checks it equals the SQL's)."""
    ds, sim = _amo_run(str(tmp_path / "sim"))
    sim.execute()
    rows = sim.metrics()
    got = {m: v for m, v, t in rows if t is None}
    assert got["lost_rate"] is None and got["lost_per_accepted"] is None
    assert got["never_accepted_rate"] is None and got["table_mean"] is None
    assert got["lost"] == 0.0
    write_metrics(ds, "z", "atmostonce", rows)
    ds.commit({"runs": []})
    table = pq.read_table(tmp_path / "sim" / "metrics").to_pylist()
    written = {r["measure"] for r in table}
    assert "lost" in written and not written & {"lost_rate", "lost_per_accepted"}

    decided = pa.table({
        "run": ["z"] * 3, "seq": [1, 2, 3], "type": ["msg"] * 3, "receiver": ["s"] * 3,
        "conn": ["x", "y", "x"], "ts": [5, 6, 5], "at": [10, 11, 12],
        "original": [True, True, False], "verdict": ["down", "down", "stale"],
        "rho": pa.array([None, None, 9], pa.int64()),
        "entries": pa.array([None, None, 0], pa.int64()), "cls": [0] * 3})
    group = GroupGatherer((10, 12))
    group.add(decided)
    gathered = Gathered(SimpleNamespace(value={("z", "s", 0): group.finish()}),  # type: ignore[arg-type]
                        {"z": (10, 12)})
    piped = {r[2]: r[3] for r in gathered.rows() if r[4] is None}
    assert piped["lost"] == 0.0 and piped["originals"] == 0.0
    assert "lost_rate" not in piped and "lost_per_accepted" not in piped
