"""``causal_merge`` on a stream and ``timebound stream merge --timers``: Spark's
processing-time timers deliver a buffered message once its deadline has passed, even
when no new arrival comes.

Without timers a stream's rows are the batch operator's (the replay's) minus the tail
the batch flushes at its end; with timers that tail comes too, from micro-batches that
carry no arrival. Each timer test waits, bounded, for rows that only a timer can
produce; the same wait without timers would never end (the first test shows the tail
missing), so the tests fail when the timers are broken.
"""

from __future__ import annotations

import io
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.test_spark_operators import MERGE_CALL, MERGE_SCHEMA, merge_trace, no_job
from tests.test_stream_merge import (
    merge_trace as trace_rows,
)
from tests.test_stream_merge import (
    read_order,
    replay_merge,
    write_parts,
)
from timebound.errors import SchemaError, UsageError

KW = {**MERGE_CALL, "epsilon": 3, "delta": 2, "order": "prio"}
SCHEMA = MERGE_SCHEMA.format(id="string")
#: The longest a test waits for a timer's rows (a bound, not a timing assertion).
PATIENCE_S = 120


def rows_in_order() -> list[dict[str, Any]]:
    rows = merge_trace(28, 240, int_ids=False, epsilon=3)
    return sorted(rows, key=lambda r: (r["arrived"], r["prio"]))


def write_files(folder: Path, rows: list[dict[str, Any]], parts: int) -> None:
    """``parts`` JSON files cut where ``arrived`` changes, named and dated in order
    (the file source takes files by modification time)."""
    folder.mkdir(parents=True, exist_ok=True)
    cuts = [0]
    for k in range(1, parts):
        i = k * len(rows) // parts
        while i < len(rows) and rows[i]["arrived"] == rows[i - 1]["arrived"]:
            i += 1
        cuts.append(i)
    cuts.append(len(rows))
    for j, (a, b) in enumerate(zip(cuts, cuts[1:])):
        path = folder / f"part{j}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows[a:b]))
        os.utime(path, (1_000_000 + j, 1_000_000 + j))


def fate(row: Any) -> tuple[Any, ...]:
    return (row["row"], row["action"], row["time"], row["position"])


def collect(stream: Any, checkpoint: Path, *, timers: str, until: Callable[[int], bool]
            ) -> list[Any]:
    """Run ``causal_merge`` on ``stream`` into a ``foreachBatch`` sink: available-now
    without timers, else every 200 ms until ``until(rows so far)`` (bounded)."""
    from timebound.spark import causal_merge

    got: list[Any] = []
    out = causal_merge(stream, **KW, timers=timers)
    writer = out.writeStream.foreachBatch(lambda df, _id: got.extend(df.collect())) \
        .option("checkpointLocation", str(checkpoint))
    if timers == "none":
        writer.trigger(availableNow=True).start().awaitTermination()
        return got
    query = writer.trigger(processingTime="200 milliseconds").start()
    try:
        deadline = time.monotonic() + PATIENCE_S
        while not until(len(got)) and time.monotonic() < deadline and query.isActive:
            time.sleep(0.2)
    finally:
        query.stop()
    return got


@pytest.mark.spark
def test_stream_without_timers_is_the_batch_minus_the_flushed_tail(spark: Any,
                                                                   tmp_path: Path) -> None:
    from timebound.spark import causal_merge

    rows = rows_in_order()
    batch = {r["row"]: fate(r) for r in
             causal_merge(spark.createDataFrame(rows, SCHEMA), **KW).collect()}
    write_files(tmp_path / "in", rows, parts=4)
    stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1) \
        .json(str(tmp_path / "in"))
    got = collect(stream, tmp_path / "ck", timers="none", until=lambda n: True)
    assert {r["late_arrival"] for r in got} == {False}
    assert sorted(r["note"] for r in got) == sorted(  # the caller's columns, kept
        next(x["note"] for x in rows if x["row"] == r["row"]) for r in got)
    streamed = {r["row"]: fate(r) for r in got}
    assert len(streamed) == len(got)  # each row once
    assert all(streamed[k] == batch[k] for k in streamed)
    missing = [batch[k] for k in batch if k not in streamed]
    # the tail: deliveries only, each merger's last positions
    assert missing and {m[1] for m in missing} == {"deliver"}
    for box in {r["box"] for r in rows}:
        mine = sorted(fate(r)[3] for r in got if r["box"] == box)
        assert mine == list(range(len(mine)))


