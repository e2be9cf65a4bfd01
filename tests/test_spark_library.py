"""``timebound.spark.at_most_once``: the replay's verdicts on any
DataFrame under the caller's column names, batch and streaming, with options and
columns checked before any Spark job.

- batch: generated traces with renamed columns, string and integer ``conn`` and
  receivers, several receivers, ties in ``at`` broken by ``order`` (or, without one,
  by ``ts`` then ``conn``), against ``timebound.replay`` fed the same rows in decision
  order;
- streaming: Spark's file source with ``maxFilesPerTrigger`` into the memory sink
  (equal to the batch operator and the replay), the ``rate`` source, ``foreachBatch``
  with a late file;
- every error: options (the CLI's reasons under the keyword's name), columns (missing,
  wrong type, named twice, already added), both before any job; bad rows in a job;
- docs/spark.md: its runnable examples run and print what the page says.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import re
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from timebound.errors import SchemaError, UsageError

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = "id long, node {kind}, user {conn}, sent long, recv long, prio long, note string"


def trace(seed: int, n: int, *, int_ids: bool, nodes: int = 3, conns: int = 9,
          early: bool = False) -> list[dict[str, Any]]:
    """``n`` rows with many equal ``recv`` (ties), ~25% resent copies, a unique
    ``prio`` per row; ``early``: some timestamps far ahead of the receiver's clock."""
    rng = random.Random(seed)
    recv, rows, sent = 0, [], []
    prios = rng.sample(range(10 * n), n)
    for i in range(n):
        recv += rng.choice((0, 0, 1, 2, 5))
        node = rng.randrange(nodes)
        if sent and rng.random() < 0.25:
            user, ts = rng.choice(sent)
        else:
            user = rng.randrange(conns)
            ts = max(1, recv - rng.randint(0, 40) + (rng.randint(0, 90) if early else 0))
            sent.append((user, ts))
        rows.append({"id": i, "node": node if int_ids else f"n{node}",
                     "user": user if int_ids else f"u{user}é", "sent": ts, "recv": recv,
                     "prio": prios[i], "note": f"row {i}"})
    return rows


def decision_order(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: (r["recv"], r["prio"], r["sent"], str(r["user"])))


def cli_args(kwargs: dict[str, Any]) -> list[str]:
    args: list[str] = []
    for key, value in kwargs.items():
        flag = "--" + key.replace("_", "-")
        args += [flag] if value is True else [flag, str(value)]
    return args


def replayed(tmp: Path, rows: list[dict[str, Any]], kwargs: dict[str, Any],
             receiver: bool = True) -> dict[int, tuple[Any, ...]]:
    """``timebound.replay`` (the replay command's API) on ``rows`` in their order:
    id -> (verdict, rho, entries)."""
    from timebound.replay import load_commands, replay_rows

    command = next(c for c in load_commands() if c.name == "atmostonce")
    src, dst = tmp / "trace.jsonl", tmp / "replayed.jsonl"
    src.write_text("".join(json.dumps({
        "type": "msg", "receiver": str(r["node"]) if receiver else "one",
        "conn": str(r["user"]), "ts": r["sent"], "at": r["recv"], "id": r["id"]}) + "\n"
        for r in rows))
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    replay_rows(command, parser.parse_args(["--input", str(src), "--output", str(dst),
                                            *cli_args(kwargs)]))
    out = [json.loads(line) for line in dst.read_text().splitlines()]
    assert len(out) == len(rows)
    return {r["id"]: (r["verdict"], r["rho"], r["entries"]) for r in out}


def decisions(rows: list[Any]) -> dict[int, tuple[Any, ...]]:
    return {r["id"]: (r["verdict"], r["rho"], r["entries"]) for r in rows}


def frame(spark: Any, rows: list[dict[str, Any]], int_ids: bool) -> Any:
    kind = "long" if int_ids else "string"
    return spark.createDataFrame(rows, SCHEMA.format(kind=kind, conn=kind))


