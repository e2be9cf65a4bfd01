"""Causal, merge, slotted and stability operators decide exactly what their replay
commands decide on the same trace (one core, two drivers), per-run option columns
included; and their metrics follow from those decisions."""

from __future__ import annotations

import os
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

pytestmark = pytest.mark.spark


def _run(tmp: Any, ds: str, *args: str) -> str:
    out = str(tmp / "out")
    assert main(["pipeline", ds, "--out", out, *args]) == 0
    return out


def _with_ids(rows: list[dict[str, Any]], run: str, extra: dict[str, Any] | None = None
              ) -> list[dict[str, Any]]:
    return [{**r, **(extra or {}), "run": run, "seq": i} for i, r in enumerate(rows)]


def test_causal_two_runs_rckn_and_rc(spark: Any, tmp_path: Any) -> None:
    rows = example_rows("causal")
    rc = {"variant": "rc", "epsilon": 3}
    ds = str(tmp_path / "ds")
    write_table(ds, "events", {"a": rows, "b": rows}, extra={"b": rc})
    out = _run(tmp_path, ds, "--epsilon", "2")
    got = read_out(out, "events")
    for run, extra, args in (("a", {}, ["--epsilon", "2"]),
                             ("b", rc, ["--epsilon", "3", "--variant", "rc"])):
        expected = replay(str(tmp_path), "causal", _with_ids(rows, run, extra), args)
        mine = sorted((r for r in got if r["run"] == run), key=lambda r: r["seq"])
        assert [without_nulls(r) for r in mine] == [without_nulls(r) for r in expected]


def test_merge_per_merger_with_delta_column(spark: Any, tmp_path: Any) -> None:
    rows = example_rows("merge")
    ds = str(tmp_path / "ds")
    write_table(ds, "arrivals", {"d3": rows, "d0": rows}, extra={"d0": {"delta": 0}})
    out = _run(tmp_path, ds, "--epsilon", "2", "--delta", "3")
    got = read_out(out, "arrivals")
    for run, delta in (("d3", "3"), ("d0", "0")):
        expected = replay(str(tmp_path), "merge", rows, ["--epsilon", "2", "--delta", delta])
        for merger in dict.fromkeys(r["merger"] for r in expected):
            mine = sorted((r for r in got if r["run"] == run and r["merger"] == merger),
                          key=lambda r: r["seq"])
            keys = ("merger", "msg", "proc", "action", "time")
            assert [{k: r[k] for k in keys} for r in mine] == \
                [r for r in expected if r["merger"] == merger]
    assert {r["action"] for r in got if r["run"] == "d0"} >= {"deliver", "late"}
    metrics = {(m["run"], m["measure"]): m["value"] for m in read_out(out, "metrics")}
    delivered = [r for r in got if r["run"] == "d3" and r["action"] == "deliver"]
    assert metrics[("d3", "buffering_max")] == max(r["time"] - r["at"] for r in delivered)


def test_slotted_two_channels_interleaved(spark: Any, tmp_path: Any) -> None:
    rows = example_rows("slotted")
    tagged = []
    for a, b in zip(rows, rows, strict=True):
        tagged += [{**a, "channel": "x"}, {**b, "channel": "y"}]
    ds = str(tmp_path / "ds")
    write_table(ds, "channel", {"r": tagged})
    out = _run(tmp_path, ds)
    got = read_out(out, "channel")
    expected = replay(str(tmp_path), "slotted", rows, [])
    assert {r["action"] for r in expected} == {"deliver", "discard"}
    for channel in ("x", "y"):
        mine = sorted((r for r in got if r["channel"] == channel), key=lambda r: r["seq"])
        assert [{"id": r["id"], "action": r["action"]} for r in mine] == expected
        assert all(r["step"] >= r["arrived"] for r in mine)
        assert all(r["reason"] for r in mine if r["action"] == "discard")


def test_stability_timestamp_and_vector_runs(spark: Any, tmp_path: Any) -> None:
    rows = example_rows("stability")
    groups = {"senders": "s1,s2", "receivers": "s1,r1,r2"}
    ds = str(tmp_path / "ds")
    write_table(ds, "acks", {"ts": rows, "vec": rows},
                extra={"ts": groups, "vec": {**groups, "acks": "vector"}})
    out = _run(tmp_path, ds)
    got = read_out(out, "acks")
    for run, acks in (("ts", "timestamp"), ("vec", "vector")):
        extra = {**groups, **({"acks": "vector"} if acks == "vector" else {})}
        expected = replay(str(tmp_path), "stability", _with_ids(rows, run, extra),
                          ["--acks", acks, "--senders", "s1,s2", "--receivers", "s1,r1,r2"])
        mine = []
        for r in sorted((r for r in got if r["run"] == run), key=lambda r: r["seq"]):
            r = without_nulls(r, drop=("ack_bytes",))
            if "value_vector" in r:
                r["value"] = dict(r.pop("value_vector"))
            mine.append(r)
        assert mine == [without_nulls(r) for r in expected]
    metrics = {(m["run"], m["measure"]): m["value"] for m in read_out(out, "metrics")}
    assert metrics[("vec", "ack_bytes_per_ack")] > metrics[("ts", "ack_bytes_per_ack")]
    assert metrics[("ts", "stable")] > 0


def test_stability_groups_default_to_the_trace(spark: Any, tmp_path: Any) -> None:
    rows = [r for r in example_rows("stability")]
    ds = str(tmp_path / "ds")
    write_table(ds, "acks", {"only": rows})
    out = _run(tmp_path, ds)
    assert len(read_out(out, "acks")) == len(rows)
    assert os.path.isdir(os.path.join(out, "metrics"))
