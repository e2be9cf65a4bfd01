"""The stream engine (``timebound.spark``'s ``_stream``: ``at_most_once`` on a stream,
and ``timebound stream atmostonce`` through it) decides a key's micro-batches as an
independent row-by-row reference does: the same verdict rows, the same errors.

The differential part runs without Spark: each key's micro-batches go to the
command's ``Decider`` as ``applyInPandasWithState`` hands them over (a pandas frame of
the input and working columns, nullable integers as pandas' ``Int64``), and to the
reference: one ``AtMostOnceAdapter`` (the replay's) fed every row in ``seq`` order,
``at`` raised to the receiver's clock. The engine restores its receiver from the
state at every micro-batch; the reference never does. The stream part checks that
integers beyond 2**53 in a nullable column cross to the workers exactly.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import pytest

from tests.test_stream_atmostonce import SHUFFLE, amo_trace, options, read_table
from timebound.errors import TraceError

COLUMNS = ("run", "seq", "type", "receiver", "conn", "ts", "at", "down", "original",
           "_file", "_line")
KEY = ("r1", "s1", 0)


class State:
    """A ``GroupState`` in memory, as the engine reads it (``StateValue``)."""

    def __init__(self) -> None:
        self.value: tuple[Any, ...] | None = None

    def get(self) -> tuple[Any, ...] | None:
        return self.value

    def update(self, value: tuple[Any, ...]) -> None:
        self.value = value


def decider(opts: Any) -> Any:
    """The command's engine function (``timebound stream atmostonce``)."""
    from timebound.spark._stream import Decider, trace_plan

    return Decider(opts, trace_plan(), None, list(COLUMNS), [])


def as_spark_frame(rows: list[dict[str, Any]]) -> Any:
    """The frame ``applyInPandasWithState`` gives the command's engine: the source's
    columns, then the working columns ``traced`` adds (nullable integers ``Int64``)."""
    import pandas as pd

    from timebound.spark._check import AT, CLS, CONN, DOWN, KIND, RECEIVER, TS
    from timebound.spark._stream import NO_SEQ

    data: dict[str, Any] = {c: [row.get(c) for row in rows] for c in COLUMNS}
    data[NO_SEQ] = [row.get("seq") is None for row in rows]
    for working, column in ((KIND, "type"), (RECEIVER, "receiver"), (CONN, "conn"),
                            (TS, "ts"), (AT, "at"), (DOWN, "down")):
        data[working] = data[column]
    data[CLS] = [0] * len(rows)
    frame = pd.DataFrame(data)
    for name in ("seq", "ts", "at", "down", "_line", TS, AT, DOWN, CLS):
        frame[name] = frame[name].astype(pd.Int64Dtype())
    return frame


def decide(engine: Any, part: list[dict[str, Any]], state: State) -> list[dict[str, Any]]:
    """One micro-batch of key ``KEY`` through ``engine``: its output rows."""
    out = engine.decide_frame(KEY, as_spark_frame(part), state)
    rows: list[dict[str, Any]] = out.astype(object).where(out.notna(), None).to_dict("records")
    return rows