BATCH_CASES = [
    pytest.param(False, {"estimator": "fixed", "rho": 30, "gc_every": 20, "classes": 3,
                         "reorder_window": 1}, id="string-ids-fixed-classes"),
    pytest.param(True, {"estimator": "limited", "window": 6, "spikes": 1, "p": 2,
                        "resilient": True, "beta": 50, "latest_every": 20,
                        "reorder_window": 3}, id="integer-ids-limited-resilient"),
]


@pytest.mark.spark
@pytest.mark.parametrize(("int_ids", "kwargs"), BATCH_CASES)
def test_batch_verdicts_equal_the_replay(spark: Any, tmp_path: Path, int_ids: bool,
                                         kwargs: dict[str, Any]) -> None:
    from timebound.spark import at_most_once

    rows = trace(28, 400, int_ids=int_ids, early=kwargs.get("resilient", False))
    expected = replayed(tmp_path, decision_order(rows), kwargs)
    out = at_most_once(frame(spark, rows, int_ids), conn="user", ts="sent", at="recv",
                       receiver="node", order="prio", **kwargs)
    got = out.collect()
    assert out.columns == ["id", "node", "user", "sent", "recv", "prio", "note",
                           "verdict", "rho", "entries"]
    assert decisions(got) == expected
    by_id = {r["id"]: r for r in rows}
    assert all(r["note"] == by_id[r["id"]]["note"] and r["user"] == by_id[r["id"]]["user"]
               and r["prio"] == by_id[r["id"]]["prio"] for r in got)  # columns kept
    verdicts = {v for v, _, _ in expected.values()}
    assert {"accepted", "duplicate"} <= verdicts  # the trace exercises the receiver
    if kwargs.get("resilient"):
        assert "early" in verdicts


@pytest.mark.spark
def test_batch_ties_without_order_go_by_ts_then_conn(spark: Any, tmp_path: Path) -> None:
    """No ``order`` and no ``receiver``: one receiver, equal ``at`` by ts then conn. Rows
    equal in all three tie on the row hash: compared as a multiset per such group."""
    from timebound.spark import at_most_once

    rows = trace(5, 300, int_ids=False)
    kwargs = {"estimator": "unlimited", "gc_every": 16, "reorder_window": 1}
    ordered = sorted(rows, key=lambda r: (r["recv"], r["sent"], r["user"]))
    expected = replayed(tmp_path, ordered, kwargs, receiver=False)
    got = decisions(at_most_once(frame(spark, rows, False), conn="user", ts="sent",
                                 at="recv", **kwargs).collect())

    def grouped(found: dict[int, tuple[Any, ...]]) -> dict[Any, list[Any]]:
        groups: dict[Any, list[Any]] = defaultdict(list)
        for r in rows:
            groups[(r["recv"], r["sent"], r["user"])].append(found[r["id"]])
        return {k: sorted(v) for k, v in groups.items()}

    assert grouped(got) == grouped(expected)
    ties = sum(1 for a, b in zip(ordered, ordered[1:]) if a["recv"] == b["recv"])
    assert ties > 50  # ties did occur


