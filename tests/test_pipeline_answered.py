"""Placed receivers answer row for row (spark/traces/_atmostonce.py ``answered``): whatever
the batches, and for a partition sorted in the worker whatever order its rows arrive
in, each row gets the decision its run's replayer makes deciding the run in ``seq``
order (a row with no decision, a crash row, gets verdict code -1), with two runs
interleaved in one partition. No Spark: the worker's side alone (Hypothesis)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from tests.test_pipeline_atmostonce import generated
from tests.test_pipeline_partial_metrics import OPTIONS
from timebound.adapters import ATMOSTONCE
from timebound.adapters.atmostonce import AtMostOnceAdapter, AtMostOnceOptions
from timebound.columnar import NAMES as VERDICTS
from timebound.spark.traces import _atmostonce as atmostonce
from timebound.spark.traces import _columnar

RUNS = ("a", "c")  # a: resilient, 3 classes, crashes; c: limited horizon, 2 classes
RECEIVERS = ["s0", "s1"]
INPUT = pa.schema([("run", pa.string()), ("seq", pa.int64()), ("type", pa.string()),
                   ("receiver", pa.string()), ("conn", pa.string()), ("ts", pa.int64()),
                   ("at", pa.int64()), ("down", pa.int64())])
DECIDED = INPUT.append(pa.field("_row", pa.int64())).append(
    pa.field("verdict", pa.string())).append(pa.field("rho", pa.int64())).append(
    pa.field("entries", pa.int64())).append(pa.field("cls", pa.int64()))
OPTS = {run: AtMostOnceOptions.from_values(OPTIONS[run]) for run in RUNS}


def _rows() -> list[dict[str, Any]]:
    rows = []
    for run in RUNS:
        for line, row in enumerate(generated(ord(run), receivers=2, rows=160,
                                             crashes=run == "a"), start=1):
            rows.append(dict({"conn": None, "ts": None, "down": None}, **row, run=run,
                             seq=line))
    return sorted(rows, key=lambda r: r["seq"])  # seq order, the runs interleaved


ROWS = _rows()


def _expected() -> dict[tuple[str, int], tuple[int, Any, Any, int]]:
    """(run, seq) -> (verdict code, rho, entries, cls): each run decided alone."""
    want = {}
    for run in RUNS:
        table = pa.Table.from_pylist([r for r in ROWS if r["run"] == run], schema=INPUT)
        out = _columnar.atmostonce_group(
            AtMostOnceAdapter(OPTS[run]), f"messages[run {run!r}]", table, None,
            OPTS[run].classes, DECIDED.remove(DECIDED.get_field_index("_row")))
        for r in out.to_pylist():
            want[(run, r["seq"])] = (VERDICTS.index(r["verdict"]), r["rho"], r["entries"],
                                     r["cls"])
    return want


EXPECTED = _expected()


def _coded(rows: list[dict[str, Any]]) -> pa.RecordBatch:
    """A batch as the JVM sends it: run and receiver as int codes."""
    table = pa.Table.from_pylist(rows, schema=INPUT).combine_chunks()
    columns = [table[name].chunk(0) for name in INPUT.names]
    columns[0] = pa.array([RUNS.index(r["run"]) for r in rows], pa.int32())
    columns[3] = pa.array([RECEIVERS.index(r["receiver"]) for r in rows], pa.int32())
    return pa.RecordBatch.from_arrays(columns, names=INPUT.names)


@given(data=st.data())
def test_every_row_gets_its_runs_decision_in_the_order_it_came(data: Any) -> None:
    in_worker = data.draw(st.booleans(), label="sorted in the worker")
    # The JVM hands a partition it sorted in seq order; else the shuffle's order.
    arrived = data.draw(st.permutations(ROWS), label="arrival") if in_worker else ROWS
    size = data.draw(st.integers(1, len(ROWS)), label="batch rows")
    batches = [_coded(arrived[i:i + size]) for i in range(0, len(arrived), size)]
    names = atmostonce.Names({"run": list(RUNS), "receiver": RECEIVERS})
    plan = {run: (ATMOSTONCE, OPTS[run], OPTS[run].classes) for run in RUNS}
    decider = atmostonce.Decider(plan, DECIDED, None, names, whole=True)
    answers = list(atmostonce.answered(iter(batches), decider, in_worker))
    assert [len(a) for a in answers] == [b.num_rows for b in batches]
    got = [tuple(d.values()) for a in answers for d in a.to_pylist()]
    want = [EXPECTED.get((r["run"], r["seq"]), (-1, None, None, None)) for r in arrived]
    assert got == want
    assert sum(v == -1 for v, *_ in got) == sum(r["type"] == "crash" for r in ROWS) > 0
