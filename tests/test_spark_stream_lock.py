"""A library stream's restart safety, sizing and engine (``timebound.spark._lock``,
``_stream``, ``_order``).

- live: a stream over Spark's file source restarted on its checkpoint with the same
  options refuses the resent copies; restarted with another ``classes``, ``rho`` or
  ``receiver`` column it is refused before a row is decided, naming the option and
  both values; a checkpoint with micro-batches and no lock (an earlier version's) is
  refused in one line; a checkpoint keyed by copies of the caller's columns (before
  the stream read the caller's own) goes on;
- each locked field: changing it alone is the refusal that names it (pure);
- fail closed: a task without the check's answer raises;
- sizing: a session that leaves ``spark.sql.shuffle.partitions`` unset runs the
  stateful stage on the default parallelism, and a value the user set is kept;
- the caller's columns come back as they went in (NaN and null apart, timestamps,
  decimals, nested values), and the stream decides ties (equal ``at``, nulls in
  ``order``, equal ``ts``) as the batch operator's Spark sort does.
"""

from __future__ import annotations

import datetime as dt
import decimal
import shutil
from pathlib import Path
from typing import Any

import pytest

from timebound.errors import UsageError

SCHEMA = "user string, region string, sent long, got long, amount double"
KW: dict[str, Any] = {"conn": "user", "ts": "sent", "at": "got", "rho": 1000,
                      "gc_every": 1000}


def _write(spark: Any, folder: Path, rows: list[tuple[Any, ...]],
           schema: str = SCHEMA) -> None:
    spark.createDataFrame(rows, schema).coalesce(1).write.parquet(str(folder))


def _run(spark: Any, source: Path, base: Path, ck: Path, **kwargs: Any) -> None:
    from timebound.spark import at_most_once, typed_errors

    stream = spark.readStream.schema(SCHEMA).option("recursiveFileLookup", "true") \
        .parquet(str(source))
    out = at_most_once(stream, **{**KW, **kwargs})
    query = out.writeStream.format("parquet").option("path", str(base / "sink")) \
        .option("checkpointLocation", str(ck)).trigger(availableNow=True).start()
    with typed_errors():
        query.awaitTermination()


@pytest.fixture(scope="module")
def first_run(spark: Any, tmp_path_factory: Any) -> tuple[Path, Path]:
    """One stream's first start: 3 messages and a copy; then a file of resent copies
    and one new message waits for the restart."""
    base = tmp_path_factory.mktemp("lock")
    source = base / "src"
    _write(spark, source / "a", [("u1", "r1", 1, 10, 1.0), ("u2", "r1", 2, 11, 2.0),
                                 ("u1", "r2", 3, 12, 3.0), ("u1", "r1", 1, 13, 4.0)])
    _run(spark, source, base, base / "ck")
    _write(spark, source / "b", [("u1", "r1", 1, 20, 5.0), ("u2", "r1", 2, 21, 6.0),
                                 ("u1", "r2", 3, 22, 7.0), ("u3", "r1", 5, 23, 8.0)])
    return base, source


def _sink(spark: Any, base: Path) -> Any:
    """The sink's files (a glob: the copied ``_spark_metadata`` names the original's)."""
    return spark.read.parquet(str(base / "sink" / "part-*.parquet"))


