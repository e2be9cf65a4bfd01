"""The column-wise at-most-once path (timebound.columnar, spark/traces/_columnar.py) decides
exactly as the row adapter's row path (the pure core, row by row), on generated traces:
every estimator, plain and resilient (crash rows), hash classes, malformed rows and
time going back (same error), split into several calls (state carried across)."""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from tests.test_atmostonce_replay_matches_reference import options, traces
from timebound.adapters import Row
from timebound.adapters.atmostonce import AtMostOnceAdapter, AtMostOnceOptions
from timebound.columnar import decide_table
from timebound.errors import TraceError
from timebound.spark.traces import _columnar

SCHEMA = pa.schema([("seq", pa.int64()), ("type", pa.string()), ("receiver", pa.string()),
                    ("conn", pa.string()), ("ts", pa.int64()), ("at", pa.int64()),
                    ("down", pa.int64())])
SOURCE = "messages[run 'r']"


def adapter(o: Any) -> AtMostOnceAdapter:
    values = {name: getattr(o, name) for name in (
        "estimator", "rho", "gc_every", "window", "spikes", "p", "resilient", "beta",
        "latest_every", "recovery_grace", "classes")}
    return AtMostOnceAdapter(AtMostOnceOptions.from_values(values))


def row_path(o: Any, rows: list[dict]) -> tuple[list[tuple], str | None, list]:
    a = adapter(o)
    out: list[tuple] = []
    try:
        for line, row in enumerate(rows, start=1):
            for produced in a.feed(Row(SOURCE, line, row)):
                out.append((line, produced["verdict"], produced["rho"], produced["entries"]))
    except TraceError as exc:  # the output is discarded: only the error counts
        return [], str(exc), []
    return out, None, a.summary()


def columnar(o: Any, rows: list[dict], cuts: list[int]) -> tuple[list[tuple], str | None, list]:
    a = adapter(o)
    table = pa.Table.from_pylist(
        [dict(row, seq=line) for line, row in enumerate(rows, start=1)], schema=SCHEMA)
    out: list[tuple] = []
    bounds = [0, *sorted(c for c in cuts if 0 < c < len(rows)), len(rows)]
    try:
        for start, stop in zip(bounds, bounds[1:]):
            part = table.slice(start, stop - start)
            lines = part.column("seq").to_numpy()
            part_rows = part.to_pylist()

            def feed(i: int, part_rows: list[dict] = part_rows,
                     lines: np.ndarray = lines) -> list[Any]:
                data = {k: v for k, v in part_rows[i].items() if v is not None and k != "seq"}
                return list(a.feed(Row(SOURCE, int(lines[i]), data)))

            decided = decide_table(a, SOURCE, part, lines, feed)
            out += list(zip((int(lines[i]) for i in decided.keep),
                            decided.verdict.to_pylist(), decided.rho.to_pylist(),
                            decided.entries.to_pylist()))
    except TraceError as exc:  # the output is discarded: only the error counts
        return [], str(exc), []
    return out, None, a.summary()


@st.composite
def spoiled(draw, rows: list[dict]) -> list[dict]:
    """Maybe one malformed field or one row going back in time."""
    rows = [dict(r) for r in rows]
    how = draw(st.sampled_from(["none", "none", "empty_conn", "ts0", "back", "neg_at"]))
    messages = [i for i, r in enumerate(rows) if r["type"] == "msg"]
    if how == "none" or not messages:
        return rows
    i = draw(st.sampled_from(messages))
    if how == "empty_conn":
        rows[i]["conn"] = ""
    elif how == "ts0":
        rows[i]["ts"] = 0
    elif how == "neg_at":
        rows[i]["at"] = -1
    else:
        rows[i]["at"] = max(0, rows[i]["at"] - draw(st.integers(1, 300)))
    return rows


@given(data=st.data())
def test_columnar_equals_row_path(data: Any) -> None:
    o = data.draw(options())
    rows = data.draw(spoiled(data.draw(traces(o.resilient))))
    cuts = data.draw(st.lists(st.integers(0, len(rows)), max_size=3))
    assert columnar(o, rows, cuts) == row_path(o, rows)


