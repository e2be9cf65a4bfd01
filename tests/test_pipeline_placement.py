"""The at-most-once operator per whole receiver (spark/traces/_placement.py): the same
decisions as per receiver class, the trace rule across classes caught as it decides
(with check_time_order's own error), and receivers placed where the labels say."""

from __future__ import annotations

from typing import Any

import pytest

from tests.test_pipeline_atmostonce import generated
from tests.test_pipeline_partial_metrics import OPTIONS
from tests.test_pipeline_support import write_table
from timebound.adapters.atmostonce import AtMostOnceOptions
from timebound.core.atmostonce import crc32_class
from timebound.errors import TraceError
from timebound.pipeline.datasets import read_table
from timebound.spark.traces import _atmostonce as atmostonce
from timebound.spark.traces import _placement
from timebound.spark.traces._group import translate_errors

pytestmark = pytest.mark.spark

def _decided(df: Any, by_receiver: bool) -> list[tuple]:
    options = {run: AtMostOnceOptions.from_values(v) for run, v in OPTIONS.items()}
    rows = atmostonce.operate(df, options, by_receiver=by_receiver).collect()
    return sorted(tuple(r) for r in rows)


def test_per_receiver_decides_as_per_class(spark: Any, tmp_path: Any) -> None:
    ds = str(tmp_path / "ds")
    write_table(ds, "messages", {"a": generated(1, receivers=3, rows=700),
                                 "b": generated(2, rows=300, crashes=False),
                                 "c": generated(3, receivers=4, rows=500, crashes=False)})
    df = read_table(spark, ds, "messages")
    assert _decided(df, True) == _decided(df, False)


def test_per_receiver_gathers_each_class_as_per_class(spark: Any, tmp_path: Any) -> None:
    """Whole receivers are decided per run, and their rows still reach the metrics
    as the per-class plan's (run, receiver, cls) groups, each in seq order."""
    from timebound.spark.traces._partial_metrics import Gathered

    ds = str(tmp_path / "ds")
    write_table(ds, "messages", {"a": generated(1, receivers=3, rows=700),
                                 "c": generated(3, receivers=4, rows=500, crashes=False)})
    df = read_table(spark, ds, "messages")
    options = {run: AtMostOnceOptions.from_values(v) for run, v in OPTIONS.items()}
    partials = []
    for by_receiver in (True, False):
        gather = Gathered.create(spark)
        atmostonce.operate(df, options, gather=gather, by_receiver=by_receiver).collect()
        partials.append(gather.accumulator.value)
    assert len(partials[0]) > 7 and partials[0] == partials[1]


@pytest.mark.parametrize("runs", [("b", "c"), ("c",)])
def test_plain_messages_decide_and_gather_as_per_class(
        spark: Any, tmp_path: Any, runs: tuple[str, ...]) -> None:
    """With no crash row and no down value in the input, type and down stay in the
    JVM (they are put back after the workers), and so does run when there is only
    one: the same decisions, the same columns, and the same metrics partials as the
    per-class plan."""
    from timebound.spark.traces._partial_metrics import Gathered

    ds = str(tmp_path / "ds")
    traces = {"b": generated(2, rows=300, crashes=False),
              "c": generated(3, receivers=4, rows=500, crashes=False)}
    write_table(ds, "messages", {run: traces[run] for run in runs})
    df = read_table(spark, ds, "messages")
    found = _placement.survey(df)
    assert found.others == 0
    options = {run: AtMostOnceOptions.from_values(OPTIONS[run]) for run in runs}
    assert (atmostonce.Names.of(options, found, True, True).only_run is not None) == (
        len(runs) == 1)
    outputs, partials = [], []
    for by_receiver in (True, False):
        gather = Gathered.create(spark)
        decided = atmostonce.operate(df, options, gather=gather, by_receiver=by_receiver,
                                     surveyed=found)
        outputs.append((decided.columns, sorted(tuple(r) for r in decided.collect())))
        partials.append(gather.accumulator.value)
    assert outputs[0] == outputs[1]
    assert len(outputs[0][1]) == sum(len(traces[run]) for run in runs)
    assert partials[0] == partials[1]


def test_a_run_the_survey_did_not_see_stops_the_operator(
        spark: Any, tmp_path: Any) -> None:
    """A survey that saw one run keeps run in the JVM; a row of another run there
    after all (the input changed) stops the job naming it."""
    ds = str(tmp_path / "ds")
    write_table(ds, "messages", {"c": generated(3, receivers=2, rows=200, crashes=False),
                                 "d": generated(4, receivers=2, rows=50, crashes=False)})
    df = read_table(spark, ds, "messages")
    found = _placement.survey(df)
    stale = _placement.Survey({k: v for k, v in found.rows.items() if k[0] == "c"},
                              found.spans, found.options, 0)
    options = {"c": AtMostOnceOptions.from_values(OPTIONS["c"])}
    with pytest.raises(TraceError, match=r"field 'run': a run not seen when the input "
                                         r"was surveyed"), translate_errors():
        atmostonce.operate(df, options, surveyed=stale, by_receiver=True).collect()