def write_files(folder: Path, rows: list[dict[str, Any]], parts: int) -> None:
    """``rows`` as ``parts`` JSON Lines files, modification times in file order (Spark's
    file source takes files by modification time); each file's rows shuffled (the
    operator puts a micro-batch in decision order itself)."""
    folder.mkdir(parents=True)
    size = -(-len(rows) // parts)
    rng = random.Random(parts)
    for index in range(parts):
        path = folder / f"part-{index:03d}.jsonl"
        chunk = rows[index * size:(index + 1) * size]
        rng.shuffle(chunk)
        path.write_text("".join(json.dumps(r) + "\n" for r in chunk))
        os.utime(path, (1_700_000_000 + index, 1_700_000_000 + index))


#: The working columns a stream's operator reads instead of the caller's.
WORKING_COPIES = ("__timebound_receiver", "__timebound_conn", "__timebound_ts",
                  "__timebound_at")


@pytest.mark.spark
@pytest.mark.parametrize("int_ids", [False, True], ids=["string-ids", "int-ids-int-times"])
def test_stream_file_source_equals_batch_and_replay(spark: Any, tmp_path: Path,
                                                    int_ids: bool) -> None:
    """Verdicts equal the replay's, whether the operator reads the caller's own
    columns (a string receiver and conn, long times: no copy of them crosses the
    shuffle) or working copies of them (integer ids, int times: cast)."""
    from timebound.spark import at_most_once

    kwargs = {"estimator": "fixed", "rho": 30, "gc_every": 20, "classes": 2,
              "reorder_window": 1}
    rows = decision_order(trace(11, 240, int_ids=int_ids))
    write_files(tmp_path / "in", rows, 4)
    kind = "long" if int_ids else "string"
    schema = SCHEMA.format(kind=kind, conn=kind)
    if int_ids:
        schema = schema.replace("sent long, recv long", "sent int, recv int")
    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1) \
        .json(str(tmp_path / "in"))
    out = at_most_once(stream, conn="user", ts="sent", at="recv", receiver="node",
                       order="prio", **kwargs)
    assert out.isStreaming and out.columns[-4:] == ["verdict", "rho", "entries",
                                                    "late_arrival"]
    plan = out._jdf.queryExecution().analyzed().toString()
    assert [c for c in WORKING_COPIES if c in plan] == (list(WORKING_COPIES) if int_ids
                                                        else [])
    query = out.writeStream.format("memory").queryName(f"amo_files_{int(int_ids)}") \
        .option("checkpointLocation", str(tmp_path / "ck")) \
        .trigger(availableNow=True).start()
    query.awaitTermination()
    batches = [p for p in query.recentProgress if p["numInputRows"]]
    assert len(batches) == 4  # one file per micro-batch
    got = spark.sql(f"SELECT * FROM amo_files_{int(int_ids)}").collect()
    assert not any(r["late_arrival"] for r in got)
    expected = replayed(tmp_path, rows, kwargs)
    assert decisions(got) == expected
    batch = at_most_once(spark.read.schema(schema).json(str(tmp_path / "in")), conn="user",
                         ts="sent", at="recv", receiver="node", order="prio", **kwargs)
    assert decisions(batch.collect()) == expected


@pytest.mark.spark
def test_stream_one_column_in_several_roles_equals_batch(spark: Any, tmp_path: Path) -> None:
    """One caller's column as the receiver and the conn, another as ts, at and order:
    the stream reads each once (no copy) and sorts by it once, and decides as the
    batch operator does (which reads copies)."""
    from timebound.spark import at_most_once

    kwargs = {"conn": "user", "ts": "sent", "at": "sent", "receiver": "user",
              "order": "sent", "rho": 30, "gc_every": 20, "classes": 2}
    rows = trace(5, 160, int_ids=False)
    write_files(tmp_path / "in", rows, 1)
    schema = SCHEMA.format(kind="string", conn="string")
    stream = spark.readStream.schema(schema).json(str(tmp_path / "in"))
    out = at_most_once(stream, **kwargs)
    plan = out._jdf.queryExecution().analyzed().toString()
    assert [c for c in WORKING_COPIES if c in plan] == []
    query = out.writeStream.format("memory").queryName("amo_roles") \
        .option("checkpointLocation", str(tmp_path / "ck")) \
        .trigger(availableNow=True).start()
    query.awaitTermination()
    got = decisions(spark.sql("SELECT * FROM amo_roles").collect())
    batch = at_most_once(spark.read.schema(schema).json(str(tmp_path / "in")), **kwargs)
    expected = decisions(batch.collect())
    assert got == expected and len(got) == 160
    assert {v for v, _, _ in got.values()} >= {"accepted", "duplicate"}


