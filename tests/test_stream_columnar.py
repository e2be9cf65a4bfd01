"""``timebound stream atmostonce``'s column-wise processor decides as the row
processor does: the same verdict rows, the same state, the same errors.

The differential part runs without Spark: each key's micro-batches go to both
processors (each with its own copy of the state), as ``transformWithStateInPandas``
hands them over (a pandas frame rebuilt from ``itertuples``: the source's ``_file`` and
``_line`` renamed, nullable integers as objects). The stream part checks that integers
beyond 2**53 in a nullable column cross to the workers exactly.
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
           "_file", "_line", "cls")


class State:
    """A ``ValueState`` in memory."""

    def __init__(self) -> None:
        self.value: tuple[Any, ...] | None = None

    def get(self) -> tuple[Any, ...] | None:
        return self.value

    def update(self, value: tuple[Any, ...]) -> None:
        self.value = value


def as_spark_frame(rows: list[dict[str, Any]]) -> Any:
    """The frame ``transformWithStateInPandas`` gives: rebuilt from ``itertuples``, so
    ``_file``/``_line`` lose their names and a nullable integer column is objects."""
    import pandas as pd

    tuples = [tuple(row.get(c) for c in COLUMNS) for row in rows]
    frame = pd.DataFrame(tuples)
    frame.columns = [c if not c.startswith("_") else f"_{i}" for i, c in enumerate(COLUMNS)]
    return frame


def batches(seed: int, args: list[str]) -> tuple[list[list[dict[str, Any]]], Any]:
    """One key's rows in 4 micro-batches (shuffled within each, some files late)."""
    rng = random.Random(seed)
    rows = [r for r in amo_trace(seed, 160, crashes="--resilient" in args,
                                 receivers=("s1",))]
    for i, row in enumerate(rows):
        row.update(original=None, _file=f"f{i // 40:02d}.jsonl", _line=i % 40 + 1, cls=0)
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
def test_columnar_processor_equals_the_row_processor(seed: int, args: list[str]) -> None:
    from timebound.spark.traces._stream_atmostonce import AtMostOnceProcessor, ColumnarProcessor

    parts, opts = batches(seed, args)
    rows_p, cols_p = AtMostOnceProcessor(opts), ColumnarProcessor(opts)
    rows_p.state, cols_p.state = State(), State()  # type: ignore[assignment]
    key = ("r1", "s1", 0)
    late = decided = 0
    for part in parts:
        try:
            expected: Any = rows_p.decide(key, part)
        except TraceError as exc:  # a late file may crash a receiver still down
            expected = str(exc)
        try:
            got: Any = cols_p.decide_columns(key, as_spark_frame(part)).to_pylist()
        except TraceError as exc:
            got = str(exc)
        assert got == expected
        if isinstance(got, str):
            break
        assert cols_p.state.value == rows_p.state.value  # the same snapshot
        late += sum(r["late_arrival"] for r in got)
        decided += len(got)
    assert decided >= 40
    if "--resilient" not in args:
        assert (late > 0) == bool(seed % 2)  # the late file is marked late, only it


def test_a_malformed_row_fails_as_in_the_row_processor() -> None:
    from timebound.spark.traces._stream_atmostonce import AtMostOnceProcessor, ColumnarProcessor

    parts, opts = batches(0, ARGS[0])
    part = parts[0]
    part[7] = {**part[7], "conn": None}
    errors = []
    for processor in (AtMostOnceProcessor(opts), ColumnarProcessor(opts)):
        processor.state = State()  # type: ignore[assignment]
        with pytest.raises(TraceError) as raised:
            if isinstance(processor, ColumnarProcessor):
                processor.decide_columns(("r1", "s1", 0), as_spark_frame(part))
            else:
                processor.decide(("r1", "s1", 0), part)
        errors.append(str(raised.value))
    assert errors[0] == errors[1] and "field 'conn'" in errors[0]


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


def _decide_each(processor: Any, parts: list[list[dict[str, Any]]], cold: bool
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
            rows = processor.decide_columns(("r1", "s1", 0), as_spark_frame(part)).to_pylist()
        except TraceError as exc:
            out.append(str(exc))
            break
        out.append((rows, processor.state.value))
    return out


def _decided_alone(opts: Any, parts: list[list[dict[str, Any]]]) -> list[Any]:
    """Each micro-batch's verdict rows and state, every receiver decoded from its state
    (no warm receiver in this process)."""
    from timebound.spark.traces import _stream_atmostonce as engine

    processor = engine.ColumnarProcessor(opts)
    processor.state = State()  # type: ignore[assignment]
    try:
        return _decide_each(processor, parts, cold=True)
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
    processor = engine.ColumnarProcessor(opts)
    processor.state = State()  # type: ignore[assignment]
    got = _decide_each(processor, parts[:1], cold=False)
    assert isinstance(got[0], tuple)

    def no_decode(blob: bytes) -> Any:
        raise AssertionError("a warm receiver was decoded")

    monkeypatch.setattr(engine, "decode", no_decode)
    try:
        got += _decide_each(processor, parts[1:], cold=False)
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
    processor = engine.ColumnarProcessor(opts)
    processor.state = State()  # type: ignore[assignment]
    processor.decide_columns(("r1", "s1", 0), as_spark_frame(parts[0]))
    kept = processor.state.value
    with pytest.raises(TraceError):
        processor.decide_columns(("r1", "s1", 0), as_spark_frame(bad))
    assert processor.state.value == kept  # Spark keeps the state of the batch before
    got = processor.decide_columns(("r1", "s1", 0), as_spark_frame(fixed)).to_pylist()
    engine.forget_warm_receivers()
    assert (got, processor.state.value) == expected[1]


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
        processor = engine.ColumnarProcessor(options(["--rho", str(30 + key),
                                                      "--gc-every", "20"]))
        processor.state = State()  # type: ignore[assignment]
        processor.decide_columns(("r1", "s1", 0), as_spark_frame(parts[0]))
        sizes.append(len(processor.state.value[0]))
        assert len(engine.warm_states()) == min(key + 1, 3)
    monkeypatch.setattr(engine, "WARM_BYTES", max(sizes) + 1)
    processor.decide_columns(("r1", "s1", 0), as_spark_frame(parts[1]))
    assert engine.warm_states() == [processor.state.value[0]]
    engine.forget_warm_receivers()