def _copy(first: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    base, _ = first
    shutil.copytree(base / "ck", tmp_path / "ck")
    shutil.copytree(base / "sink", tmp_path / "sink")
    return tmp_path, tmp_path / "ck"


@pytest.mark.spark
def test_a_restart_with_the_same_options_refuses_the_copies(
        spark: Any, first_run: tuple[Path, Path], tmp_path: Path) -> None:
    base, ck = _copy(first_run, tmp_path)
    _run(spark, first_run[1], base, ck)
    got = {(r["user"], r["sent"], r["got"]): r["verdict"]
           for r in _sink(spark, base).collect()}
    assert got == {("u1", 1, 10): "accepted", ("u2", 2, 11): "accepted",
                   ("u1", 3, 12): "accepted", ("u1", 1, 13): "duplicate",
                   ("u1", 1, 20): "duplicate", ("u2", 2, 21): "duplicate",
                   ("u1", 3, 22): "duplicate", ("u3", 5, 23): "accepted"}


@pytest.mark.spark
def test_a_checkpoint_keyed_by_working_copies_goes_on_under_the_callers_columns(
        spark: Any, tmp_path: Path, monkeypatch: Any) -> None:
    """A stream started when the engine keyed and read copies of the caller's columns
    (every working column: ``_check.reads`` without the schema) goes on under the
    caller's own: the key's state is found (the resent copies are refused)."""
    from timebound.spark import _check, _stream, at_most_once

    source = tmp_path / "src"
    _write(spark, source / "a", [("u1", "r1", 1, 10, 1.0), ("u2", "r1", 2, 11, 2.0),
                                 ("u1", "r2", 3, 12, 3.0)])
    with monkeypatch.context() as m:
        m.setattr(_stream, "reads", lambda cols, schema=None: _check.reads(cols))
        stream = spark.readStream.schema(SCHEMA).parquet(str(source / "a"))
        plan = at_most_once(stream, **KW, receiver="region")._jdf.queryExecution() \
            .analyzed().toString()
        assert "[__timebound_receiver#" in plan  # keyed by the copy
        _run(spark, source, tmp_path, tmp_path / "ck", receiver="region")
    _write(spark, source / "b", [("u1", "r1", 1, 20, 5.0), ("u2", "r1", 2, 21, 6.0),
                                 ("u1", "r2", 3, 22, 7.0), ("u3", "r1", 5, 23, 8.0)])
    _run(spark, source, tmp_path, tmp_path / "ck", receiver="region")
    got = {(r["user"], r["sent"], r["got"]): r["verdict"]
           for r in _sink(spark, tmp_path).collect()}
    assert got == {("u1", 1, 10): "accepted", ("u2", 2, 11): "accepted",
                   ("u1", 3, 12): "accepted", ("u1", 1, 20): "duplicate",
                   ("u2", 2, 21): "duplicate", ("u1", 3, 22): "duplicate",
                   ("u3", 5, 23): "accepted"}


@pytest.mark.spark
@pytest.mark.parametrize(("change", "message"), [
    ({"classes": 4}, "classes: this checkpoint was started with 1, got 4"),
    ({"rho": 999, "gc_every": 1000}, "rho: this checkpoint was started with 1000, got 999"),
    ({"receiver": "region"},
     "receiver: this checkpoint was started with none, got column 'region' (string)"),
], ids=["classes", "rho", "receiver"])
def test_a_restart_that_changes_an_option_is_refused_before_a_row_is_decided(
        spark: Any, first_run: tuple[Path, Path], tmp_path: Path, change: dict[str, Any],
        message: str) -> None:
    base, ck = _copy(first_run, tmp_path)
    before = sorted(map(tuple, _sink(spark, base).collect()))
    with pytest.raises(UsageError) as caught:
        _run(spark, first_run[1], base, ck, **change)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)
    # nothing of the refused micro-batch reached the sink
    assert sorted(map(tuple, _sink(spark, base).collect())) == before


@pytest.mark.spark
def test_a_checkpoint_with_batches_and_no_lock_is_refused(
        spark: Any, first_run: tuple[Path, Path], tmp_path: Path) -> None:
    base, ck = _copy(first_run, tmp_path)
    (ck / "timebound-operators.json").unlink()
    with pytest.raises(UsageError, match="no timebound lock.*new checkpoint"):
        _run(spark, first_run[1], base, ck)


def _fields() -> dict[str, Any]:
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    from timebound.spark._check import columns, locked, options

    # built by hand: no Spark session needed (StructType.fromDDL asks the JVM)
    schema = StructType([StructField(name, kind) for name, kind in (
        ("user", StringType()), ("region", StringType()), ("sent", LongType()),
        ("got", LongType()), ("amount", DoubleType()), ("prio", LongType()),
        ("lost", LongType()))])
    opts = options({"estimator": "fixed", "rho": 10, "gc_every": 5, "resilient": False,
                    "recovery_grace": 0, "classes": 1, "reorder_window": 1})
    cols = columns(schema, "user", "sent", "got", None, "prio", "lost")
    return {**locked(opts, cols, schema), "engine": "grouped"}