@given(data=st.data())
def test_spark_group_equals_row_path(data: Any) -> None:
    """One (run, receiver, cls) group as Spark hands it (any row order, crash rows
    copied to every class) -> the rows the adapter decides for that class."""
    o = data.draw(options())
    rows = data.draw(traces(o.resilient))
    k = o.classes
    name = rows[0]["receiver"]
    cls = data.draw(st.integers(0, k - 1))
    mine = [dict(r, seq=line) for line, r in enumerate(rows, start=1)
            if r["receiver"] == name and (r["type"] == "crash"
                                          or zlib.crc32(r["conn"].encode()) % k == cls)]
    expected, error, _ = row_path(o, [{k2: v for k2, v in r.items() if k2 != "seq"}
                                      for r in mine])
    assert error is None
    table = pa.Table.from_pylist(mine, schema=SCHEMA)
    assume(mine)  # Spark never hands over an empty group
    table = table.take(pa.array(data.draw(st.permutations(range(len(mine)))), pa.int64()))
    table = table.append_column("cls", pa.array([cls] * len(mine), pa.int64()))
    schema = SCHEMA.append(pa.field("verdict", pa.string())).append(
        pa.field("rho", pa.int64())).append(pa.field("entries", pa.int64())).append(
        pa.field("cls", pa.int64()))
    out = _columnar.atmostonce_group(adapter(o), SOURCE, table, cls, k, schema)
    got = out.to_pylist()
    assert [r["seq"] for r in got] == [mine[line - 1]["seq"] for line, *_ in expected]
    assert [(r["verdict"], r["rho"], r["entries"]) for r in got] == \
        [tuple(e[1:]) for e in expected]
    assert all(r["cls"] == cls for r in got)


def test_hand_trace_fast_segments_around_a_crash() -> None:
    """Crash rows split the table; the rows on both sides take the fast path."""

    class Hand:
        estimator, rho, gc_every, window, spikes, p = "fixed", 100, 10, None, None, None
        resilient, beta, latest_every, recovery_grace, classes = True, 50, 20, None, 2

    rows = [{"type": "msg", "receiver": "s", "conn": f"c{i % 3}", "ts": 5 + i, "at": 10 + i}
            for i in range(20)]
    rows.insert(10, {"type": "crash", "receiver": "s", "at": 19, "down": 5})
    a = adapter(Hand)
    table = pa.Table.from_pylist([dict(r, seq=i) for i, r in enumerate(rows, 1)], schema=SCHEMA)
    lines = table.column("seq").to_numpy()
    pyrows = table.to_pylist()
    decided = decide_table(a, SOURCE, table, lines, lambda i: list(a.feed(Row(
        SOURCE, int(lines[i]), {k: v for k, v in pyrows[i].items() if v is not None}))))
    assert (decided.fast_rows, decided.slow_rows) == (20, 1)
    assert columnar(Hand, rows, [])[0] == row_path(Hand, rows)[0]
    assert "down" in decided.verdict.to_pylist()


@pytest.mark.parametrize("path", ["columns", "rows"])
def test_a_connection_routed_to_another_class_stops_the_group(path: str) -> None:
    """Spark's crc32 and the core's classifier must agree on every connection: a row
    routed to a class the core would not give it raises, naming it, on the column-wise
    path (each distinct id) and on the row path (each message)."""

    class Hand:
        estimator, rho, gc_every, window, spikes, p = "fixed", 100, 10, None, None, None
        resilient, beta, latest_every, recovery_grace, classes = False, None, None, None, 4

    k = Hand.classes
    conns = [f"c{i}" for i in range(40)]
    mine = [c for c in conns if zlib.crc32(c.encode()) % k == 1]
    stray = next(c for c in conns if zlib.crc32(c.encode()) % k != 1)
    rows = [{"seq": i + 1, "type": "msg", "receiver": "s", "conn": mine[i % len(mine)],
             "ts": 5 + i, "at": 10 + i} for i in range(12)]
    rows[6]["conn"] = stray
    if path == "rows":
        rows[9]["ts"] = 0  # a malformed row later on: the segment takes the row path
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    table = table.append_column("cls", pa.array([1] * len(rows), pa.int64()))
    schema = SCHEMA.append(pa.field("verdict", pa.string())).append(
        pa.field("rho", pa.int64())).append(pa.field("entries", pa.int64())).append(
        pa.field("cls", pa.int64()))
    with pytest.raises(AssertionError, match=f"class 1 differs .* for conn '{stray}'"):
        _columnar.atmostonce_group(adapter(Hand), SOURCE, table, 1, k, schema)
    rows[6]["conn"] = mine[0]  # routed right: decided (the row path's error, if malformed)
    table = pa.Table.from_pylist(rows, schema=SCHEMA).append_column(
        "cls", pa.array([1] * len(rows), pa.int64()))
    if path == "rows":
        with pytest.raises(TraceError, match="ts"):
            _columnar.atmostonce_group(adapter(Hand), SOURCE, table, 1, k, schema)
    else:
        out = _columnar.atmostonce_group(adapter(Hand), SOURCE, table, 1, k, schema)
        assert out.num_rows == len(rows)


