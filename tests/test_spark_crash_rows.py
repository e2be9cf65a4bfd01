"""``at_most_once(..., down=...)``: crash rows of resilient receivers, in batch and on a
stream, decide as ``timebound replay atmostonce``'s ``crash`` rows do.

A crash row (``down`` set) stops every class of its receiver for ``down`` ticks;
messages it receives meanwhile are ``down`` (rho and entries null); the crash row
itself comes back once, with a null verdict. Reference: the replay on the same rows
in decision order. Errors: a crash row of receivers that are not resilient, a
``down`` below 1, and a crash while the receiver is still down each stop the job in
one line naming the caller's column.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from timebound.errors import SchemaError

SCHEMA = "id long, node string, user string, sent long, recv long, outage long"
KWARGS = {"estimator": "fixed", "rho": 30, "gc_every": 10, "resilient": True, "beta": 40,
          "latest_every": 15, "reorder_window": 1}


def trace(seed: int, n: int) -> list[dict[str, Any]]:
    """``amo_trace`` (crash rows never while the node is down, ~20% resent copies) in a
    caller's columns, in decision order (``recv``, then ``id``)."""
    from tests.test_stream_atmostonce import amo_trace

    return [{"id": r["seq"], "node": r["receiver"], "user": r.get("conn"),
             "sent": r.get("ts"), "recv": r["at"], "outage": r.get("down")}
            for r in amo_trace(seed, n, crashes=True, receivers=("n0", "n1"))]


def replayed(tmp: Path, rows: list[dict[str, Any]], classes: int) -> dict[int, Any]:
    """The replay on ``rows`` in their order: id -> (verdict, rho, entries); crash
    rows -> (None, None, None)."""
    import argparse

    from tests.test_spark_library import cli_args
    from timebound.replay import load_commands, replay_rows

    command = next(c for c in load_commands() if c.name == "atmostonce")
    src, dst = tmp / "trace.jsonl", tmp / "replayed.jsonl"
    lines = []
    for r in rows:
        if r["outage"] is not None:
            lines.append({"type": "crash", "receiver": r["node"], "at": r["recv"],
                          "down": r["outage"], "id": r["id"]})
        else:
            lines.append({"type": "msg", "receiver": r["node"], "conn": r["user"],
                          "ts": r["sent"], "at": r["recv"], "id": r["id"]})
    src.write_text("".join(json.dumps(line) + "\n" for line in lines))
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    replay_rows(command, parser.parse_args(["--input", str(src), "--output", str(dst),
                                            *cli_args({**KWARGS, "classes": classes})]))
    out = {r["id"]: (r["verdict"], r["rho"], r["entries"])
           for r in map(json.loads, dst.read_text().splitlines())}
    return {r["id"]: out.get(r["id"], (None, None, None)) for r in rows}


@contextmanager
def spread(spark: Any) -> Iterator[None]:
    """8 shuffle partitions that Spark does not coalesce, for one job."""
    keys = {"spark.sql.shuffle.partitions": "8", "spark.sql.adaptive.enabled": "false"}
    saved = {key: spark.conf.get(key) for key in keys}
    for key, value in keys.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in saved.items():
            spark.conf.set(key, value)


def decisions(rows: list[Any]) -> dict[int, Any]:
    return {r["id"]: (r["verdict"], r["rho"], r["entries"]) for r in rows}


@pytest.mark.spark
@pytest.mark.parametrize("classes", [1, 3])
def test_batch_crash_rows_equal_the_replay(spark: Any, tmp_path: Path, classes: int) -> None:
    from timebound.spark import at_most_once

    rows = trace(classes, 300)
    expected = replayed(tmp_path, rows, classes)
    out = at_most_once(spark.createDataFrame(rows, SCHEMA), conn="user", ts="sent",
                       at="recv", receiver="node", order="id", down="outage", classes=classes,
                       **KWARGS)
    with spread(spark):  # a receiver's classes on several tasks, were they placed apart
        got = out.collect()
    assert len(got) == len(rows)  # a crash row comes back once
    assert decisions(got) == expected
    verdicts = [v for v, _, _ in expected.values()]
    assert verdicts.count(None) >= 5 and "down" in verdicts and "accepted" in verdicts


@pytest.mark.spark
@pytest.mark.parametrize("classes", [1, 3])
def test_stream_crash_rows_equal_the_replay(spark: Any, tmp_path: Path, classes: int) -> None:
    from timebound.spark import at_most_once

    rows = trace(10 + classes, 240)
    folder = tmp_path / "in"
    folder.mkdir()
    for index in range(4):
        path = folder / f"part-{index}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows[index * 60:index * 60 + 60]))
        os.utime(path, (1_700_000_000 + index, 1_700_000_000 + index))
    stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(folder))
    out = at_most_once(stream, conn="user", ts="sent", at="recv", receiver="node",
                       order="id", down="outage", classes=classes, **KWARGS)
    name = f"amo_crash_rows_{classes}"
    query = out.writeStream.format("memory").queryName(name) \
        .option("checkpointLocation", str(tmp_path / "ck")) \
        .trigger(availableNow=True).start()
    query.awaitTermination()
    got = spark.sql(f"SELECT * FROM {name}").collect()
    assert len(got) == len(rows)  # a crash row comes back once, from one class
    assert decisions(got) == replayed(tmp_path, rows, classes)
    assert not any(r["late_arrival"] for r in got)


BAD = [
    pytest.param({**KWARGS, "resilient": False, "beta": None, "latest_every": None},
                 (2, "n0", None, None, 5, 3), "outage",
                 "a crash row (down set) needs resilient=True", id="not-resilient"),
    pytest.param(KWARGS, (2, "n0", None, None, 5, 0), "outage", "down must be >= 1",
                 id="down-zero"),
    pytest.param(KWARGS, (2, "n0", None, None, 5, 10), "recv",
                 "receiver 'n0' is still down at 5", id="still-down"),
]


@pytest.mark.spark
@pytest.mark.parametrize("streaming", [False, True], ids=["batch", "stream"])
@pytest.mark.parametrize(("kwargs", "row", "column", "reason"), BAD)
def test_bad_crash_rows_stop_the_job_naming_the_column(
        spark: Any, tmp_path: Path, streaming: bool, kwargs: dict[str, Any],
        row: tuple[Any, ...], column: str, reason: str) -> None:
    from timebound.spark import at_most_once, typed_errors

    rows = [(0, "n0", "u1", 1, 1, None), (1, "n0", None, None, 2, 10), row]
    if row[-1] != 10:
        rows.pop(1)
    if streaming:
        folder = tmp_path / "in"
        folder.mkdir()
        keys = SCHEMA.replace(",", "").split()[::2]
        (folder / "a.jsonl").write_text("".join(json.dumps(dict(zip(keys, r))) + "\n"
                                                for r in rows))
        df = spark.readStream.schema(SCHEMA).json(str(folder))
    else:
        df = spark.createDataFrame(rows, SCHEMA)
    out = at_most_once(df, conn="user", ts="sent", at="recv", receiver="node",
                       down="outage", **kwargs)
    with pytest.raises(SchemaError) as raised, typed_errors():
        if streaming:
            out.writeStream.format("noop").option(
                "checkpointLocation", str(tmp_path / "ck")).trigger(
                availableNow=True).start().awaitTermination()
        else:
            out.collect()
    assert raised.value.table == "DataFrame" and raised.value.column == column
    assert raised.value.reason.startswith(reason)
