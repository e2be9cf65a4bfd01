"""The Spark at-most-once operator decides exactly what ``timebound replay atmostonce``
decides on the same trace (one core, two drivers), with ``--classes``, per-run option
columns and crashes; and its errors are the replay's, exit status 2."""

from __future__ import annotations

import os
import random
from typing import Any

import pytest

from tests.test_pipeline_support import (
    example_rows,
    read_out,
    replay,
    without_nulls,
    write_table,
)
from timebound.cli import main
from timebound.core.atmostonce import crc32_class
from timebound.errors import TraceError
from timebound.spark.traces import _atmostonce as atmostonce

pytestmark = pytest.mark.spark

RESILIENT = ["--estimator", "unlimited", "--gc-every", "50", "--resilient",
             "--beta", "400", "--latest-every", "100"]


def generated(seed: int, receivers: int = 2, conns: int = 40, rows: int = 600,
              crashes: bool = True) -> list[dict[str, Any]]:
    """Messages with duplicates, delays and (optionally) crashes; `at` non-decreasing."""
    rnd = random.Random(seed)
    out: list[dict[str, Any]] = []
    now = 10
    sent: list[tuple[str, str, int]] = []
    down_until = dict.fromkeys((f"s{i}" for i in range(receivers)), 0)
    for _ in range(rows):
        now += rnd.randint(0, 6)
        receiver = f"s{rnd.randrange(receivers)}"
        if crashes and rnd.random() < 0.01 and down_until[receiver] <= now:
            down = rnd.randint(5, 60)
            down_until[receiver] = now + down
            out.append({"type": "crash", "receiver": receiver, "at": now, "down": down})
            continue
        if sent and rnd.random() < 0.3:
            receiver, conn, ts = rnd.choice(sent)
            original = False
        else:
            conn = f"c{rnd.randrange(conns)}é"
            ts = max(1, now - rnd.randint(0, 80))
            sent.append((receiver, conn, ts))
            original = True
        out.append({"type": "msg", "receiver": receiver, "conn": conn, "ts": ts, "at": now,
                    "original": original})
    return out


def _pipeline(tmp: str, ds: str, *args: str) -> str:
    out = os.path.join(tmp, "out")
    assert main(["pipeline", ds, "--out", out, *args]) == 0
    return out


def _same(pipeline_rows: list[dict[str, Any]], replayed: list[dict[str, Any]]) -> None:
    got = [without_nulls(r, drop=("cls",)) for r in sorted(pipeline_rows, key=lambda r: r["seq"])]
    assert got == [without_nulls(r) for r in replayed]


def test_example_trace_two_runs_with_option_columns(spark: Any, tmp_path: Any) -> None:
    rows = example_rows("atmostonce")
    fixed = {"estimator": "fixed", "rho": 30, "gc_every": 20, "resilient": True,
             "beta": 400, "latest_every": 100, "classes": 3}
    ds = str(tmp_path / "ds")
    write_table(ds, "messages", {"a": rows, "b": rows}, extra={"b": fixed})
    out = _pipeline(str(tmp_path), ds, *RESILIENT)
    decided = read_out(out, "messages")
    for run, args in (("a", RESILIENT),
                      ("b", ["--estimator", "fixed", "--rho", "30", "--gc-every", "20",
                             "--resilient", "--beta", "400", "--latest-every", "100",
                             "--classes", "3"])):
        trace = [{**r, **({} if run == "a" else fixed), "run": run, "seq": i}
                 for i, r in enumerate(rows)]
        _same([r for r in decided if r["run"] == run],
              replay(str(tmp_path), "atmostonce", trace, args))
    assert {r["cls"] for r in decided if r["run"] == "b"} == {0, 1, 2}


@pytest.mark.parametrize("classes", ["1", "4"])
def test_generated_trace_with_classes_and_crashes(spark: Any, tmp_path: Any,
                                                  classes: str) -> None:
    trace = generated(7)
    ds = str(tmp_path / "ds")
    write_table(ds, "messages", {"g": trace})
    args = [*RESILIENT, "--classes", classes]
    out = _pipeline(str(tmp_path), ds, *args)
    rows = [{**r, "run": "g", "seq": i} for i, r in enumerate(trace)]
    expected = replay(str(tmp_path), "atmostonce", rows, args)
    assert {r["verdict"] for r in expected} >= {"accepted", "duplicate", "down"}
    _same(read_out(out, "messages"), expected)


def test_limited_estimator_and_metrics(spark: Any, tmp_path: Any) -> None:
    trace = generated(3, crashes=False)
    ds = str(tmp_path / "ds")
    write_table(ds, "messages", {"l": trace})
    args = ["--estimator", "limited", "--window", "20", "--spikes", "1", "--p", "4"]
    out = _pipeline(str(tmp_path), ds, *args)
    expected = replay(str(tmp_path), "atmostonce",
                      [{**r, "run": "l", "seq": i} for i, r in enumerate(trace)], args)
    _same(read_out(out, "messages"), expected)
    metrics = {(m["measure"], m["t"]): m["value"] for m in read_out(out, "metrics")}
    originals = [r for r in expected if r["original"]]
    lost = sum(1 for r in originals if r["verdict"] == "stale")
    assert metrics[("originals", None)] == len(originals)
    assert metrics[("lost_rate", None)] == pytest.approx(lost / len(originals))
    assert metrics[("verdict.accepted", None)] == sum(
        1 for r in expected if r["verdict"] == "accepted")
    assert metrics[("at_most_once_violations", None)] == 0
    assert any(m == "table_size" and t is not None for m, t in metrics)


