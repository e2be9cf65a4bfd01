"""``timebound.spark``'s batch operators for the other protocols:
``causal_merge``, ``causal_stamp``, ``slotted`` and ``stability`` give every input row, all its columns kept, the
output ``timebound replay`` gives for those rows in decision order, under the caller's
column names; options and columns are refused before any Spark job, a streaming
DataFrame in one line, a bad row inside the job as the ``SchemaError`` naming the
caller's column.

- the bundled examples (src/timebound/examples/merge.jsonl, causal.jsonl,
  slotted.jsonl, stability.jsonl) with renamed columns, and generated traces (several
  mergers, integer ids, ties in ``at``, copies and late arrivals; both variants of
  timestamps; several channels with reordered and lost messages; timestamp and vector
  acks; several executions);
- every result against ``timebound.replay`` (the replay command's Python API) fed the
  same rows in the operator's decision order;
- docs/spark.md: its ``<!-- runnable: operators -->`` examples run and print what the
  page says.
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
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from timebound.errors import SchemaError, UsageError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "src" / "timebound" / "examples"


def replayed(tmp: Path, protocol: str, rows: list[dict[str, Any]], args: list[str]
             ) -> list[dict[str, Any]]:
    """``timebound.replay`` (the replay command's API) on ``rows`` in their order."""
    from timebound.replay import load_commands, replay_rows

    command = next(c for c in load_commands() if c.name == protocol)
    src, dst = tmp / f"{protocol}.jsonl", tmp / f"{protocol}.out.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    replay_rows(command, parser.parse_args(["--input", str(src), "--output", str(dst),
                                            *args]))
    return [json.loads(line) for line in dst.read_text().splitlines()]


_TRACKER_SEES_JOBS: list[bool] = []


@contextlib.contextmanager
def no_job(spark: Any) -> Iterator[None]:
    """Asserts no Spark job ran inside the block (that the tracker does see a job in
    the group is checked once per session)."""
    group = f"tb-ops-{os.getpid()}-{time.monotonic_ns()}"
    spark.sparkContext.setJobGroup(group, "operator checks")
    try:
        yield
        assert list(spark.sparkContext.statusTracker().getJobIdsForGroup(group)) == []
        if not _TRACKER_SEES_JOBS:
            spark.range(3).count()
            assert list(spark.sparkContext.statusTracker().getJobIdsForGroup(group))
            _TRACKER_SEES_JOBS.append(True)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)


# -- causal_merge --------------------------------------------------------------------

MERGE_SCHEMA = "row long, box {id}, mid {id}, sender {id}, arrived long, rr long, cc long, " \
               "stamp array<long>, prio long, note string"


def merge_trace(seed: int, n: int, *, int_ids: bool, epsilon: int) -> list[dict[str, Any]]:
    """Arrivals at 3 mergers: many equal ``arrived`` (ties), copies of earlier
    messages (duplicates, and late ones once their deadline has passed)."""
    rng = random.Random(seed)
    sent: list[tuple[Any, Any, int, int, list[int], int]] = []
    rows, at = [], 0
    prios = rng.sample(range(10 * n), n)
    for i in range(n):
        at += rng.choice((0, 0, 1, 2))
        box = rng.randrange(3)
        if sent and rng.random() < 0.3:
            proc, msg, r, c, kn, first = rng.choice(sent[-8:])
            box = first if rng.random() < 0.7 else box
        else:
            proc = rng.randrange(4) if int_ids else f"p{rng.randrange(4)}"
            msg = i if int_ids else f"m{i}"
            r, c = max(0, at - rng.randint(0, 6)), rng.randint(0, 2)
            kn = [rng.randint(0, 2) for _ in range(2 * epsilon)]
            sent.append((proc, msg, r, c, kn, box))
        rows.append({"row": i, "box": box if int_ids else f"M{box}", "mid": msg,
                     "sender": proc, "arrived": at, "rr": r, "cc": c, "stamp": kn,
                     "prio": prios[i], "note": f"arrival {i}"})
    return rows


def merge_frame(spark: Any, rows: list[dict[str, Any]], int_ids: bool) -> Any:
    return spark.createDataFrame(rows, MERGE_SCHEMA.format(id="long" if int_ids else "string"))