@pytest.mark.spark
def test_stream_rate_source(spark: Any, tmp_path: Path) -> None:
    """Each (conn, ts) twice, at ``value`` 2k and 2k+1: the first accepted, the copy
    a duplicate, across micro-batches too."""
    from pyspark.sql import functions as F

    from timebound.spark import at_most_once

    rate = spark.readStream.format("rate").option("rowsPerSecond", 40).load()
    rate = rate.select("timestamp", "value",
                       F.concat(F.lit("c"), (F.col("value") / 2).cast("long") % 5).alias("c"),
                       ((F.col("value") / 2).cast("long") + 1).alias("t"))
    out = at_most_once(rate, conn="c", ts="t", at="value", rho=10**6, gc_every=10**6)
    query = out.writeStream.format("memory").queryName("amo_rate") \
        .option("checkpointLocation", str(tmp_path / "ck")) \
        .trigger(processingTime="500 milliseconds").start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            seen = spark.sql("SELECT max(value) AS m FROM amo_rate").collect()[0]["m"]
            if seen is not None and seen >= 40 and len(query.recentProgress) >= 2:
                break
            time.sleep(0.5)
    finally:
        query.stop()
    got = {r["value"]: r["verdict"] for r in spark.sql("SELECT * FROM amo_rate").collect()}
    complete = [v for v in sorted(got) if v < max(got) - 1]
    assert len(complete) >= 30
    assert all(got[v] == ("accepted" if v % 2 == 0 else "duplicate") for v in complete)


@pytest.mark.spark
def test_stream_foreach_batch_and_late_rows(spark: Any, tmp_path: Path) -> None:
    from timebound.spark import at_most_once

    files = [
        [{"dev": 1, "t": 10, "r": 12}, {"dev": 2, "t": 11, "r": 13}],
        [{"dev": 1, "t": 20, "r": 40}],
        [{"dev": 2, "t": 11, "r": 20}, {"dev": 3, "t": 15, "r": 21}],  # behind 40: late
    ]
    folder = tmp_path / "in"
    folder.mkdir()
    for i, rows in enumerate(files):
        path = folder / f"{i}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    stream = spark.readStream.schema("dev long, t long, r long") \
        .option("maxFilesPerTrigger", 1).json(str(folder))
    out = at_most_once(stream, conn="dev", ts="t", at="r", rho=100, gc_every=100)
    seen: dict[int, list[Any]] = {}

    def collect(batch: Any, batch_id: int) -> None:
        seen[batch_id] = sorted((r["dev"], r["r"], r["verdict"], r["late_arrival"])
                                for r in batch.collect())

    query = out.writeStream.foreachBatch(collect) \
        .option("checkpointLocation", str(tmp_path / "ck")) \
        .trigger(availableNow=True).start()
    query.awaitTermination()
    assert [seen[b] for b in sorted(seen) if seen[b]] == [
        [(1, 12, "accepted", False), (2, 13, "accepted", False)],
        [(1, 40, "accepted", False)],
        [(2, 20, "duplicate", True), (3, 21, "accepted", True)],
    ]


# -- errors -------------------------------------------------------------------------

GOOD = {"rho": 10, "gc_every": 5}
OPTION_ERRORS = [
    ({"rho": 0, "gc_every": 5}, "rho: must be >= 1, got 0"),
    ({"rho": 10}, "gc_every: required here"),
    ({**GOOD, "window": 4}, "window: not used with estimator fixed"),
    ({"estimator": "limited", "window": 3, "spikes": 3, "p": 1},
     "spikes: must be < window (3), got 3"),
    ({"estimator": "magic"}, "estimator: expected one of fixed, unlimited, limited, got 'magic'"),
    ({**GOOD, "beta": 5}, "beta: not used without resilient"),
    ({**GOOD, "resilient": True, "beta": 5}, "latest_every: required here"),
    ({**GOOD, "resilient": "yes"}, "resilient: expected True or False, got 'yes'"),
    ({**GOOD, "recovery_grace": 3}, "recovery_grace: not used without resilient"),
    ({**GOOD, "classes": 0}, "classes: must be >= 1, got 0"),
    ({**GOOD, "reorder_window": 5000}, "reorder_window: must be in [1, 4096], got 5000"),
    ({**GOOD, "rho": True}, "rho: expected an integer, got True"),
]
BASE = "user string, sent long, recv long, node string, prio long"
COLUMN_ERRORS = [
    (BASE, {"conn": "user_id"}, "column 'user_id': missing (conn=)"),
    (BASE, {"ts": 3}, "ts: expected a column name (a string), got 3"),
    (BASE, {"receiver": "nodes"}, "column 'nodes': missing (receiver=)"),
    ("user string, sent string, recv long", {}, "column 'sent': ts= needs an integer "
                                               "column (ticks), found string"),
    ("user double, sent long, recv long", {}, "column 'user': conn= needs a string or "
                                             "integer column, found double"),
    ("user string, sent long, recv timestamp", {}, "column 'recv': at= needs an integer"),
    (BASE, {"order": "user", "receiver": "prio"}, None),  # accepted: the control case
    ("user string, sent long, recv long, o double", {"order": "o"},
     "column 'o': order= needs an integer, decimal, string, boolean, date or timestamp"),
    ("user string, sent long, recv long, verdict string", {},
     "column 'verdict': already present: at_most_once adds it"),
    ("user string, sent long, recv long, entries long", {}, "column 'entries': already"),
    ("user string, sent long, recv long, late_arrival boolean", {},
     "column 'late_arrival': already present"),
    ("user string, sent long, recv long, __timebound_x long", {},
     "column '__timebound_x': names starting with"),
]


