"""Helpers of the pipeline tests: datasets built from traces, replay of a trace.

Also the tests that need no Spark (options, error transport).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from timebound.cli import main
from timebound.errors import UsageError
from timebound.spark.traces import _group
from timebound.spark.traces.schemas import OPTIONAL, OPTIONS, REQUIRED

ARROW = {"string": pa.string(), "bigint": pa.int64(), "boolean": pa.bool_(),
         "array<bigint>": pa.list_(pa.int64())}


def example_rows(name: str) -> list[dict[str, Any]]:
    path = resources.files("timebound.examples").joinpath(f"{name}.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_table(dataset: str, table: str, runs: Mapping[str, Sequence[Mapping[str, Any]]],
                extra: Mapping[str, Mapping[str, Any]] | None = None,
                types: Mapping[str, pa.DataType] | None = None,
                shuffle: bool = True) -> None:
    """Write ``runs`` (run -> rows in trace order) as ``DATASET/table/part-00000.parquet``
    with run and seq columns, per-run ``extra`` columns, in scrambled row order."""
    fields: dict[str, pa.DataType] = {}
    for group in (REQUIRED, OPTIONAL, OPTIONS):
        for field in group[table].fields:
            fields[field.name] = ARROW[field.dataType.simpleString()]
    fields.update(types or {})
    rows = []
    for run, trace in runs.items():
        for seq, row in enumerate(trace):
            rows.append({**row, **(extra or {}).get(run, {}), "run": run, "seq": seq})
    if shuffle:
        rows = rows[::2] + rows[1::2]
    used = [name for name in fields if any(name in row for row in rows)]
    for name in REQUIRED[table].names:
        if name not in used:
            used.append(name)
    schema = pa.schema([(name, fields[name]) for name in used])
    folder = os.path.join(dataset, table)
    os.makedirs(folder, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema),
                   os.path.join(folder, "part-00000.parquet"))


def replay(tmp: str, protocol: str, rows: Iterable[Mapping[str, Any]],
           args: Sequence[str]) -> list[dict[str, Any]]:
    """Run ``timebound replay`` on ``rows`` (JSON Lines); return its output rows."""
    src = os.path.join(tmp, f"{protocol}-in.jsonl")
    dst = os.path.join(tmp, f"{protocol}-out.jsonl")
    with open(src, "w") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    assert main(["replay", protocol, "--input", src, "--output", dst, *args]) == 0
    with open(dst) as handle:
        return [json.loads(line) for line in handle]


def read_out(out: str, table: str) -> list[dict[str, Any]]:
    return pq.read_table(os.path.join(out, table)).to_pylist()


def without_nulls(row: Mapping[str, Any], drop: Iterable[str] = ()) -> dict[str, Any]:
    return {k: v for k, v in row.items() if v is not None and k not in set(drop)}


# -- tests without Spark -------------------------------------------------------------


def test_worker_errors_come_back_typed() -> None:
    from timebound.errors import TraceError

    @_group.guarded
    def failing(key: Any, table: Any) -> pa.Table:
        raise TraceError("messages[run 'a']", 7, "ts", "must be >= 1, got 0")

    try:
        failing((), None)
    except RuntimeError as exc:
        rebuilt = _group.rebuild("py4j noise\n" + str(exc) + "\nmore noise")
    assert isinstance(rebuilt, TraceError)
    assert str(rebuilt) == "messages[run 'a']:7: field 'ts': must be >= 1, got 0"


def test_typed_options_read_only_known_dests_and_default_the_rest() -> None:
    from timebound.adapters import MERGE
    from timebound.adapters.merge import MergeOptions

    assert MERGE.option_columns == ("epsilon", "delta", "variant")
    opts = MERGE.options({"epsilon": 2, "rho": 5, "delta": 0})
    assert opts == MergeOptions(epsilon=2, delta=0, variant="rckn")
    with pytest.raises(UsageError, match="--delta"):
        MERGE.options({"epsilon": 2, "rho": 5, "delta": None})
