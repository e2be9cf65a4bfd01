"""``timebound replay stability`` through the real CLI: exact outputs, formats, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from timebound.cli import main

OPTS = ["--senders", "s1,s2", "--receivers", "s1,r1"]

TRACE: list[dict[str, Any]] = [
    {"type": "send", "node": "s1", "ts": 10, "at": 10},
    {"type": "send", "node": "s2", "ts": 11, "at": 11},
    {"type": "recv", "node": "r1", "from": "s1", "ts": 10, "at": 12},
    {"type": "recv", "node": "r1", "from": "s2", "ts": 11, "at": 13},
    {"type": "recv", "node": "r1", "from": "s2", "ts": 11, "at": 13},
    {"type": "recv", "node": "s1", "from": "s2", "ts": 11, "at": 14},
    {"type": "ack", "node": "r1", "id": "a1", "at": 15, "run": 7},
    {"type": "ackrecv", "node": "s1", "ack": "a1", "at": 16},
    {"type": "ack", "node": "s1", "id": "a2", "at": 17},
    {"type": "ackrecv", "node": "s2", "ack": "a2", "at": 18},
    {"type": "ackrecv", "node": "s2", "ack": "a1", "at": 19},
]


def expected(mode: str) -> list[dict[str, Any]]:
    value = {"timestamp": (10, 10), "vector": ({"s1": 10, "s2": 11}, {"s1": 10, "s2": 11})}[mode]
    extra: list[dict[str, Any]] = [
        {}, {}, {"delivered": True}, {"delivered": True}, {"delivered": False},
        {"delivered": True}, {"value": value[0]}, {"stable": []},
        {"value": value[1], "stable": [10]}, {"stable": []},
        {"stable": [] if mode == "timestamp" else [11]},  # scalar 10 does not cover 11
    ]
    return [{**row, **more} for row, more in zip(TRACE, extra, strict=True)]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("mode", ["timestamp", "vector"])
def test_hand_computed_trace(tmp_path: Path, mode: str) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", TRACE)
    out = tmp_path / "out.jsonl"
    assert main(["replay", "stability", "-i", str(src), "-o", str(out), "--acks", mode,
                 *OPTS]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows == expected(mode)


def test_parquet_round_trip(tmp_path: Path) -> None:
    src = tmp_path / "in.parquet"
    keys = list(dict.fromkeys(k for row in TRACE for k in row))
    pq.write_table(pa.Table.from_pylist([{k: row.get(k) for k in keys} for row in TRACE]), src)
    out = tmp_path / "out.parquet"
    assert main(["replay", "stability", "-i", str(src), "-o", str(out), "--acks", "timestamp",
                 *OPTS]) == 0
    rows = pq.read_table(out).to_pylist()
    assert [r.get("stable") for r in rows] == [None] * 7 + [[], [10], [], []]
    assert rows[6]["value"] == 10 and rows[4]["delivered"] is False


@pytest.mark.parametrize(
    ("row", "field", "reason"),
    [
        ({"type": "recv", "node": "x", "from": "s1", "ts": 1, "at": 20}, "node", "neither"),
        ({"type": "recv", "node": "r1", "from": "r1", "ts": 1, "at": 20}, "from", "not in --senders"),
        ({"type": "send", "node": "r1", "ts": 50, "at": 20}, "node", "not in --senders"),
        ({"type": "ackrecv", "node": "s1", "ack": "zz", "at": 20}, "ack", "never sent"),
        ({"type": "ack", "node": "r1", "id": "a1", "at": 20}, "id", "used twice"),
        ({"type": "send", "node": "s1", "ts": 10, "at": 20}, "ts", "must increase"),
        ({"type": "ack", "node": "r1", "id": "b", "at": 3}, "at", "backwards"),
        ({"type": "nack", "node": "r1", "at": 20}, "type", "expected one of"),
        ({"type": "send", "node": "s1", "ts": "12", "at": 20}, "ts", "integer"),
    ],
)
def test_bad_rows_exit_2_and_leave_no_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], row: dict[str, Any], field: str,
    reason: str,
) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [*TRACE[:7], row])
    out = tmp_path / "out.jsonl"
    assert main(["replay", "stability", "-i", str(src), "-o", str(out), "--acks", "vector",
                 *OPTS]) == 2
    err = capsys.readouterr().err
    assert "in.jsonl:8: field '" + field + "'" in err and reason in err, err
    assert list(tmp_path.iterdir()) == [src]


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (OPTS, "--acks"),
        (["--acks", "scalar", *OPTS], "--acks"),
        (["--acks", "timestamp", "--senders", "s1"], "--receivers"),
        (["--acks", "timestamp", "--senders", "s1,,s2", "--receivers", "r1"], "--senders"),
        (["--acks", "timestamp", "--senders", "s1,s1", "--receivers", "r1"], "--senders"),
    ],
)
def test_bad_options_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                            args: list[str], option: str) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", TRACE)
    out = tmp_path / "out.jsonl"
    assert main(["replay", "stability", "-i", str(src), "-o", str(out), *args]) == 2
    assert option in capsys.readouterr().err
    assert not out.exists()
