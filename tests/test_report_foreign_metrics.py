"""``timebound report`` on a folder whose ``metrics/`` is empty or not a pipeline's
metrics table: one line naming it, exit 2, nothing written (it was an internal error)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from timebound.cli import main


@pytest.mark.parametrize(("table", "what"), [
    (None, "no column 'run'"),
    (pa.table({"x": [1]}), "no column 'run'"),
])
def test_a_foreign_or_empty_metrics_table_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], table: pa.Table | None,
        what: str) -> None:
    metrics = tmp_path / "out" / "metrics"
    metrics.mkdir(parents=True)
    if table is not None:
        pq.write_table(table, metrics / "part-0.parquet")
    assert main(["report", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (
        f"timebound: error: DIR: '{metrics}' has {what}: not the metrics table of a "
        "timebound pipeline output\n")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["metrics"]


def test_a_metrics_table_with_no_rows_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from timebound.contract import METRICS

    metrics = tmp_path / "out" / "metrics"
    metrics.mkdir(parents=True)
    types = {"string": pa.string(), "int64": pa.int64(), "float64": pa.float64(),
             "bool": pa.bool_()}
    schema = pa.schema([(c.name, types.get(c.type, pa.string())) for c in METRICS.columns])
    pq.write_table(schema.empty_table(), metrics / "part-0.parquet")
    assert main(["report", str(tmp_path / "out")]) == 2
    assert "has no rows: not the metrics table" in capsys.readouterr().err
