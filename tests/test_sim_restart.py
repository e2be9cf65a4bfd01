"""The ``scmp`` restart experiment (our extension): an immediate restart
decided by the paper's rule (run ``restart``) and with incarnation marks (run
``restart-marked``) on the same traffic; the ``marked`` column the simulator writes,
decided identically by ``timebound replay atmostonce``; the mark a message carries is
the one its client had when it made it (never a newer one on a retransmission); the
pipeline and the stream refuse marks; and the reproduction row can fail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from timebound import claims
from timebound.cli import main
from timebound.errors import SchemaError, TraceError
from timebound.sim import run_rows, run_scenario
from timebound.sim._replay import replay_run
from timebound.sim.scenarios import scmp

RUNS = ("restart", "restart-marked")
#: a small restart experiment (a second or so per dataset)
SMALL = {"experiments": "restart", "restart_clients": "12", "restart_callers": "3",
         "restart_calls": "80", "crash_at": "2000000"}
RESILIENT = ["--estimator", "fixed", "--rho", "1000000", "--gc-every", "50000",
             "--resilient", "--beta", "2000000", "--latest-every", "1000000"]


def _metrics(dataset: Path) -> dict[str, dict[str, float]]:
    got: dict[str, dict[str, float]] = {}
    for row in pq.read_table(dataset / "metrics").to_pylist():
        if row["t"] is None:
            got.setdefault(row["run"], {})[row["measure"]] = row["value"]
    return got


@pytest.fixture(scope="module")
def restart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("restart") / "ds"
    run_scenario("scmp", str(out), seed=5, params=SMALL)
    return out


def test_restart_experiment_marks_cut_the_outage(restart: Path) -> None:
    m = _metrics(restart)
    paper, marked = m["restart"], m["restart-marked"]
    # common random numbers: the two runs carry the same traffic
    for measure in ("messages_sent", "rows", "retransmissions", "events"):
        assert paper[measure] == marked[measure], measure
    assert paper["incarnation_marks"] == 0 and marked["incarnation_marks"] == 1
    assert paper["at_most_once_violations"] == marked["at_most_once_violations"] == 0
    # the paper's rule refuses for about beta after the restart, heard or not ...
    assert paper["refused_after_heard"] > 100
    assert paper["served_again_median"] > 500_000
    # ... marks refuse only what was sent before the client heard of the restart
    assert marked["refused_after_heard"] == 0
    assert marked["refused_unknown"] * 10 < paper["refused_unknown"]
    assert marked["not_served_again"] == paper["not_served_again"] == 0
    assert marked["served_after_heard_max"] <= marked["round_trip"]
    assert marked["served_again_max"] < paper["served_again_median"]
    manifest = json.loads((restart / "manifest.json").read_text())
    assert manifest["params"]["restart_down"] == 1000
    assert manifest["claims"][-1]["measure"] == "refused_after_heard"
    assert [r["run"] for r in manifest["runs"]] == list(RUNS)
    names = pq.read_schema(restart / "messages" / "part-00000.parquet").names
    assert names[-1] == "marked" and "reorder_window" not in names


def test_restart_parameters_stay_out_of_other_manifests(tmp_path: Path) -> None:
    run_scenario("scmp", str(tmp_path / "ds"), seed=1,
                 params={"experiments": "many", "many_calls": "20"})
    manifest = json.loads((tmp_path / "ds" / "manifest.json").read_text())
    assert not [k for k in manifest["params"] if k.startswith("restart_")]
    names = pq.read_schema(tmp_path / "ds" / "messages" / "part-00000.parquet").names
    assert "marked" not in names


def test_replay_decides_marked_rows_as_the_simulator(restart: Path, tmp_path: Path) -> None:
    for run in RUNS:
        status, out = replay_run(str(restart), "messages", run, str(tmp_path))
        sim = run_rows(str(restart), "sim_messages", run)
        assert status == 0
        assert [(o["verdict"], o["rho"], o["entries"]) for o in out] == \
            [(s["verdict"], s["rho"], s["entries"]) for s in sim], run
    # the command line on a Parquet file with the marked column (not the plain-column
    # fast path) and on JSON Lines; without the column the verdicts differ
    rows = run_rows(str(restart), "messages", "restart-marked")
    fields = ("type", "receiver", "conn", "ts", "at", "down", "marked")
    pq.write_table(pa.Table.from_pylist([{k: r[k] for k in fields} for r in rows]),
                   tmp_path / "in.parquet")
    with open(tmp_path / "in.jsonl", "w", encoding="utf-8") as trace, \
            open(tmp_path / "unmarked.jsonl", "w", encoding="utf-8") as unmarked:
        for r in rows:
            row = {k: r[k] for k in fields if r[k] is not None}
            trace.write(json.dumps(row) + "\n")
            row.pop("marked", None)
            unmarked.write(json.dumps(row) + "\n")
    simulated = [s["verdict"] for s in run_rows(str(restart), "sim_messages",
                                                "restart-marked")]
    for name in ("in.parquet", "in.jsonl"):
        assert main(["replay", "atmostonce", "-i", str(tmp_path / name), "-o",
                     str(tmp_path / f"{name}.out.jsonl"), *RESILIENT]) == 0
        with open(tmp_path / f"{name}.out.jsonl", encoding="utf-8") as fh:
            assert [json.loads(line)["verdict"] for line in fh] == simulated, name
    assert main(["replay", "atmostonce", "-i", str(tmp_path / "unmarked.jsonl"), "-o",
                 str(tmp_path / "unmarked.out.jsonl"), *RESILIENT]) == 0
    with open(tmp_path / "unmarked.out.jsonl", encoding="utf-8") as fh:
        assert [json.loads(line)["verdict"] for line in fh] != simulated


def test_a_bad_mark_is_a_trace_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                     ) -> None:
    trace = tmp_path / "bad.jsonl"
    trace.write_text('{"type":"msg","receiver":"s1","conn":"c1","ts":5,"at":6,'
                     '"marked":"yes"}\n')
    assert main(["replay", "atmostonce", "-i", str(trace), "-o", str(tmp_path / "o.jsonl"),
                 "--rho", "10", "--gc-every", "5"]) == 2
    assert "field 'marked': expected true or false" in capsys.readouterr().err


def test_every_marked_refusal_was_unmarked_by_the_deciding_incarnation(
        restart: Path) -> None:
    """A refused message of the marked run was refused on rows that were not marked
    with the incarnation deciding them; the paper's run marks nothing."""
    assert not any(r["marked"] for r in run_rows(str(restart), "messages", "restart"))
    rows = run_rows(str(restart), "messages", "restart-marked")
    verdicts = {s["seq"]: s["verdict"] for s in run_rows(str(restart), "sim_messages",
                                                         "restart-marked")}
    refused = [r for r in rows if verdicts.get(r["seq"]) in ("stale", "early")]
    assert refused and all(r["marked"] is False for r in refused)
    assert sum(1 for r in rows if r["marked"]) > len(rows) // 2