def test_a_crash_row_the_survey_did_not_see_stops_the_operator(
        spark: Any, tmp_path: Any) -> None:
    """A survey that saw only plain messages keeps type and down in the JVM; a crash
    row there after all (the input changed) stops the job naming it, instead of being
    decided as a message."""
    rows = generated(1, receivers=3, rows=400)
    assert any(r["type"] == "crash" for r in rows)
    ds = str(tmp_path / "ds")
    write_table(ds, "messages", {"a": rows})
    df = read_table(spark, ds, "messages")
    found = _placement.survey(df)
    assert found.others and found.others > 0
    stale = _placement.Survey(found.rows, found.spans, found.options, 0)
    options = {"a": AtMostOnceOptions.from_values(OPTIONS["a"])}
    with pytest.raises(TraceError) as caught, translate_errors():
        atmostonce.operate(df, options, surveyed=stale, by_receiver=True).collect()
    assert str(caught.value).startswith("messages[run 'a']:")
    assert "field 'type': a crash row or a down value, where the survey of the input " \
        "saw only plain messages" in str(caught.value)


def test_time_going_back_across_classes_is_caught_per_receiver(
        spark: Any, tmp_path: Any) -> None:
    a = "c1"
    b = next(f"c{i}" for i in range(2, 99) if crc32_class(f"c{i}", 4) != crc32_class(a, 4))
    rows = [{"type": "msg", "receiver": "s1", "conn": a, "ts": 5, "at": 50 + i}
            for i in range(5)]
    rows += [{"type": "msg", "receiver": "s2", "conn": a, "ts": 5, "at": 60}]
    rows += [{"type": "msg", "receiver": "s1", "conn": b, "ts": 5, "at": 40},
             {"type": "msg", "receiver": "s1", "conn": b, "ts": 5, "at": 30}]
    ds = str(tmp_path / "ds")
    write_table(ds, "messages", {"c": rows})
    df = read_table(spark, ds, "messages")
    for by_receiver in (True, False):
        with pytest.raises(TraceError) as caught, translate_errors():
            _decided(df, by_receiver)
        assert str(caught.value) == ("messages[run 'c']:6: field 'at': goes back in time "
                                     "for receiver 's1' (40 < 54)")


def test_hash_labels_land_where_they_say(spark: Any) -> None:
    from pyspark.sql import functions as F

    labels = _placement.hash_labels(5)
    assert labels is not None and len(labels) == 5
    df = spark.createDataFrame([(x,) for x in labels], "label long")
    got = df.repartition(5, "label").select("label", F.spark_partition_id().alias("p")) \
        .collect()
    assert sorted((r["p"], r["label"]) for r in got) == list(enumerate(labels))


def test_spark_hash_is_sparks(spark: Any) -> None:
    from pyspark.sql import functions as F

    values = [0, 1, -1, 42, 2**31, -(2**31) - 1, 2**63 - 1, -(2**63), 123456789012345]
    df = spark.createDataFrame([(v,) for v in values], "v long")
    got = {r["v"]: r["h"] for r in df.select("v", F.hash("v").alias("h")).collect()}
    assert got == {v: _placement.spark_hash(v) for v in values}


def test_placement_is_even_or_refused() -> None:
    even = {("r", f"s{i}"): 100 for i in range(4)}
    labels = _placement.place(even, partitions=2, cores=2)
    assert labels is not None
    hashes = _placement.hash_labels(2)
    assert hashes is not None
    assert sorted(hashes.index(v) for v in labels.values()) == [0, 0, 1, 1]
    skewed = {("r", "big"): 1000, ("r", "small"): 10}
    assert _placement.place(skewed, partitions=4, cores=2) is None
    assert _placement.place(skewed, partitions=4, cores=2, force=True) is not None
    assert _placement.place({("r", "one"): 5}, partitions=4, cores=2) is None


def test_a_receiver_the_survey_did_not_see_stops_the_operator(
        spark: Any, tmp_path: Any) -> None:
    """Run and receiver cross to the workers as codes from the survey; a receiver
    it did not see (the input changed between the survey and the operator) stops the
    job naming the row, instead of being decided as some other receiver."""
    ds = str(tmp_path / "ds")
    write_table(ds, "messages", {"c": generated(3, receivers=2, rows=200, crashes=False)})
    df = read_table(spark, ds, "messages")
    options = {"c": AtMostOnceOptions.from_values(OPTIONS["c"])}
    found = _placement.survey(df)
    assert set(found.rows) == {("c", "s0"), ("c", "s1")}
    stale = _placement.Survey({("c", "s0"): found.rows[("c", "s0")]}, found.spans, [])
    with pytest.raises(TraceError, match=r"field 'receiver': a value not seen when the "
                                         r"input was surveyed"), translate_errors():
        atmostonce.operate(df, options, surveyed=stale, by_receiver=False).collect()
    decided = atmostonce.operate(df, options, surveyed=found, by_receiver=False).collect()
    assert {r["receiver"] for r in decided} == {"s0", "s1"}