#: A changed value for every field the lock holds.
CHANGED: dict[str, Any] = {
    "estimator": "unlimited", "rho": 11, "gc_every": 6, "window": 9, "spikes": 2, "p": 50,
    "resilient": True, "beta": 3, "latest_every": 4, "recovery_grace": 1,
    "reorder_window": 8, "classes": 4, "conn": ["region", "string"],
    "ts": ["sent", "int"], "at": ["amount", "bigint"], "receiver": ["region", "string"],
    "order": None, "down": None, "engine": "row",
}


def test_every_locked_field_has_a_change_below() -> None:
    assert set(_fields()) == set(CHANGED)


@pytest.mark.parametrize("field", sorted(CHANGED))
def test_changing_one_locked_field_is_refused_naming_it(field: str) -> None:
    from timebound.spark import _lock

    saved = {"version": _lock.LOCK_VERSION,
             "operators": [{"operator": "at_most_once", "fields": _fields()}]}
    wanted = {"operator": "at_most_once", "fields": {**_fields(), field: CHANGED[field]}}
    answers, write = _lock.check([wanted], saved, started=True)
    assert not write
    assert answers[0] is not None
    option, reason = answers[0]
    assert option == field
    assert reason.startswith("this checkpoint was started with ")
    same = {"operator": "at_most_once", "fields": _fields()}
    assert _lock.check([same], saved, started=True) == ([None], False)


def test_a_fresh_checkpoint_is_written_and_a_foreign_lock_refused() -> None:
    from timebound.spark import _lock

    entry = {"operator": "at_most_once", "fields": _fields()}
    assert _lock.check([entry], None, started=False) == ([None], True)
    answers, write = _lock.check([entry], {"version": 99, "operators": []}, started=True)
    assert not write and answers[0] is not None and answers[0][0] == "checkpoint"
    merge = {"version": _lock.LOCK_VERSION,
             "operators": [{"operator": "causal_merge", "fields": {}}]}
    answers, _ = _lock.check([entry], merge, started=True)
    assert answers[0] is not None and "causal_merge" in answers[0][1]


def test_a_task_without_the_checks_answer_fails_closed() -> None:
    from timebound.spark import _lock

    with pytest.raises(UsageError, match="restart check did not run"):
        _lock.verdict("timebound_lock_never_registered")