class _Recording(scmp.RestartRun):
    """Remembers what each message's client had heard of when it made the message,
    and when each copy arrived (by the run's row ``seq``)."""

    heard_at_creation: dict[tuple[str, str, int], int | None] = {}
    heard_at_arrival: dict[tuple[str, int], int | None] = {}

    def _send(self, arg: tuple[int, int]) -> None:
        heard = self.heard[arg[0] // self.callers]
        super()._send(arg)
        msg = self.msgs[-1]
        self.heard_at_creation[(self.run, msg.conn, msg.ts)] = heard

    def _arrive(self, packet: scmp.Packet) -> bool:
        self.heard_at_arrival[(self.run, self.seq + 1)] = self.heard[packet.payload.client]
        return super()._arrive(packet)


def test_a_retransmission_keeps_its_first_mark(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Through a lossy network (many retransmissions, some after another caller of
    the client heard of the restart), a row is marked iff what its client had heard
    of *when it made the message* is the incarnation deciding the row; marking a
    retransmission with the client's newer knowledge breaks this (and accepts twice a
    message the first incarnation had accepted)."""
    _Recording.heard_at_creation = {}
    _Recording.heard_at_arrival = {}
    monkeypatch.setattr(scmp, "RestartRun", _Recording)
    out = tmp_path / "lossy"
    run_scenario("scmp", str(out), seed=2, params={**SMALL, "loss": "0.25"})
    rows = run_rows(str(out), "messages", "restart-marked")
    crash = next(r["seq"] for r in rows if r["type"] == "crash")
    checked = sensitive = 0
    for r in rows:
        if r["type"] != "msg":
            continue
        heard = _Recording.heard_at_creation[("restart-marked", r["conn"], r["ts"])]
        deciding = 0 if r["seq"] < crash else 1
        assert r["marked"] == (heard == deciding), r
        checked += 1
        # a copy whose client had heard of the deciding incarnation by the time it
        # arrived, though not when it made the message: re-marking would mark it
        now = _Recording.heard_at_arrival[("restart-marked", r["seq"])]
        sensitive += now == deciding != heard
    assert checked > 1000 and sensitive >= 5
    m = _metrics(out)
    assert m["restart-marked"]["at_most_once_violations"] == 0
    assert m["restart-marked"]["retransmissions"] > 1000
    assert m["restart-marked"]["refused_after_heard"] == 0


def test_pipeline_and_stream_refuse_marks(restart: Path, tmp_path: Path) -> None:
    from timebound.pipeline.datasets import check_parquet_files
    from timebound.spark.traces._stream_schemas import source_schema
    from timebound.stream._source import read_file

    with pytest.raises(SchemaError, match="column 'marked'"):
        check_parquet_files("messages", str(restart / "messages"))
    schema = source_schema("messages")
    trace = tmp_path / "part-1.jsonl"
    trace.write_text('{"type":"msg","receiver":"s1","conn":"c1","ts":5,"at":6}\n'
                     '{"type":"msg","receiver":"s1","conn":"c1","ts":7,"at":8,'
                     '"marked":true}\n')
    assert list(read_file(str(trace), schema))  # not asked to refuse: read
    with pytest.raises(TraceError, match="part-1.jsonl:2: field 'marked'"):
        list(read_file(str(trace), schema, ("marked",)))
    with pytest.raises(TraceError, match="field 'marked'"):
        list(read_file(str(restart / "messages" / "part-00000.parquet"), schema,
                       ("marked",)))


def _restart_runs(**over: float) -> dict[str, dict[str, float]]:
    paper = {"refused_unknown_rate": 0.1, "refused_after_restart": 1800.0,
             "refused_after_heard": 1750.0, "served_again_median": 1_050_000.0,
             "served_again_max": 1_300_000.0, "at_most_once_violations": 0.0}
    marked = {"refused_unknown_rate": 0.005, "refused_after_restart": 45.0,
              "refused_after_heard": 0.0, "served_again_median": 70_000.0,
              "served_again_max": 250_000.0, "served_after_heard_max": 100_000.0,
              "round_trip": 286_000.0, "not_served_again": 0.0,
              "at_most_once_violations": 0.0}
    for key, value in over.items():
        run, _, measure = key.partition("__")
        (paper if run == "paper" else marked)[measure] = value
    return {"restart": paper, "restart-marked": marked}


def test_restart_row_is_ours_and_can_fail() -> None:
    def row(runs: dict[str, Any]) -> claims.Row:
        rows = claims.evaluate([{"scmp-restart": runs}] * 3, only=[claims.OURS])
        return next(r for r in rows if "incarnation marks" in r.claim)

    good = row(_restart_runs())
    assert good.paper == claims.OURS and good.verdict == "agrees" and good.seeds == 3
    assert "marked refused after hearing: 0" in good.measured
    assert "paper's rule served again median ms: 1050" in good.measured
    for bad in (_restart_runs(marked__refused_after_heard=1.0),    # a marked refusal
                _restart_runs(marked__served_after_heard_max=300_000.0),  # > round trip
                _restart_runs(marked__not_served_again=1.0),
                _restart_runs(paper__refused_after_heard=0.0),      # no outage to remove
                _restart_runs(marked__refused_unknown_rate=0.2),
                _restart_runs(marked__at_most_once_violations=1.0)):
        assert row(bad).verdict.startswith("differs (0 of 3 seeds agree)"), bad
    missing = claims.evaluate([{"scmp": {}}], only=[claims.OURS])
    assert next(r for r in missing if "incarnation marks" in r.claim).verdict.startswith(
        "not measured here")