@pytest.mark.spark
def test_processing_timers_deliver_without_a_new_arrival(spark: Any, tmp_path: Path
                                                         ) -> None:
    from timebound.spark import causal_merge

    rows = rows_in_order()
    batch = {r["row"]: fate(r) for r in
             causal_merge(spark.createDataFrame(rows, SCHEMA), **KW).collect()}
    write_files(tmp_path / "in", rows, parts=1)  # one micro-batch of arrivals, then none
    stream = spark.readStream.schema(SCHEMA).json(str(tmp_path / "in"))
    got = collect(stream, tmp_path / "ck", timers="processing",
                  until=lambda n: n >= len(rows))
    # every row, the flushed tail included, with the batch operator's fate and position
    assert {r["row"]: fate(r) for r in got} == batch
    assert len(got) == len(rows)


@pytest.mark.spark
@pytest.mark.parametrize(("kwargs", "message"), [
    ({"timers": "event"}, "timers: expected one of 'none', 'processing', got 'event'"),
    ({"tick": "5"}, "tick: a duration needs its unit: 5us, 5ms, 5s, 5m or 5h"),
    ({"tick": "5 ms"}, "tick: expected a duration with its unit (300us, 250ms, 2s, 1m, "
                       "1h), got '5 ms'"),
    ({"tick": "0ms"}, "tick: must be between 1us and 1000000s, got 0ms"),
])
def test_timer_options_are_refused_before_any_job(spark: Any, tmp_path: Path,
                                                  kwargs: dict[str, Any], message: str
                                                  ) -> None:
    from timebound.spark import causal_merge

    stream = spark.readStream.schema(SCHEMA).json(str(tmp_path))
    batch = spark.createDataFrame([], SCHEMA)
    for df in (stream, batch):
        with no_job(spark), pytest.raises(UsageError) as raised:
            causal_merge(df, **{**KW, **kwargs})
        assert str(raised.value) == message


@pytest.mark.spark
def test_a_stream_with_a_late_arrival_column_is_refused(spark: Any, tmp_path: Path) -> None:
    from timebound.spark import causal_merge

    stream = spark.readStream.schema(SCHEMA + ", late_arrival boolean").json(str(tmp_path))
    with pytest.raises(SchemaError) as raised:
        causal_merge(stream, **KW)
    assert str(raised.value).startswith("table 'DataFrame', column 'late_arrival': "
                                        "already present: causal_merge adds it")


@pytest.mark.spark
def test_cli_stream_merge_timers_flush_the_tail_and_are_locked(spark: Any, tmp_path: Path
                                                               ) -> None:
    """``timebound stream merge --timers processing``: the replay's whole output,
    flushed tail included, with no arrival after the first micro-batch; the checkpoint
    then refuses a restart without timers."""
    from timebound.adapters.merge import MergeOptions
    from timebound.stream import stream_merge

    rows = trace_rows(11)
    write_parts(tmp_path / "in", rows, parts=1)
    args = ["--epsilon", "2", "--delta", "3", "--variant", "rc"]
    full = replay_merge(tmp_path, rows, args)  # its end-of-input flush included
    stop = threading.Event()
    sink = tmp_path / "sink"

    def emitted() -> int:
        try:
            return sum(map(len, read_order(sink).values()))
        except (OSError, ValueError, FileNotFoundError):
            return 0

    def watch() -> None:
        deadline = time.monotonic() + PATIENCE_S
        while emitted() < len(rows) and time.monotonic() < deadline:
            time.sleep(0.3)
        stop.set()

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        stream_merge(str(tmp_path / "in"), str(tmp_path / "ck"), str(sink),
                     MergeOptions(2, 3, "rc"), timers="processing", tick_us=1000,
                     trigger="processing-time=200ms", spark=spark,
                     conf={"spark.sql.shuffle.partitions": "2"}, out=io.StringIO(), stop=stop)
    finally:
        stop.set()
        watcher.join()
    assert read_order(sink) == full
    with pytest.raises(UsageError) as raised:
        stream_merge(str(tmp_path / "in"), str(tmp_path / "ck"), str(sink),
                     MergeOptions(2, 3, "rc"), spark=spark, out=io.StringIO())
    assert str(raised.value).startswith(f"--timers: the checkpoint {tmp_path / 'ck'} was "
                                        "started with processing, not none")