@pytest.mark.spark
@pytest.mark.parametrize(("kwargs", "message"), OPTION_ERRORS)
def test_options_are_refused_as_the_cli_refuses_them(spark: Any, kwargs: dict[str, Any],
                                                     message: str) -> None:
    from timebound.spark import at_most_once

    df = spark.createDataFrame([], "user string, sent long, recv long")
    with pytest.raises(UsageError) as raised:
        at_most_once(df, conn="user", ts="sent", at="recv", **kwargs)
    assert str(raised.value) == message


@pytest.mark.spark
@pytest.mark.parametrize("streaming", [False, True], ids=["batch", "stream"])
@pytest.mark.parametrize(("schema", "kwargs", "message"), COLUMN_ERRORS)
def test_columns_are_checked_before_any_job(spark: Any, tmp_path: Path, schema: str,
                                            kwargs: dict[str, Any], message: str | None,
                                            streaming: bool) -> None:
    from timebound.spark import at_most_once

    if streaming:
        df = spark.readStream.schema(schema).json(str(tmp_path))
    else:
        df = spark.createDataFrame([], schema)
    group = f"tb-check-{os.getpid()}-{time.monotonic_ns()}"
    spark.sparkContext.setJobGroup(group, "at_most_once checks")
    try:
        call = {"conn": "user", "ts": "sent", "at": "recv", **GOOD, **kwargs}
        if message is None:
            assert "verdict" in at_most_once(df, **call).columns
        else:
            with pytest.raises((SchemaError, UsageError)) as raised:
                at_most_once(df, **call)
            text = str(raised.value)
            assert message in text and "\n" not in text
            if "column '" in message:
                assert isinstance(raised.value, SchemaError)
                assert text.startswith("table 'DataFrame', column '")
        assert list(spark.sparkContext.statusTracker().getJobIdsForGroup(group)) == []
        if not streaming:  # the tracker does see a job in this group
            spark.range(10).count()
            assert list(spark.sparkContext.statusTracker().getJobIdsForGroup(group))
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)


@pytest.mark.spark
@pytest.mark.parametrize(("row", "column", "reason"), [
    (("u1", 0, 5, "a"), "sent", "ts must be >= 1"),
    ((None, 3, 5, "a"), "user", "conn must not be null"),
    (("u1", 3, -1, "a"), "recv", "at must be >= 0"),
    (("u1", 3, 5, ""), "node", "receiver must not be empty"),
])
def test_bad_rows_stop_the_job_naming_the_column(spark: Any, row: tuple[Any, ...],
                                                 column: str, reason: str) -> None:
    from timebound.spark import at_most_once, typed_errors

    df = spark.createDataFrame([("u0", 1, 1, "a"), row],
                               "user string, sent long, recv long, node string")
    out = at_most_once(df, conn="user", ts="sent", at="recv", receiver="node", **GOOD)
    with pytest.raises(SchemaError) as raised, typed_errors():
        out.collect()
    assert raised.value.table == "DataFrame" and raised.value.column == column
    assert raised.value.reason.startswith(reason + " (row with user = ")