@pytest.mark.spark
def test_a_default_session_sizes_the_stateful_stage_to_its_parallelism(
        spark: Any, tmp_path: Path) -> None:
    from timebound.spark import at_most_once

    key = "spark.sql.shuffle.partitions"
    before = spark.conf.get(key)
    _write(spark, tmp_path / "src", [("u1", "r1", 1, 10, 1.0)])
    try:
        spark.conf.unset(key)
        assert spark.conf.get(key, None) is None
        stream = spark.readStream.schema(SCHEMA).parquet(str(tmp_path / "src"))
        out = at_most_once(stream, **KW)
        assert spark.conf.get(key) == str(spark.sparkContext.defaultParallelism)
        query = out.writeStream.format("noop").option(
            "checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start()
        query.awaitTermination()
        states = [p["stateOperators"] for p in query.recentProgress if p["numInputRows"]]
        assert states[0][0]["numShufflePartitions"] == spark.sparkContext.defaultParallelism
        spark.conf.set(key, "3")  # a value the user set is kept
        at_most_once(stream, **KW)
        assert spark.conf.get(key) == "3"
    finally:
        spark.conf.set(key, before)


@pytest.mark.spark
def test_the_callers_columns_come_back_as_they_went_in(spark: Any, tmp_path: Path) -> None:
    from timebound.spark import at_most_once

    schema = ("user string, sent long, got long, d double, f float, t timestamp, "
              "dec decimal(10,2), arr array<long>, st struct<a:int,b:string>, "
              "m map<string,int>, bin binary, b boolean, da date, ni int, big long")
    rows = [("u1", 1, 10, float("nan"), float("nan"), dt.datetime(2024, 1, 1, 12, 0, 0, 123456),
             decimal.Decimal("1.23"), [1, 2], (1, "x"), {"k": 1}, b"\x00\x01", True,
             dt.date(2024, 1, 2), None, 2**62 + 1),
            ("u2", 2, 11, None, None, None, None, None, None, None, None, None, None, 5,
             None),
            ("u3", 3, 12, -0.0, float("inf"), None, None, [], (None, None), {}, b"", False,
             None, None, -(2**63))]
    _write(spark, tmp_path / "src", rows, schema)
    stream = spark.readStream.schema(schema).parquet(str(tmp_path / "src"))
    out = at_most_once(stream, conn="user", ts="sent", at="got", rho=100, gc_every=100)
    query = out.writeStream.format("memory").queryName("amo_types") \
        .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start()
    query.awaitTermination()
    got = spark.sql("SELECT * FROM amo_types ORDER BY sent").collect()
    want = spark.read.parquet(str(tmp_path / "src")).orderBy("sent").collect()
    assert [repr(tuple(r)[:15]) for r in got] == [repr(tuple(r)) for r in want]
    assert [r["verdict"] for r in got] == ["accepted"] * 3


@pytest.mark.spark
def test_the_stream_breaks_ties_as_the_batch_sort_does(spark: Any, tmp_path: Path) -> None:
    """Equal ``at`` everywhere: the order column (with nulls, first) then ``ts`` then
    ``conn`` then the row hash decide which copy is accepted and how ``entries``
    grows; the stream (pandas sort) and the batch (Spark sort) agree row for row."""
    from timebound.spark import at_most_once

    schema = "user string, sent long, got long, prio long, note string"
    rows = [("a", 5, 7, None, "x"), ("a", 5, 7, 1, "y"), ("b", 4, 7, None, "z"),
            ("a", 4, 7, 2, "w"), ("c", 9, 7, 2, "v"), ("b", 4, 7, 2, "u"),
            ("a", 6, 7, None, "t"), ("c", 9, 7, None, "s"), ("a", 6, 7, None, "r")]
    _write(spark, tmp_path / "src", rows, schema)
    kwargs = {"conn": "user", "ts": "sent", "at": "got", "order": "prio", "rho": 100,
              "gc_every": 100}
    stream = spark.readStream.schema(schema).parquet(str(tmp_path / "src"))
    query = at_most_once(stream, **kwargs).writeStream.format("memory") \
        .queryName("amo_ties").option("checkpointLocation", str(tmp_path / "ck")) \
        .trigger(availableNow=True).start()
    query.awaitTermination()
    streamed = {r["note"]: (r["verdict"], r["entries"])
                for r in spark.sql("SELECT * FROM amo_ties").collect()}
    batch = {r["note"]: (r["verdict"], r["entries"]) for r in
             at_most_once(spark.read.parquet(str(tmp_path / "src")), **kwargs).collect()}
    assert streamed == batch
    # the order worked out by hand (equal ``at``): prio nulls first (z b4, x a5, t/r a6
    # by the row hash, s c9), then prio 1 (y a5), then prio 2 (w a4, u b4, v c9); the
    # default window of 8 accepts a4 after a5 and a6 (never seen, above the floor)
    verdicts = {note: verdict for note, (verdict, _) in streamed.items()}
    assert {k: v for k, v in verdicts.items() if k not in "tr"} == {
        "z": "accepted", "x": "accepted", "s": "accepted", "y": "duplicate",
        "w": "accepted", "u": "duplicate", "v": "duplicate"}
    assert sorted(verdicts[k] for k in "tr") == ["accepted", "duplicate"]
    assert [streamed[k][1] for k in "zxsw"] == [1, 2, 4, 5]  # entries as each is taken


def test_the_late_row_rule_at_its_boundary() -> None:
    """``clocked``: a row at the receiver's clock is not late, one tick behind it is,
    and is decided at the clock; the clock is the running maximum."""
    import numpy as np

    from timebound.spark.traces._rows import clocked

    fed, late = clocked(np.array([10, 9, 12, 12, 11], dtype=np.int64), 10)
    assert fed.tolist() == [10, 10, 12, 12, 12]
    assert late.tolist() == [False, True, False, False, True]
    fed, late = clocked(np.array([3, 2], dtype=np.int64), None)  # a new receiver
    assert fed.tolist() == [3, 3] and late.tolist() == [False, True]
