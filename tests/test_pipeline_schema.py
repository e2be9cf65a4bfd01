"""Dataset validation: a bad table fails before anything runs, naming table, column and
expected type (SchemaError, exit status 2); option columns must be constant per run."""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa
import pytest

from tests.test_pipeline_support import example_rows, write_table
from timebound.cli import main

pytestmark = pytest.mark.spark


def _fails(tmp: Any, ds: str, capsys: Any, *args: str) -> str:
    out = str(tmp / "out")
    assert main(["pipeline", ds, "--out", out, *args]) == 2
    assert not os.path.exists(out)
    return capsys.readouterr().err


def test_wrong_type_names_table_column_and_type(spark: Any, tmp_path: Any, capsys: Any) -> None:
    ds = str(tmp_path / "ds")
    rows = [{**r, "ts": str(r["ts"])} if "ts" in r else r for r in example_rows("atmostonce")]
    write_table(ds, "messages", {"a": rows}, types={"ts": pa.string()})
    err = _fails(tmp_path, ds, capsys, "--rho", "5", "--gc-every", "5")
    assert "table 'messages', column 'ts': expected int64, found string" in err


def test_int32_is_not_int64(spark: Any, tmp_path: Any, capsys: Any) -> None:
    ds = str(tmp_path / "ds")
    write_table(ds, "events", {"a": example_rows("causal")}, types={"rt": pa.int32()})
    err = _fails(tmp_path, ds, capsys, "--epsilon", "2")
    assert "table 'events', column 'rt': expected int64, found int32" in err


def test_missing_column(spark: Any, tmp_path: Any, capsys: Any) -> None:
    ds = str(tmp_path / "ds")
    rows = [{k: v for k, v in r.items() if k != "merger"} for r in example_rows("merge")]
    write_table(ds, "arrivals", {"a": rows})
    import pyarrow.parquet as pq
    path = os.path.join(ds, "arrivals", "part-00000.parquet")
    pq.write_table(pq.read_table(path).drop(["merger"]), path)
    err = _fails(tmp_path, ds, capsys, "--epsilon", "2", "--delta", "3")
    assert "table 'arrivals', column 'merger': missing (expected string)" in err


def test_bad_option_column_type(spark: Any, tmp_path: Any, capsys: Any) -> None:
    ds = str(tmp_path / "ds")
    write_table(ds, "arrivals", {"a": example_rows("merge")}, extra={"a": {"delta": "3"}},
                types={"delta": pa.string()})
    err = _fails(tmp_path, ds, capsys, "--epsilon", "2")
    assert "table 'arrivals', column 'delta': expected int64, found string" in err


def test_option_not_constant_within_run(spark: Any, tmp_path: Any, capsys: Any) -> None:
    ds = str(tmp_path / "ds")
    rows = example_rows("causal")
    rows = [{**r, "epsilon": 2 + (i % 2)} for i, r in enumerate(rows)]
    write_table(ds, "events", {"a": rows})
    err = _fails(tmp_path, ds, capsys)
    assert "table 'events', column 'epsilon': not constant within run 'a'" in err


def test_no_table_and_bad_conf(tmp_path: Any, capsys: Any) -> None:
    os.makedirs(tmp_path / "empty")
    assert main(["pipeline", str(tmp_path / "empty"), "--out", str(tmp_path / "o")]) == 2
    assert "holds none of the tables" in capsys.readouterr().err
    ds = str(tmp_path / "ds")
    write_table(ds, "events", {"a": example_rows("causal")})
    assert main(["pipeline", ds, "--out", str(tmp_path / "o"), "--conf", "novalue"]) == 2
    assert "--conf: expected KEY=VALUE" in capsys.readouterr().err
