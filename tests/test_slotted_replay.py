"""``timebound replay slotted`` through the real CLI: exact outputs, formats, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from timebound.cli import main
from timebound.demo import example_path


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def send(i: str, kind: str) -> dict[str, Any]:
    return {"type": "send", "id": i, "kind": kind}


def arrive(i: str) -> dict[str, Any]:
    return {"type": "arrive", "id": i}


TRACE = [send("a", "R"), send("b", "F"), send("c", "F"), send("d", "FR"), send("e", "N"),
         arrive("d"), arrive("c"), arrive("e"), arrive("a"), arrive("b"),
         send("f", "F"), send("g", "F"), arrive("g")]
EXPECTED = [("a", "deliver"), ("c", "deliver"), ("d", "deliver"), ("e", "deliver"),
            ("b", "discard")]


def test_hand_computed_trace_jsonl(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", TRACE)
    out = tmp_path / "out.jsonl"
    assert main(["replay", "slotted", "--input", str(src), "--output", str(out)]) == 0
    assert read_jsonl(out) == [{"id": i, "action": a} for i, a in EXPECTED]


def test_parquet_in_and_out(tmp_path: Path) -> None:
    src = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist([{**r, "kind": r.get("kind")} for r in TRACE]), src)
    out = tmp_path / "out.parquet"
    assert main(["replay", "slotted", "--input", str(src), "--output", str(out)]) == 0
    assert pq.read_table(out).to_pylist() == [{"id": i, "action": a} for i, a in EXPECTED]


def test_bundled_example_runs(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    assert main(["replay", "slotted", "--input", example_path("slotted.jsonl"),
                 "--output", str(out)]) == 0
    actions = {r["action"] for r in read_jsonl(out)}
    assert actions == {"deliver", "discard"}


@pytest.mark.parametrize(
    ("rows", "line", "field", "reason"),
    [
        ([arrive("a")], 1, "id", "arrives before its send row"),
        ([send("a", "N"), arrive("a"), arrive("a")], 3, "id", "arrives twice"),
        ([send("a", "N"), send("a", "R")], 2, "id", "sent twice"),
        ([send("a", "X")], 1, "kind", "expected one of"),
        ([{"type": "lose", "id": "a"}], 1, "type", "expected one of"),
        ([{"type": "send", "kind": "R"}], 1, "id", "missing"),
        ([{"type": "send", "id": 7, "kind": "R"}], 1, "id", "non-empty string"),
    ],
)
def test_bad_rows_exit_2_and_leave_no_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rows: list[dict[str, Any]],
    line: int, field: str, reason: str,
) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    assert main(["replay", "slotted", "--input", str(src), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"in.jsonl:{line}: field '{field}'" in err and reason in err
    assert list(tmp_path.iterdir()) == [src]