@pytest.mark.spark
@pytest.mark.parametrize(("row", "column", "reason"), [
    (("u1", 0, 5, "a"), "sent", "ts must be >= 1"),
    ((None, 3, 5, "a"), "user", "conn must not be null"),
    (("u1", 3, None, "a"), "recv", "at must not be null"),
    (("u1", 3, 5, ""), "node", "receiver must not be empty"),
])
def test_bad_rows_stop_a_stream_naming_the_column(spark: Any, tmp_path: Path,
                                                  row: tuple[Any, ...], column: str,
                                                  reason: str) -> None:
    """On a stream the engine reads the caller's columns as they are; the row checks
    still stop the micro-batch before a row is decided, in one typed error."""
    from timebound.spark import at_most_once, typed_errors

    folder = tmp_path / "in"
    folder.mkdir()
    names = ("user", "sent", "recv", "node")
    (folder / "a.jsonl").write_text("".join(json.dumps(dict(zip(names, r))) + "\n"
                                            for r in [("u0", 1, 1, "a"), row]))
    df = spark.readStream.schema("user string, sent long, recv long, node string") \
        .json(str(folder))
    out = at_most_once(df, conn="user", ts="sent", at="recv", receiver="node", **GOOD)
    with pytest.raises(SchemaError) as raised, typed_errors():
        out.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck")) \
            .trigger(availableNow=True).start().awaitTermination()
    assert raised.value.table == "DataFrame" and raised.value.column == column
    assert raised.value.reason.startswith(reason + " (row with user = ")


# -- docs/spark.md ------------------------------------------------------------------


def runnable_examples() -> list[tuple[str, str]]:
    """Each ```python block after a ``<!-- runnable -->`` line, with the ```text block
    that follows it (what it prints)."""
    text = (ROOT / "docs" / "spark.md").read_text(encoding="utf-8")
    return re.findall(r"<!-- runnable -->\n```python\n(.*?)```\n\nprints\n\n```text\n(.*?)```",
                      text, re.S)


def test_docs_mark_runnable_examples() -> None:
    examples = runnable_examples()
    assert len(examples) == 2
    assert any("readStream" in code and "maxFilesPerTrigger" in code for code, _ in examples)
    for code, _ in examples:
        assert "._" not in code and "from timebound.spark import at_most_once" in code


@pytest.mark.spark
@pytest.mark.parametrize("index", [0, 1], ids=["batch", "stream"])
def test_docs_examples_print_what_the_page_says(spark: Any, index: int) -> None:
    code, printed = runnable_examples()[index]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"docs/spark.md example {index + 1}", "exec"), {"__name__": "x"})
    assert out.getvalue() == printed


def without_pyspark(code: str, folder: Path) -> Any:
    """Run Python ``code`` in a subprocess in which pyspark and py4j cannot be imported."""
    import subprocess
    import sys

    blocker = ("import sys\n"
               "class Blocker:\n"
               "    def find_spec(self, name, path=None, target=None):\n"
               "        if name.split('.')[0] in ('pyspark', 'py4j'):\n"
               "            raise ImportError(name)\n"
               "sys.meta_path.insert(0, Blocker())\n")
    return subprocess.run([sys.executable, "-c", blocker + code], cwd=folder,
                          capture_output=True, text=True, timeout=120)


def test_without_pyspark_the_import_names_the_extra(tmp_path: Path) -> None:
    done = without_pyspark("from timebound.errors import MissingExtra\n"
                           "try:\n"
                           "    import timebound.spark\n"
                           "except MissingExtra as exc:\n"
                           "    print(exc)\n", tmp_path)
    assert done.stdout.strip() == ("timebound.spark needs pyspark, which is not installed: "
                                   "pip install 'timebound[spark]'"), done.stderr[-2000:]