@pytest.mark.spark
def test_a_merge_stream_restarted_with_another_delta_is_refused(spark: Any,
                                                                tmp_path: Path) -> None:
    """The checkpoint locks the merge's options (``timebound.spark._lock``): the same
    options restart and go on; another ``delta`` is refused before anything is
    decided, naming it and both values."""
    from timebound.spark import causal_merge, typed_errors

    rows = rows_in_order()
    write_files(tmp_path / "in", rows[:60], parts=1)

    def run(**change: Any) -> list[Any]:
        got: list[Any] = []
        stream = spark.readStream.schema(SCHEMA).json(str(tmp_path / "in"))
        out = causal_merge(stream, **{**KW, "timers": "none", **change})
        query = out.writeStream.foreachBatch(lambda df, _id: got.extend(df.collect())) \
            .option("checkpointLocation", str(tmp_path / "ck")) \
            .trigger(availableNow=True).start()
        with typed_errors():
            query.awaitTermination()
        return got

    assert run()
    (tmp_path / "in" / "part1.json").write_text(
        "".join(json.dumps(r) + "\n" for r in rows[60:80]))
    with pytest.raises(UsageError, match=r"^delta: this checkpoint was started with 2, "
                                         r"got 5"):
        run(delta=5)
    assert run()  # the same options: the new file's arrivals are decided


def _same(value: Any) -> Any:
    """A value compared as data: a NaN equals a NaN (nested ones too)."""
    if isinstance(value, float) and value != value:
        return "NaN"
    if hasattr(value, "asDict"):
        return _same(value.asDict())
    if isinstance(value, dict):
        return {k: _same(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_same(v) for v in value]
    return value


@pytest.mark.spark
def test_the_callers_columns_come_back_as_the_batch_gives_them(spark: Any,
                                                               tmp_path: Path) -> None:
    """Every column of the caller's rows, of many types (a top-level NaN and a null
    double, timestamps, decimals, binary, arrays, a struct), integer ids, through the
    stream's pandas frames and its state, equals the batch operator's row."""
    import datetime
    import decimal

    import pyarrow.parquet as pq

    from timebound.spark import causal_merge

    rows = sorted(merge_trace(5, 120, int_ids=True, epsilon=3),
                  key=lambda r: (r["arrived"], r["prio"]))
    base = datetime.datetime(2024, 3, 31, 0, 30, tzinfo=datetime.UTC)
    for i, row in enumerate(rows):
        row.update(
            f=float("nan") if i % 5 == 0 else None if i % 7 == 0 else i / 3,
            ts=None if i % 6 == 0 else base + datetime.timedelta(minutes=17 * i,
                                                                 microseconds=i),
            dec=decimal.Decimal(i * 37) / 100, raw=bytes([i % 256, 0]),
            tags=[f"t{i % 4}", None] if i % 3 else [],
            nest={"x": i * 1.5, "y": None if i % 4 else "y"})
    schema = MERGE_SCHEMA.format(id="long") + (
        ", f double, ts timestamp, dec decimal(12,2), raw binary, tags array<string>, "
        "nest struct<x:double,y:string>")
    frame = spark.createDataFrame(rows, schema)
    folder = tmp_path / "in"
    folder.mkdir()
    table = frame.toArrow()
    cuts = [0]
    for k in (1, 2):  # three micro-batches, cut where ``arrived`` changes
        i = k * len(rows) // 3
        while rows[i]["arrived"] == rows[i - 1]["arrived"]:
            i += 1
        cuts.append(i)
    cuts.append(len(rows))
    for j, (a, b) in enumerate(zip(cuts, cuts[1:])):
        pq.write_table(table.slice(a, b - a), folder / f"p{j}.parquet")
    batch = {r["row"]: _same(r) for r in causal_merge(frame, **KW).collect()}
    stream = spark.readStream.schema(frame.schema).option("maxFilesPerTrigger", 1) \
        .parquet(str(folder))
    out = causal_merge(stream, **KW, timers="none")
    got: list[Any] = []
    out.writeStream.foreachBatch(lambda df, _id: got.extend(df.collect())) \
        .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True) \
        .start().awaitTermination()
    assert out.schema.names == [*frame.columns, "action", "time", "position", "late_arrival"]
    assert len(got) > len(rows) // 2
    for row in got:
        mine = _same(row)
        assert mine.pop("late_arrival") in (False, True)
        assert mine == batch[row["row"]]
    assert any(r["f"] != r["f"] for r in got) and any(r["f"] is None for r in got)