def test_each_receiver_lands_on_its_planned_partition(spark: Any, tmp_path: Any) -> None:
    """Placed receivers are whole, on the partition ``place`` chose for each (the
    label's hash as Spark computes it in the shuffle), so the cores share the rows."""
    from pyspark.sql import functions as F

    ds = str(tmp_path / "ds")
    write_table(ds, "messages", {"a": generated(1, receivers=3, rows=400),
                                 "c": generated(3, receivers=4, rows=400, crashes=False)})
    df = read_table(spark, ds, "messages")
    options = {run: AtMostOnceOptions.from_values(OPTIONS[run]) for run in ("a", "c")}
    found = _placement.survey(df)
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
    labels = _placement.place(found.rows, partitions, spark.sparkContext.defaultParallelism,
                              force=True)
    assert labels is not None
    where = _placement.hash_labels(partitions)
    assert where is not None
    planned = {receiver: where.index(label) for receiver, label in labels.items()}
    got = atmostonce.operate(df, options, by_receiver=True, surveyed=found).select(
        "run", "receiver", F.spark_partition_id().alias("p")).distinct().collect()
    assert sorted(((r["run"], r["receiver"]), r["p"]) for r in got) == sorted(planned.items())
    assert len(set(planned.values())) > 1


def test_sorted_in_the_worker_or_in_the_jvm_the_decisions_are_the_same(
        spark: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Placed partitions up to SORT_IN_WORKER_ROWS rows are sorted by seq in the
    Python worker; above, by the JVM: the same decision table either way."""
    ds = str(tmp_path / "ds")
    write_table(ds, "messages", {"a": generated(1, receivers=3, rows=700),
                                 "c": generated(3, receivers=4, rows=500, crashes=False)})
    df = read_table(spark, ds, "messages")
    in_worker = _decided(df, True)
    monkeypatch.setattr(atmostonce, "SORT_IN_WORKER_ROWS", 0)
    assert _decided(df, True) == in_worker


def test_seq_order_sorts_a_partition_as_the_jvm_would() -> None:
    """``_seq_order``: a partition's rows by seq, nulls last, ties in arrival order, as
    ``sortWithinPartitions(asc_nulls_last("seq"))`` hands them over; None when they
    come in that order already (a partition sorted in the worker, ``answered``)."""
    import pyarrow as pa

    table = pa.table({"seq": [5, None, 2, 2, 9, None], "tag": ["a", "b", "c", "d", "e", "f"]})
    order = atmostonce._seq_order(table)
    assert order is not None
    assert table.take(pa.array(order)).to_pydict() == {
        "seq": [2, 2, 5, 9, None, None], "tag": ["c", "d", "a", "e", "b", "f"]}
    assert atmostonce._seq_order(pa.table({"seq": [1, 2, 2, 2, 7]})) is None
    assert atmostonce._seq_order(pa.table({"seq": pa.array([], pa.int64())})) is None
    assert atmostonce._seq_order(pa.table({"seq": [1, None, 3]})) is not None


@pytest.mark.parametrize("gathered", [False, True])
def test_placed_receivers_send_python_only_the_columns_they_read(
        spark: Any, tmp_path: Any, gathered: bool) -> None:
    """Placed receivers are decided by one iterator Arrow UDF (``_evaluated``): its
    arguments are the columns a receiver reads (``original`` too when the metrics are
    gathered), the other columns stay in the JVM, and four decision columns come
    back."""
    from timebound.spark.traces._partial_metrics import Gathered

    ds = str(tmp_path / "ds")
    write_table(ds, "messages", {"a": generated(1, receivers=3, rows=300)})
    df = read_table(spark, ds, "messages")
    options = {"a": AtMostOnceOptions.from_values(OPTIONS["a"])}
    gather = Gathered.create(spark) if gathered else None
    plan = atmostonce.operate(df, options, gather=gather, by_receiver=True)
    text = plan._jdf.queryExecution().executedPlan().toString()
    calls = [line for line in text.splitlines() if "ArrowEvalPython" in line]
    assert len(calls) == 1 and "MapInArrow" not in text
    args = {a.split("#")[0].strip() for a in calls[0].split("decide(")[1].split(")#")[0]
            .split(",")}
    assert {"seq", "receiver", "conn", "ts", "at"} <= args
    assert ("original" in args) is gathered
    assert not args & {"estimator", "rho", "classes", "verdict"}
    # a row with no decision row (a crash row) is dropped in the JVM
    assert plan.count() == df.where("type = 'msg'").count() < df.count()