def merge_expected(tmp: Path, ordered: list[dict[str, Any]], args: list[str],
                   variant: str) -> Counter[tuple[Any, ...]]:
    """The replay's rows as (merger, msg, proc, action, time, position) (position: the
    row's index in its merger's output)."""
    out = replayed(tmp, "merge", [
        {"merger": str(r["box"]), "msg": str(r["mid"]), "proc": str(r["sender"]),
         "at": r["arrived"], "r": r["rr"], "c": r["cc"],
         **({"kn": r["stamp"]} if variant == "rckn" else {})} for r in ordered], args)
    assert len(out) == len(ordered)
    positions: Counter[str] = Counter()
    rows = []
    for r in out:
        rows.append((r["merger"], r["msg"], r["proc"], r["action"], r["time"],
                     positions[r["merger"]]))
        positions[r["merger"]] += 1
    return Counter(rows)


def merge_got(got: list[Any]) -> Counter[tuple[Any, ...]]:
    return Counter((str(r["box"]), str(r["mid"]), str(r["sender"]), r["action"], r["time"],
                    r["position"]) for r in got)


@pytest.mark.spark
def test_causal_merge_bundled_example_equals_the_replay(spark: Any, tmp_path: Path) -> None:
    from timebound.spark import causal_merge

    lines = [json.loads(line) for line in (EXAMPLES / "merge.jsonl").read_text().splitlines()]
    rows = [{"row": i, "box": r["merger"], "mid": r["msg"], "sender": r["proc"],
             "arrived": r["at"], "rr": r["r"], "cc": r["c"], "stamp": r["kn"],
             "prio": i, "note": f"line {i + 1}"} for i, r in enumerate(lines)]
    args = ["--epsilon", "2", "--delta", "3"]
    # The file is in `at` order per merger: the replay on the file itself.
    expected = merge_expected(tmp_path, rows, args, "rckn")
    out = causal_merge(merge_frame(spark, rows, False), merger="box", msg="mid",
                       proc="sender", at="arrived", r="rr", c="cc", kn="stamp", epsilon=2,
                       delta=3, order="prio")
    assert out.columns == ["row", "box", "mid", "sender", "arrived", "rr", "cc", "stamp",
                           "prio", "note", "action", "time", "position"]
    got = out.collect()
    assert merge_got(got) == expected
    assert sorted((r["row"], r["note"], r["stamp"]) for r in got) == [
        (r["row"], r["note"], r["stamp"]) for r in rows]  # every row, columns kept
    assert {r["action"] for r in got} == {"deliver", "late", "duplicate"}


@pytest.mark.spark
def test_causal_merge_generated_with_order_equals_the_replay(spark: Any,
                                                             tmp_path: Path) -> None:
    from timebound.spark import causal_merge

    rows = merge_trace(28, 300, int_ids=False, epsilon=3)
    ordered = sorted(rows, key=lambda r: (r["arrived"], r["prio"]))
    expected = merge_expected(tmp_path, ordered, ["--epsilon", "3", "--delta", "2"], "rckn")
    got = causal_merge(merge_frame(spark, rows, False), merger="box", msg="mid",
                       proc="sender", at="arrived", r="rr", c="cc", kn="stamp", epsilon=3,
                       delta=2, order="prio").collect()
    assert merge_got(got) == expected
    by_row = {r["row"]: r for r in got}
    assert len(by_row) == len(rows)
    assert all(by_row[r["row"]]["prio"] == r["prio"] for r in rows)
    actions = Counter(r["action"] for r in got)
    assert min(actions["deliver"], actions["late"], actions["duplicate"]) >= 10
    # each row's own fate: a delivery at the row's deadline is the first arrival of its
    # message that was not late; late and duplicate rows at the row's own time
    first: dict[tuple[Any, ...], int] = {}
    for r in ordered:
        if r["rr"] + r["cc"] + 2 + 3 >= r["arrived"]:
            first.setdefault((r["box"], r["mid"], r["sender"]), r["row"])
    for row in got:
        if row["action"] == "deliver":
            assert row["time"] == row["rr"] + row["cc"] + 2 + 3
            assert first[(row["box"], row["mid"], row["sender"])] == row["row"]
        else:
            assert row["time"] == row["arrived"]
    # position orders each merger's output: deliveries in deadline order
    for box in ("M0", "M1", "M2"):
        mine = sorted((r["position"], r["time"]) for r in got
                      if r["box"] == box and r["action"] == "deliver")
        assert [t for _, t in mine] == sorted(t for _, t in mine)