class Reference:
    """Row by row, as the replay decides: every row in ``seq`` order, ``at`` raised to
    the receiver's clock (``late_arrival`` when that raised it)."""

    def __init__(self, opts: Any) -> None:
        from timebound.adapters.atmostonce import AtMostOnceAdapter, AtMostOnceOptions

        self.adapter = AtMostOnceAdapter(AtMostOnceOptions(opts.receiver, 1))
        self.clock: int | None = None

    def decide(self, part: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from timebound.adapters import Row

        out = []
        for row in sorted(part, key=lambda r: r["seq"]):
            at = row["at"]
            late = self.clock is not None and at < self.clock
            self.clock = at if self.clock is None else max(self.clock, at)
            data = {k: v for k, v in row.items()
                    if v is not None and not k.startswith("_")}
            for produced in self.adapter.feed(Row(row["_file"], row["_line"],
                                                  {**data, "at": self.clock})):
                out.append({**{c: row.get(c) for c in COLUMNS}, "verdict": produced["verdict"],
                            "rho": produced["rho"], "entries": produced["entries"],
                            "late_arrival": late, "cls": 0})
        return out


def batches(seed: int, args: list[str]) -> tuple[list[list[dict[str, Any]]], Any]:
    """One key's rows in 4 micro-batches (shuffled within each, some files late)."""
    rng = random.Random(seed)
    rows = [r for r in amo_trace(seed, 160, crashes="--resilient" in args,
                                 receivers=("s1",))]
    for i, row in enumerate(rows):
        row.update(original=None, _file=f"f{i // 40:02d}.jsonl", _line=i % 40 + 1)
    parts = [rows[i:i + 40] for i in range(0, len(rows), 40)]
    if seed % 2:  # a late file: its rows' `at` behind the clock of the batch before
        parts[1], parts[2] = parts[2], parts[1]
    for part in parts:
        rng.shuffle(part)
    return parts, options(args)


ARGS = [
    ["--estimator", "fixed", "--rho", "30", "--gc-every", "20"],
    ["--estimator", "unlimited", "--gc-every", "16", "--resilient", "--beta", "60",
     "--latest-every", "25"],
    ["--estimator", "limited", "--window", "6", "--spikes", "1", "--p", "2"],
]


@pytest.mark.parametrize("args", ARGS, ids=["fixed", "unlimited-crashes", "limited"])
@pytest.mark.parametrize("seed", range(6))
def test_the_engine_decides_as_the_row_by_row_reference(seed: int, args: list[str]) -> None:
    parts, opts = batches(seed, args)
    engine, reference, state = decider(opts), Reference(opts), State()
    late = decided = 0
    for part in parts:
        try:
            expected: Any = reference.decide(part)
        except TraceError as exc:  # a late file may crash a receiver still down
            expected = str(exc)
        try:
            got: Any = decide(engine, part, state)
        except TraceError as exc:
            got = str(exc)
        assert got == expected
        if isinstance(got, str):
            break
        late += sum(r["late_arrival"] for r in got)
        decided += len(got)
    assert decided >= 40
    if "--resilient" not in args:
        assert (late > 0) == bool(seed % 2)  # the late file is marked late, only it


def test_a_malformed_row_fails_as_in_the_reference() -> None:
    parts, opts = batches(0, ARGS[0])
    part = parts[0]
    part[7] = {**part[7], "conn": None}
    with pytest.raises(TraceError) as expected:
        Reference(opts).decide(part)
    with pytest.raises(TraceError) as raised:
        decide(decider(opts), part, State())
    assert str(raised.value) == str(expected.value) and "field 'conn'" in str(raised.value)


@pytest.mark.spark
def test_integers_beyond_2_to_the_53_cross_exactly(spark: Any, tmp_path: Path) -> None:
    """``seq`` 2**60 + 1 and 2**60 + 2 (the column has nulls, so without pandas'
    nullable integers they would both be the float 2**60) decide which copy is the
    accepted one."""
    from timebound.stream import stream_atmostonce

    big = 2**60
    rows = [{"run": "r", "seq": big + 2, "type": "msg", "receiver": "s", "conn": "c",
             "ts": big + 5, "at": 10},
            {"run": "r", "seq": big + 1, "type": "msg", "receiver": "s", "conn": "c",
             "ts": big + 5, "at": 10},
            {"run": "r", "seq": None, "type": "msg", "receiver": "s", "conn": "d",
             "ts": 1, "at": 11}]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    stream_atmostonce(str(tmp_path / "in"), str(tmp_path / "ck"), str(tmp_path / "sink"),
                      options(["--rho", "100", "--gc-every", "50"]), spark=spark,
                      conf=SHUFFLE, out=io.StringIO())
    got = {r["line"]: (r["seq"], r["ts"], r["verdict"])
           for r in read_table(tmp_path / "sink" / "verdicts")}
    assert got == {1: (big + 2, big + 5, "duplicate"), 2: (big + 1, big + 5, "accepted"),
                   3: (None, 1, "accepted")}


def _decide_each(function: Any, state: State, parts: list[list[dict[str, Any]]], cold: bool
                 ) -> list[Any]:
    """Each micro-batch's verdict rows and state through ``processor`` (``cold``: no
    warm receiver in this process before any of them), up to the first error (its
    text ends the list)."""
    from timebound.spark.traces import _stream_atmostonce as engine

    out: list[Any] = []
    for part in parts:
        if cold:
            engine.forget_warm_receivers()
        try:
            rows = decide(function, part, state)
        except TraceError as exc:
            out.append(str(exc))
            break
        out.append((rows, state.value))
    return out


def _decided_alone(opts: Any, parts: list[list[dict[str, Any]]]) -> list[Any]:
    """Each micro-batch's verdict rows and state, every receiver decoded from its state
    (no warm receiver in this process)."""
    from timebound.spark.traces import _stream_atmostonce as engine

    try:
        return _decide_each(decider(opts), State(), parts, cold=True)
    finally:
        engine.forget_warm_receivers()


@pytest.mark.parametrize("args", ARGS, ids=["fixed", "unlimited-crashes", "limited"])
@pytest.mark.parametrize("seed", range(4))
def test_a_warm_receiver_decides_as_a_decoded_one(seed: int, args: list[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The receiver this process saved is taken back without decoding the state, and
    decides every later micro-batch as the decoded one does (the same rows, the same
    state bytes, the same error where a late file crashes a receiver still down)."""
    from timebound.spark.traces import _stream_atmostonce as engine

    parts, opts = batches(seed, args)
    expected = _decided_alone(opts, parts)
    warm, state = decider(opts), State()
    got = _decide_each(warm, state, parts[:1], cold=False)
    assert isinstance(got[0], tuple)

    def no_decode(blob: bytes) -> Any:
        raise AssertionError("a warm receiver was decoded")

    monkeypatch.setattr(engine, "decode", no_decode)
    try:
        got += _decide_each(warm, state, parts[1:], cold=False)
    finally:
        engine.forget_warm_receivers()
    assert got == expected
    assert len(got) >= 2


def test_a_failed_micro_batch_leaves_no_warm_receiver() -> None:
    """A micro-batch that fails after deciding some rows with the warm receiver: its
    retry (the state Spark kept, the rows fixed) decides from the decoded state, as a
    process that never had the receiver does."""
    from timebound.spark.traces import _stream_atmostonce as engine

    parts, opts = batches(0, ARGS[0])
    bad = [dict(row) for row in sorted(parts[1], key=lambda r: r["seq"])]
    bad[-1]["conn"] = None  # the last row: every row before it is decided first
    fixed = sorted(parts[1], key=lambda r: r["seq"])
    expected = _decided_alone(opts, [parts[0], fixed])
    warm, state = decider(opts), State()
    decide(warm, parts[0], state)
    kept = state.value
    with pytest.raises(TraceError):
        decide(warm, bad, state)
    assert state.value == kept  # Spark keeps the state of the batch before
    got = decide(warm, fixed, state)
    engine.forget_warm_receivers()
    assert (got, state.value) == expected[1]


def test_warm_receivers_are_bounded_in_number_and_bytes(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """The process keeps the receivers it saved last, within ``WARM_KEYS`` and
    ``WARM_BYTES`` of their states; the one just saved stays while it fits alone."""
    from timebound.spark.traces import _stream_atmostonce as engine

    parts, _ = batches(0, ARGS[0])
    engine.forget_warm_receivers()
    monkeypatch.setattr(engine, "WARM_KEYS", 3)
    sizes = []
    for key in range(5):  # five queries (each its own rho), one receiver each
        warm, state = decider(options(["--rho", str(30 + key), "--gc-every", "20"])), State()
        decide(warm, parts[0], state)
        assert state.value is not None
        sizes.append(len(state.value[0]))
        assert len(engine.warm_states()) == min(key + 1, 3)
    monkeypatch.setattr(engine, "WARM_BYTES", max(sizes) + 1)
    decide(warm, parts[1], state)
    assert state.value is not None
    assert engine.warm_states() == [state.value[0]]
    engine.forget_warm_receivers()


def test_rows_with_equal_at_go_by_seq_then_file_and_line() -> None:
    """The command's ties of ``at``: rows with ``seq`` first, by ``seq``; rows without it
    after them, by file name, then line. Each pair below is one message twice at the same
    ``at``: the copy taken first is accepted, the other is the duplicate."""
    opts = options(["--rho", "100", "--gc-every", "50"])
    base = {"run": "r1", "type": "msg", "receiver": "s1", "down": None, "original": None,
            "at": 10}
    rows = [
        {**base, "conn": "a", "ts": 5, "seq": None, "_file": "a.jsonl", "_line": 1},
        {**base, "conn": "a", "ts": 5, "seq": 7, "_file": "b.jsonl", "_line": 9},
        {**base, "conn": "b", "ts": 5, "seq": 9, "_file": "a.jsonl", "_line": 2},
        {**base, "conn": "b", "ts": 5, "seq": 8, "_file": "b.jsonl", "_line": 3},
        {**base, "conn": "c", "ts": 5, "seq": None, "_file": "b.jsonl", "_line": 1},
        {**base, "conn": "c", "ts": 5, "seq": None, "_file": "a.jsonl", "_line": 7},
        {**base, "conn": "d", "ts": 5, "seq": None, "_file": "a.jsonl", "_line": 8},
        {**base, "conn": "d", "ts": 5, "seq": None, "_file": "a.jsonl", "_line": 4},
    ]
    got = {(r["_file"], r["_line"]): r["verdict"] for r in decide(decider(opts), rows, State())}
    assert got == {("b.jsonl", 9): "accepted", ("a.jsonl", 1): "duplicate",
                   ("b.jsonl", 3): "accepted", ("a.jsonl", 2): "duplicate",
                   ("a.jsonl", 7): "accepted", ("b.jsonl", 1): "duplicate",
                   ("a.jsonl", 4): "accepted", ("a.jsonl", 8): "duplicate"}