@pytest.mark.parametrize("span", [None, 3])
def test_partition_stream_equals_each_group_alone(monkeypatch: pytest.MonkeyPatch,
                                                  span: int | None) -> None:
    """One partition as the operator streams it (two runs, two receivers, classes,
    crash rows copied to every class, cut into batches) decides each (run, receiver,
    cls) group exactly as that group decided alone; also when the group codes must be
    renumbered on the way (``span``: a tiny bound forces it)."""
    from tests.test_pipeline_atmostonce import generated
    from timebound.adapters import ATMOSTONCE
    from timebound.spark.traces import _atmostonce as atmostonce

    if span is not None:
        monkeypatch.setattr(atmostonce, "_SPAN", span)
    runs = {"a": {"estimator": "fixed", "rho": 60, "gc_every": 9, "classes": 3,
                  "resilient": True, "beta": 40, "latest_every": 25},
            "b": {"estimator": "unlimited", "gc_every": 5, "classes": 2}}
    options = {run: AtMostOnceOptions.from_values(v) for run, v in runs.items()}
    schema = pa.schema([("run", pa.string()), *SCHEMA, ("cls", pa.int64())])
    rows = []
    for run, values in runs.items():
        k = values["classes"]
        for line, row in enumerate(generated(len(run), receivers=2, rows=300,
                                             crashes="beta" in values), start=1):
            for cls in (range(k) if row["type"] == "crash"
                        else [zlib.crc32(row["conn"].encode()) % k]):
                rows.append(dict(row, run=run, seq=line, cls=cls))
    rows.sort(key=lambda r: r["seq"])  # the JVM's order: by seq, groups interleaved
    table = pa.Table.from_pylist(rows, schema=schema)
    out_schema = schema.append(pa.field("verdict", pa.string())).append(
        pa.field("rho", pa.int64())).append(pa.field("entries", pa.int64()))
    plan = {run: (ATMOSTONCE, o, o.classes) for run, o in options.items()}
    got = pa.Table.from_batches(list(atmostonce._stream(
        iter(table.to_batches(max_chunksize=97)), plan, out_schema)), out_schema).to_pylist()
    want = []
    for (run, receiver, cls) in sorted({(r["run"], r["receiver"], r["cls"]) for r in rows}):
        mine = table.filter(pa.array([(r["run"], r["receiver"], r["cls"]) == (run, receiver, cls)
                                      for r in rows]))
        want += _columnar.atmostonce_group(
            AtMostOnceAdapter(options[run]), f"messages[run {run!r}]", mine, cls,
            options[run].classes, out_schema).to_pylist()
    def key(r: dict) -> tuple:
        return r["run"], r["receiver"], r["cls"], r["seq"]

    assert sorted(got, key=key) == sorted(want, key=key)
    assert len(got) > 500 and {r["verdict"] for r in got} >= {"accepted", "duplicate"}


def test_coded_run_and_receiver_decode_and_refuse_an_unseen_value() -> None:
    """Run and receiver cross to the workers as codes (``atmostonce.Names``): a batch
    decodes to the strings (nulls stay null), a group's output encodes back, and a
    value the survey never saw (code -1: the input changed during the job) stops the
    job naming its row."""
    from timebound.errors import TraceError
    from timebound.spark.traces._atmostonce import Names

    names = Names({"run": ["a", "b"], "receiver": ["s0", "s1", "s2"]})
    batch = pa.RecordBatch.from_pydict(
        {"run": pa.array([1, 0, None], pa.int32()), "seq": [7, 8, 9],
         "receiver": pa.array([2, None, 0], pa.int32())})
    decoded = names.decode_batch(batch)
    assert decoded.to_pydict() == {"run": ["b", "a", None], "seq": [7, 8, 9],
                                   "receiver": ["s2", None, "s0"]}
    table = pa.Table.from_batches([decoded.slice(0, 2)]).append_column(
        "verdict", pa.array(["duplicate", "down"]))
    assert names.encode_table(table.slice(0, 1), ("b", "s2", 0)).to_pydict() == \
        {"run": [1], "seq": [7], "receiver": [2], "verdict": [1]}
    assert names.encode_table(table.slice(1, 1), ("a", None, 0)).to_pydict() == \
        {"run": [0], "seq": [8], "receiver": [None], "verdict": [4]}  # Verdict.DOWN
    unseen = pa.RecordBatch.from_pydict(
        {"run": pa.array([0, 0], pa.int32()), "seq": [7, 8],
         "receiver": pa.array([1, -1], pa.int32())})
    with pytest.raises(TraceError, match=r"messages\[run 'a'\]:8: field 'receiver': .*surveyed"):
        names.decode_batch(unseen)