@pytest.mark.spark
def test_causal_merge_ties_without_order_integer_ids_rc(spark: Any, tmp_path: Path) -> None:
    """No ``order``: equal ``at`` by proc, msg, r, c (the columns' own order: integers
    as numbers). Rows equal in all of them tie on the row hash: which of them is the
    buffered one is compared per such group, as a multiset."""
    from timebound.spark import causal_merge

    rows = merge_trace(7, 300, int_ids=True, epsilon=2)
    key = ("box", "arrived", "sender", "mid", "rr", "cc")
    ordered = sorted(rows, key=lambda r: tuple(r[k] for k in key))
    expected = merge_expected(tmp_path, ordered, ["--epsilon", "2", "--delta", "1",
                                                  "--variant", "rc"], "rc")
    df = merge_frame(spark, rows, True).drop("stamp")
    got = causal_merge(df, merger="box", msg="mid", proc="sender", at="arrived", r="rr",
                       c="cc", epsilon=2, delta=1, variant="rc").collect()
    assert merge_got(got) == expected
    ties = sum(1 for a, b in zip(ordered, ordered[1:])
               if (a["box"], a["arrived"]) == (b["box"], b["arrived"]))
    assert ties > 30


# -- stability ----------------------------------------------------------------------

STAB_SCHEMA = "run string, n int, kind string, who string, t long, stamp long, " \
              "sender string, ackid string, prio long"


def stability_rows(lines: list[dict[str, Any]], run: str = "x") -> list[dict[str, Any]]:
    return [{"run": run, "n": i, "kind": r["type"], "who": r["node"], "t": r["at"],
             "stamp": r.get("ts"), "sender": r.get("from"), "ackid": r.get("id", r.get("ack")),
             "prio": i} for i, r in enumerate(lines)]


def as_replay(r: dict[str, Any]) -> dict[str, Any]:
    row = {"type": r["kind"], "node": r["who"], "at": r["t"]}
    if r["stamp"] is not None:
        row["ts"] = r["stamp"]
    if r["sender"] is not None:
        row["from"] = r["sender"]
    if r["ackid"] is not None:
        row["id" if r["kind"] == "ack" else "ack"] = r["ackid"]
    return row


RANK = {"send": 0, "recv": 1, "ack": 2, "ackrecv": 3}


def stability_order(rows: list[dict[str, Any]], prio: bool) -> list[dict[str, Any]]:
    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return (r["t"], r["prio"] if prio else 0, RANK[r["kind"]], r["who"],
                r["stamp"] or -1, r["sender"] or "", r["ackid"] or "")

    return sorted(rows, key=key)


def stability_expected(tmp: Path, ordered: list[dict[str, Any]], args: list[str]
                       ) -> dict[tuple[str, int], tuple[Any, ...]]:
    out = replayed(tmp, "stability", [as_replay(r) for r in ordered], args)
    assert len(out) == len(ordered)
    return {(r["run"], r["n"]): (o.get("delivered"), o.get("value"), o.get("stable"))
            for r, o in zip(ordered, out, strict=True)}


def stability_got(got: list[Any]) -> dict[tuple[str, int], tuple[Any, ...]]:
    def value(v: Any) -> Any:
        return dict(v) if isinstance(v, dict) else v

    return {(r["run"], r["n"]): (r["delivered"], value(r["value"]), r["stable"]) for r in got}


STAB_ARGS = ["--senders", "s1,s2", "--receivers", "r1,r2,s1"]


@pytest.mark.spark
@pytest.mark.parametrize("acks", ["timestamp", "vector"])
def test_stability_bundled_example_equals_the_replay(spark: Any, tmp_path: Path,
                                                     acks: str) -> None:
    from timebound.spark import stability

    lines = [json.loads(line) for line in
             (EXAMPLES / "stability.jsonl").read_text().splitlines()]
    rows = stability_rows(lines)
    args = ["--acks", acks, *STAB_ARGS]
    expected = stability_expected(tmp_path, stability_order(rows, prio=False), args)
    # the example's own file order (not `at` order across nodes) answers the same
    in_file = stability_expected(tmp_path, rows, args)
    assert in_file == expected
    out = stability(spark.createDataFrame(rows, STAB_SCHEMA), type="kind", node="who",
                    at="t", ts="stamp", origin="sender", ack="ackid", acks=acks,
                    senders=["s1", "s2"], receivers="r1,r2,s1")
    assert out.columns == ["run", "n", "kind", "who", "t", "stamp", "sender", "ackid",
                           "prio", "delivered", "value", "stable"]
    got = out.collect()
    assert stability_got(got) == expected
    assert any(r["stable"] for r in got) and any(r["delivered"] is False for r in got)


