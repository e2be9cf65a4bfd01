"""Trace files: formats by extension, streaming reads, atomic writes."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from timebound.errors import TraceError, UsageError
from timebound.replay._io import BATCH_ROWS, OutputWriter, read_rows, trace_format


def test_format_by_extension() -> None:
    assert trace_format("a.jsonl", "--input") == "jsonl"
    assert trace_format("A.PARQUET", "--input") == "parquet"
    assert trace_format("-", "--output") == "jsonl"
    with pytest.raises(UsageError, match="--output"):
        trace_format("a.csv", "--output")


def test_parquet_column_that_first_appears_late(tmp_path: Path) -> None:
    out = tmp_path / "o.parquet"
    rows = [{"type": "local", "n": i} for i in range(BATCH_ROWS + 5)] + [{"type": "send", "n": 0, "msg": "m1"}]
    with OutputWriter(str(out), {"type": "string", "n": "int64"}) as writer:
        for row in rows:
            writer.write(row)
        writer.commit()
    table = pq.read_table(out)
    assert table.num_rows == len(rows)
    assert table.column("msg").to_pylist()[-2:] == [None, "m1"]
    assert [f.name for f in table.schema] == ["type", "n", "msg"]


def test_empty_parquet_output_has_the_declared_columns(tmp_path: Path) -> None:
    out = tmp_path / "o.parquet"
    with OutputWriter(str(out), {"id": "string", "time": "int64"}) as writer:
        writer.commit()
    table = pq.read_table(out)
    assert table.num_rows == 0 and table.schema.names == ["id", "time"]


@pytest.mark.parametrize("name", ["o.parquet", "o.jsonl"])
def test_failure_leaves_nothing_behind(tmp_path: Path, name: str) -> None:
    out = tmp_path / name
    with pytest.raises(RuntimeError):
        with OutputWriter(str(out), {"a": "int64"}) as writer:
            writer.write({"a": 1})
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_jsonl_reader_names_bad_lines(tmp_path: Path) -> None:
    src = tmp_path / "t.jsonl"
    src.write_text('{"a": 1}\n\n[1, 2\n')
    rows = read_rows(str(src))
    assert next(rows) == (1, {"a": 1})
    with pytest.raises(TraceError, match=r"t.jsonl:3: field '<row>': not valid JSON"):
        next(rows)


def test_missing_input_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--input"):
        list(read_rows(str(tmp_path / "nope.jsonl")))
    with pytest.raises(UsageError, match="--input"):
        list(read_rows(str(tmp_path / "nope.parquet")))