def test_spark_crc32_classes_are_the_cores(spark: Any) -> None:
    from pyspark.sql import functions as F

    conns = [f"c{i}" for i in range(200)] + ["é", "连接-7", "🙂x", "a b", ""]
    df = spark.createDataFrame([(c,) for c in conns], "conn string")
    for k in (3, 7):
        got = {r["conn"]: r["k"] for r in
               df.select("conn", F.pmod(F.crc32("conn"), F.lit(k)).alias("k")).collect()}
        assert got == {c: crc32_class(c, k) for c in conns}


def test_bad_row_exits_2_naming_run_seq_field_and_leaves_nothing(
        spark: Any, tmp_path: Any, capsys: Any) -> None:
    rows = example_rows("atmostonce")
    rows[5] = {**rows[5], "ts": 0}
    ds = str(tmp_path / "ds")
    write_table(ds, "messages", {"x": rows})
    out = str(tmp_path / "out")
    assert main(["pipeline", ds, "--out", out, *RESILIENT]) == 2
    err = capsys.readouterr().err
    assert "messages[run 'x']:5: field 'ts': must be >= 1, got 0" in err
    assert not os.path.exists(out)
    assert [n for n in os.listdir(tmp_path) if n.startswith(".out")] == []


def test_bad_option_column_exits_2_naming_option_and_run(
        spark: Any, tmp_path: Any, capsys: Any) -> None:
    ds = str(tmp_path / "ds")
    write_table(ds, "messages", {"ok": example_rows("atmostonce"),
                                 "bad": example_rows("atmostonce")},
                extra={"bad": {"classes": 0}})
    assert main(["pipeline", ds, "--out", str(tmp_path / "out"), *RESILIENT]) == 2
    assert "--classes (run 'bad'): must be >= 1, got 0" in capsys.readouterr().err


def test_time_going_back_across_classes_is_caught(spark: Any, tmp_path: Any, capsys: Any) -> None:
    # Two connections of different classes: each class group alone is in order.
    a, b = "c1", next(f"c{i}" for i in range(2, 99) if crc32_class(f"c{i}", 4) != crc32_class("c1", 4))
    rows = [{"type": "msg", "receiver": "s1", "conn": a, "ts": 5, "at": 50},
            {"type": "msg", "receiver": "s1", "conn": b, "ts": 5, "at": 40}]
    ds = str(tmp_path / "ds")
    write_table(ds, "messages", {"x": rows})
    out = str(tmp_path / "out")
    assert main(["pipeline", ds, "--out", out, *RESILIENT, "--classes", "4"]) == 2
    assert "messages[run 'x']:1: field 'at': goes back in time for receiver 's1' (40 < 50)" \
        in capsys.readouterr().err
    assert not os.path.exists(out)


@pytest.mark.parametrize("first_to_fail", [None, "s3"])
def test_with_several_bad_receivers_the_first_row_by_seq_is_named(
        spark: Any, tmp_path: Any, capsys: Any, monkeypatch: pytest.MonkeyPatch,
        first_to_fail: str | None) -> None:
    """Whole receivers are decided in parallel tasks, each checking `at` as it goes;
    whichever task fails first, the error names the first row (by seq) where `at` goes
    back, as the per-class plan's check does (also over a malformed row elsewhere)."""
    rows: list[dict[str, Any]] = []
    for i in range(6):
        for r in range(6):
            rows.append({"type": "msg", "receiver": f"s{r}", "conn": f"c{i}", "ts": 5,
                         "at": 100 + 10 * i})
    for r in (4, 1, 5, 2):  # each of these receivers goes back once, s4 first
        rows.append({"type": "msg", "receiver": f"s{r}", "conn": "c9", "ts": 5, "at": 20 + r})
    rows.append({"type": "msg", "receiver": "s3", "conn": "", "ts": 5, "at": 200})
    ds = str(tmp_path / "ds")
    write_table(ds, "messages", {"x": rows})
    out = str(tmp_path / "out")
    if first_to_fail is not None:  # as if the task deciding s3 had failed first
        def operate(*_args: Any, **_kwargs: Any) -> Any:
            raise TraceError("messages[run 'x']", 40, "conn", "must be a non-empty string")
        monkeypatch.setattr(atmostonce, "operate", operate)
    assert main(["pipeline", ds, "--out", out, *RESILIENT, "--classes", "4"]) == 2
    assert "messages[run 'x']:36: field 'at': goes back in time for receiver 's4' " \
        "(24 < 150)" in capsys.readouterr().err
    assert not os.path.exists(out)