def stability_trace(seed: int, n: int, run: str) -> list[dict[str, Any]]:
    """Senders s1, s2; receivers r1, r2, s1. Events at non-decreasing times (ties):
    sends (a sender's at distinct times), receipts of sent messages (some twice, some
    out of order), acks, and receipts of acks sent earlier; a unique ``prio`` per row
    (so rows at one time may go in any order the trace allows)."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    t = 0
    sent: dict[str, list[int]] = {"s1": [], "s2": []}
    acks: list[tuple[str, int]] = []
    last = {"s1": 0, "s2": 0}
    heard: dict[tuple[str, str], int] = {}
    while len(rows) < n:
        t += rng.choice((0, 0, 1, 3))
        pick = rng.random()
        row: dict[str, Any] = {"run": run, "stamp": None, "sender": None, "ackid": None}
        earlier = [a for a, at in acks[-6:] if at < t]
        if pick < 0.2 or not (sent["s1"] or sent["s2"]):
            who = rng.choice(("s1", "s2"))
            if last[who] >= t:
                t = last[who] + 1
            last[who] = t
            sent[who].append(t)
            row |= {"kind": "send", "who": who, "stamp": t}
        elif pick < 0.7:
            origin = rng.choice([s for s in sent if sent[s]])
            who = rng.choice(("r1", "r2", "s1"))
            got = heard.get((who, origin), 0)
            if got < len(sent[origin]) and rng.random() < 0.8:  # the next one, in order
                heard[(who, origin)] = got + 1
                stamp = sent[origin][got]
            else:
                stamp = rng.choice(sent[origin][-3:])
            row |= {"kind": "recv", "who": who, "sender": origin, "stamp": stamp}
        elif pick < 0.82 or not earlier:
            ident = f"a{len(acks)}"
            acks.append((ident, t))
            row |= {"kind": "ack", "who": rng.choice(("r1", "r2", "s1")), "ackid": ident}
        else:
            row |= {"kind": "ackrecv", "who": rng.choice(("s1", "s2")),
                    "ackid": rng.choice(earlier)}
        rows.append(row | {"t": t})
    prios = rng.sample(range(10 * n), n)
    return [r | {"n": i, "prio": prios[i]} for i, r in enumerate(rows)]


@pytest.mark.spark
def test_stability_generated_groups_with_order_equal_the_replay(spark: Any,
                                                                tmp_path: Path) -> None:
    """Two executions in one DataFrame (``group``), ties in ``at`` broken by ``order``:
    each execution equals the replay on its own rows in decision order."""
    from timebound.spark import stability

    runs = {"a": stability_trace(1, 250, "a"), "b": stability_trace(2, 150, "b")}
    args = ["--acks", "vector", *STAB_ARGS]
    expected: dict[tuple[str, int], tuple[Any, ...]] = {}
    for run, rows in runs.items():
        (tmp_path / run).mkdir()
        expected |= stability_expected(tmp_path / run, stability_order(rows, prio=True), args)
    df = spark.createDataFrame(runs["a"] + runs["b"], STAB_SCHEMA)
    got = stability(df, type="kind", node="who", at="t", ts="stamp", origin="sender",
                    ack="ackid", acks="vector", senders="s1,s2",
                    receivers=["r1", "r2", "s1"], group="run", order="prio").collect()
    assert stability_got(got) == expected
    assert sum(len(r["stable"] or ()) for r in got) >= 8  # messages made stable
    assert Counter(r["delivered"] for r in got if r["kind"] == "recv").keys() == {True, False}


# -- causal_stamp --------------------------------------------------------------------

STAMP_SCHEMA = "run string, seq long, event string, process {id}, clock long, message {id}"


def stamp_trace(seed: int, n: int, run: str) -> list[dict[str, Any]]:
    """Events of 4 processes in a causally consistent order (``seq``), each process's
    clock increasing, every recv of a message sent earlier (by another process)."""
    rng = random.Random(seed)
    clock = dict.fromkeys(range(4), 0)
    sent: list[tuple[int, int]] = []
    heard: set[tuple[int, int]] = set()
    rows = []
    for seq in range(n):
        proc = rng.randrange(4)
        clock[proc] += rng.randint(1, 3)
        waiting = [m for m, by in sent[-10:] if by != proc and (m, proc) not in heard]
        pick = rng.random()
        msg: int | None
        if pick < 0.45 and waiting:
            heard_one = rng.choice(waiting)
            heard.add((heard_one, proc))
            msg, kind = heard_one, "recv"
        elif pick < 0.8:
            msg, kind = seq, "send"
            sent.append((seq, proc))
        else:
            msg, kind = None, "local"
        rows.append({"run": run, "seq": seq, "event": kind, "process": proc,
                     "clock": clock[proc], "message": msg})
    return rows


def stamp_expected(tmp: Path, rows: list[dict[str, Any]], args: list[str]
                   ) -> dict[tuple[str, int], tuple[Any, ...]]:
    out = replayed(tmp, "causal", [
        {"type": r["event"], "proc": str(r["process"]), "rt": r["clock"],
         **({} if r["message"] is None else {"msg": str(r["message"])})}
        for r in sorted(rows, key=lambda r: r["seq"])], args)
    return {(r["run"], r["seq"]): (o["r"], o["c"], o.get("kn"))
            for r, o in zip(sorted(rows, key=lambda r: r["seq"]), out, strict=True)}


def stamp_got(got: list[Any]) -> dict[tuple[str, int], tuple[Any, ...]]:
    return {(r["run"], r["seq"]): (r["r"], r["c"], r["kn"] if "kn" in r else None)
            for r in got}


@pytest.mark.spark
def test_causal_stamp_bundled_example_equals_the_replay(spark: Any, tmp_path: Path) -> None:
    """The example's receives read earlier clocks than their sends (loose clocks): the
    order is the ``seq`` column, not ``rt``."""
    from timebound.spark import causal_stamp

    lines = [json.loads(line) for line in (EXAMPLES / "causal.jsonl").read_text().splitlines()]
    rows = [{"run": "x", "seq": i, "event": r["type"], "process": r["proc"],
             "clock": r["rt"], "message": r.get("msg")} for i, r in enumerate(lines)]
    expected = stamp_expected(tmp_path, rows, ["--epsilon", "2"])
    out = causal_stamp(spark.createDataFrame(rows[::-1], STAMP_SCHEMA.format(id="string")),
                       type="event", proc="process", rt="clock", msg="message",
                       order="seq", epsilon=2)
    assert out.columns == ["run", "seq", "event", "process", "clock", "message", "r", "c",
                           "kn"]
    got = out.collect()
    assert stamp_got(got) == expected and len(got) == len(rows)
    assert any(r["event"] == "recv" and r["clock"] < 3 for r in got)


@pytest.mark.spark
@pytest.mark.parametrize("variant", ["rckn", "rc"])
def test_causal_stamp_generated_groups_equal_the_replay(spark: Any, tmp_path: Path,
                                                        variant: str) -> None:
    from timebound.spark import causal_stamp

    runs = {"a": stamp_trace(3, 200, "a"), "b": stamp_trace(4, 120, "b")}
    args = ["--epsilon", "3", "--variant", variant]
    expected: dict[tuple[str, int], tuple[Any, ...]] = {}
    for run, rows in runs.items():
        (tmp_path / run).mkdir()
        expected |= stamp_expected(tmp_path / run, rows, args)
    df = spark.createDataFrame(runs["a"] + runs["b"], STAMP_SCHEMA.format(id="long"))
    out = causal_stamp(df, type="event", proc="process", rt="clock", msg="message",
                       order="seq", epsilon=3, variant=variant, group="run")
    assert ("kn" in out.columns) == (variant == "rckn")
    got = out.collect()
    assert stamp_got(got) == expected
    assert len({c for _r, c, _kn in expected.values()}) > 1  # counters do move


@pytest.mark.spark
def test_causal_stamp_ties_in_order_go_by_rt_then_type(spark: Any, tmp_path: Path) -> None:
    """Equal ``order`` (a coarse global clock): a process's events by ``rt``, then a
    send before a receive."""
    from timebound.spark import causal_stamp

    rows = [  # (order, type, proc, rt, msg), the replay's order
        (1, "local", "p0", 3, None), (1, "send", "p0", 4, "m1"), (1, "local", "p1", 5, None),
        (2, "send", "p1", 6, "m2"), (2, "recv", "p0", 6, "m2"), (2, "recv", "p1", 7, "m1"),
        (3, "local", "p0", 9, None)]
    data = [{"run": "x", "seq": o, "event": t, "process": p, "clock": rt, "message": m}
            for o, t, p, rt, m in rows]
    out = replayed(tmp_path, "causal", [
        {"type": t, "proc": p, "rt": rt, **({"msg": m} if m else {})}
        for _o, t, p, rt, m in rows], ["--epsilon", "2"])
    expected = Counter((t, p, rt, o["r"], o["c"], tuple(o["kn"]))
                       for (_o, t, p, rt, _m), o in zip(rows, out, strict=True))
    got = causal_stamp(spark.createDataFrame(data[::-1], STAMP_SCHEMA.format(id="string")),
                       type="event", proc="process", rt="clock", msg="message",
                       order="seq", epsilon=2).collect()
    assert Counter((r["event"], r["process"], r["clock"], r["r"], r["c"], tuple(r["kn"]))
                   for r in got) == expected


# -- slotted ------------------------------------------------------------------------

SLOT_SCHEMA = "chan string, step long, what string, msg {id}, sort string"


def slot_trace(seed: int, n: int, chan: str) -> list[dict[str, Any]]:
    """``n`` sends of every kind; reliable messages always arrive, unreliable ones
    mostly; arrivals reordered (each after its send), interleaved with the sends."""
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    pending: list[tuple[int, str]] = []
    for i in range(n):
        kind = rng.choice(("FR", "R", "R", "F", "F", "N"))
        events.append({"what": "send", "msg": i, "sort": kind})
        if kind in ("FR", "R") or rng.random() < 0.8:
            pending.append((i, kind))
        while pending and rng.random() < 0.5:
            msg, _kind = pending.pop(rng.randrange(len(pending)))
            events.append({"what": "arrive", "msg": msg, "sort": None})
    rng.shuffle(pending)
    events += [{"what": "arrive", "msg": msg, "sort": None} for msg, _kind in pending]
    return [{"chan": chan, "step": step, **e} for step, e in enumerate(events)]


def slot_expected(tmp: Path, rows: list[dict[str, Any]]) -> dict[tuple[str, int], Any]:
    out = replayed(tmp, "slotted", [
        {"type": r["what"], "id": str(r["msg"]), **({"kind": r["sort"]} if r["sort"] else {})}
        for r in rows], [])
    arrive = {str(r["msg"]): (r["chan"], r["step"]) for r in rows if r["what"] == "arrive"}
    expected: dict[tuple[str, int], Any] = {(r["chan"], r["step"]): (None, None) for r in rows}
    for position, o in enumerate(out):
        expected[arrive[o["id"]]] = (o["action"], position)
    return expected


def slot_got(got: list[Any]) -> dict[tuple[str, int], Any]:
    return {(r["chan"], r["step"]): (r["action"], r["position"]) for r in got}


@pytest.mark.spark
def test_slotted_bundled_example_equals_the_replay(spark: Any, tmp_path: Path) -> None:
    from timebound.spark import slotted

    lines = [json.loads(line) for line in (EXAMPLES / "slotted.jsonl").read_text().splitlines()]
    rows = [{"chan": "c", "step": i, "what": r["type"], "msg": r["id"], "sort": r.get("kind")}
            for i, r in enumerate(lines)]
    expected = slot_expected(tmp_path, rows)
    out = slotted(spark.createDataFrame(rows[::-1], SLOT_SCHEMA.format(id="string")),
                  type="what", id="msg", kind="sort", order="step")
    assert out.columns == ["chan", "step", "what", "msg", "sort", "action", "position"]
    got = out.collect()
    assert slot_got(got) == expected and len(got) == len(rows)
    assert {r["action"] for r in got} == {"deliver", "discard", None}


@pytest.mark.spark
def test_slotted_generated_channels_equal_the_replay(spark: Any, tmp_path: Path) -> None:
    from timebound.spark import slotted

    chans = {"a": slot_trace(5, 150, "a"), "b": slot_trace(6, 100, "b")}
    expected: dict[tuple[str, int], Any] = {}
    for chan, rows in chans.items():
        (tmp_path / chan).mkdir()
        expected |= slot_expected(tmp_path / chan, rows)
    df = spark.createDataFrame(chans["a"] + chans["b"], SLOT_SCHEMA.format(id="long"))
    got = slotted(df, type="what", id="msg", kind="sort", order="step",
                  group="chan").collect()
    assert slot_got(got) == expected
    actions = Counter(r["action"] for r in got if r["what"] == "arrive")
    assert actions["deliver"] > 100 and actions["discard"] >= 3


# -- errors -------------------------------------------------------------------------

MERGE_CALL = {"merger": "box", "msg": "mid", "proc": "sender", "at": "arrived", "r": "rr",
              "c": "cc", "kn": "stamp", "epsilon": 2, "delta": 3}
STAMP_CALL = {"type": "event", "proc": "process", "rt": "clock", "msg": "message",
              "order": "seq", "epsilon": 2}
STAB_CALL = {"type": "kind", "node": "who", "at": "t", "ts": "stamp", "origin": "sender",
             "ack": "ackid", "senders": "s1", "receivers": "r1"}
OPTION_ERRORS = [
    ("merge", {"epsilon": 0}, "epsilon: must be >= 1, got 0"),
    ("merge", {"delta": -1}, "delta: must be >= 0, got -1"),
    ("merge", {"delta": None}, "delta: required here"),
    ("merge", {"variant": "rx"}, "variant: expected one of rckn, rc, got 'rx'"),
    ("merge", {"variant": "rc"}, "kn: not used with variant rc"),
    ("merge", {"kn": None}, "kn: required with variant rckn (or variant='rc')"),
    ("merge", {"r": None}, "r: expected a column name (a string), got None"),
    ("merge", {"order": 3}, "order: expected a column name (a string) or None, got 3"),
    ("stamp", {"epsilon": None}, "epsilon: required here"),
    ("stamp", {"variant": "rc", "n": 3}, "n: not used with variant rc"),
    ("stamp", {"order": None}, "order: expected a column name (a string), got None"),
    ("slotted", {"order": None}, "order: expected a column name (a string), got None"),
    ("stability", {"acks": "scalar"}, "acks: expected timestamp or vector, got 'scalar'"),
    ("stability", {"senders": None}, "senders: required here"),
    ("stability", {"senders": ["s1", 2]}, "senders: expected a list of node names, got"),
    ("stability", {"receivers": "r1,r1"}, "receivers: names a node twice: 'r1,r1'"),
]
MERGE_BASE = MERGE_SCHEMA.format(id="string")
SCHEMAS_STAMP = "run string, seq long, event string, process string, clock long, " \
                "message string"
STAB_BASE = STAB_SCHEMA
COLUMN_ERRORS = [
    ("merge", MERGE_BASE, {"msg": "message"}, "column 'message': missing (msg=)"),
    ("merge", MERGE_BASE.replace("stamp array<long>", "stamp array<string>"), {},
     "column 'stamp': kn= needs an array of integers column, found array<string>"),
    ("merge", MERGE_BASE.replace("rr long", "rr double"), {},
     "column 'rr': r= needs an integer column, found double"),
    ("merge", MERGE_BASE.replace("box string", "box double"), {},
     "column 'box': merger= needs a string or integer column, found double"),
    ("merge", MERGE_BASE + ", position int", {},
     "column 'position': already present: causal_merge adds it"),
    ("merge", MERGE_BASE + ", __timebound_tie long", {},
     "column '__timebound_tie': names starting with '__timebound_' are causal_merge's own"),
    ("merge", MERGE_BASE, {"order": "note"}, None),  # the control case: accepted
    ("stamp", SCHEMAS_STAMP, {"order": "sequence"}, "column 'sequence': missing (order="),
    ("stamp", SCHEMAS_STAMP + ", kn string", {}, "column 'kn': already present: causal_stamp"),
    ("stamp", SCHEMAS_STAMP + ", kn string", {"variant": "rc"}, None),  # rc adds no kn
    ("stamp", SCHEMAS_STAMP.replace("clock long", "clock string"), {},
     "column 'clock': rt= needs an integer column, found string"),
    ("slotted", SLOT_SCHEMA.format(id="string") + ", position long", {},
     "column 'position': already present: slotted adds it"),
    ("slotted", SLOT_SCHEMA.format(id="double"), {},
     "column 'msg': id= needs a string or integer column, found double"),
    ("stability", STAB_BASE, {"ack": "ack_id"}, "column 'ack_id': missing (ack=)"),
    ("stability", STAB_BASE.replace("kind string", "kind int"), {},
     "column 'kind': type= needs a string column, found int"),
    ("stability", STAB_BASE + ", stable boolean", {},
     "column 'stable': already present: stability adds it"),
    ("stability", STAB_BASE, {"group": "runs"}, "column 'runs': missing (group=)"),
    ("stability", STAB_BASE, {"group": "run", "order": "prio"}, None),
]


def call(protocol: str, df: Any, kwargs: dict[str, Any]) -> Any:
    from timebound.spark import causal_merge, causal_stamp, slotted, stability

    if protocol == "merge":
        return causal_merge(df, **{**MERGE_CALL, **kwargs})
    if protocol == "stamp":
        return causal_stamp(df, **{**STAMP_CALL, **kwargs})
    if protocol == "slotted":
        return slotted(df, **{"type": "what", "id": "msg", "kind": "sort", "order": "step",
                              **kwargs})
    return stability(df, **{**STAB_CALL, **kwargs})


SCHEMAS = {"merge": MERGE_BASE, "stability": STAB_BASE,
           "stamp": STAMP_SCHEMA.format(id="string"), "slotted": SLOT_SCHEMA.format(id="string")}


@pytest.mark.spark
@pytest.mark.parametrize(("protocol", "kwargs", "message"), OPTION_ERRORS)
def test_options_are_refused_before_any_job(spark: Any, protocol: str,
                                            kwargs: dict[str, Any], message: str) -> None:
    df = spark.createDataFrame([], SCHEMAS[protocol])
    with no_job(spark), pytest.raises(UsageError) as raised:
        call(protocol, df, kwargs)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)


@pytest.mark.spark
@pytest.mark.parametrize(("protocol", "schema", "kwargs", "message"), COLUMN_ERRORS)
def test_columns_are_checked_before_any_job(spark: Any, protocol: str, schema: str,
                                            kwargs: dict[str, Any],
                                            message: str | None) -> None:
    df = spark.createDataFrame([], schema)
    with no_job(spark):
        if message is None:
            assert call(protocol, df, kwargs).columns[:len(df.columns)] == df.columns
        else:
            with pytest.raises(SchemaError) as raised:
                call(protocol, df, kwargs)
            text = str(raised.value)
            assert text.startswith(f"table 'DataFrame', {message}") and "\n" not in text


@pytest.mark.spark
@pytest.mark.parametrize("protocol", ["stamp", "slotted", "stability"])
def test_a_streaming_dataframe_is_refused_in_one_line(spark: Any, tmp_path: Path,
                                                      protocol: str) -> None:
    df = spark.readStream.schema(SCHEMAS[protocol]).json(str(tmp_path))
    with pytest.raises(UsageError) as raised:
        call(protocol, df, {})
    name = {"merge": "causal_merge", "stamp": "causal_stamp"}.get(protocol, protocol)
    assert str(raised.value) == (f"df: a streaming DataFrame: {name} takes a batch "
                                 "DataFrame only (streaming is not supported yet)")


@pytest.mark.spark
def test_bad_rows_stop_the_job_naming_the_column(spark: Any) -> None:
    from timebound.spark import typed_errors

    merge = spark.createDataFrame(
        [(0, "M1", "m1", "p1", 4, 2, 0, [1, 0, 1, 0], 0, ""),
         (1, "M1", "m2", "p1", 5, None, 0, [1, 0, 1, 0], 1, "")], MERGE_BASE)
    with pytest.raises(SchemaError) as raised, typed_errors():
        call("merge", merge, {}).collect()
    assert raised.value.column == "rr"
    assert raised.value.reason == ("missing (row with box = M1, mid = m2, sender = p1, "
                                   "arrived = 5, rr = null, cc = 0, stamp = [1, 0, 1, 0])")
    acks = spark.createDataFrame(
        [("x", 0, "send", "s1", 1, 1, None, None, 0),
         ("x", 1, "ackrecv", "s1", 2, None, None, "a9", 1)], STAB_BASE)
    with pytest.raises(SchemaError) as raised, typed_errors():
        call("stability", acks, {}).collect()
    assert raised.value.column == "ackid"
    assert raised.value.reason.startswith("ack id 'a9' was never sent (row with kind = "
                                          "ackrecv, who = s1, t = 2")
    events = spark.createDataFrame(
        [("x", 0, "send", "p0", 1, "m1"), ("x", 1, "recv", "p1", 2, "m7")], SCHEMAS_STAMP)
    with pytest.raises(SchemaError) as raised, typed_errors():
        call("stamp", events, {}).collect()
    assert raised.value.column == "message"
    assert raised.value.reason == ("message 'm7' was never sent (before this row) (row with "
                                   "event = recv, process = p1, clock = 2, message = m7, "
                                   "seq = 1)")


# -- docs/spark.md ------------------------------------------------------------------


def runnable_examples() -> list[tuple[str, str]]:
    text = (ROOT / "docs" / "spark.md").read_text(encoding="utf-8")
    return re.findall(r"<!-- runnable: operators -->\n```python\n(.*?)```\n\nprints\n\n"
                      r"```text\n(.*?)```", text, re.S)


def test_docs_mark_the_operator_examples() -> None:
    examples = runnable_examples()
    assert len(examples) == 6
    assert "causal_merge(" in examples[0][0] and "readStream" in examples[1][0]
    assert "causal_stamp(" in examples[2][0] and "causal_stamp(" in examples[3][0]
    assert "slotted(" in examples[4][0] and "stability(" in examples[5][0]


@pytest.mark.spark
@pytest.mark.parametrize("index", [0, 1, 2, 3, 4, 5],
                         ids=["causal_merge", "causal_merge_stream", "causal_stamp",
                              "causal_stamp_skewed", "slotted", "stability"])
def test_docs_examples_print_what_the_page_says(spark: Any, index: int) -> None:
    code, printed = runnable_examples()[index]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"docs/spark.md operator example {index + 1}", "exec"),
             {"__name__": "x"})
    assert out.getvalue() == printed
