"""Writing a trace dataset (the contract in CONTRIBUTING.md), atomically.

``DatasetWriter(out_dir)`` creates a temporary folder beside ``out_dir``
(``.<name>.tmp-<pid>``), hands out ``TableWriter`` objects that buffer rows as
columns and write them as row groups of one Parquet file per table
(``<table>/part-00000.parquet``), and on ``commit(manifest)`` writes
``manifest.json`` and renames the folder into place (an existing dataset at
``out_dir`` is replaced; any other existing non-empty folder is refused). On error
the temporary folder is removed, so ``out_dir`` is written whole or not at all.

Besides the protocol tables and ``metrics``, a scenario may write ``sim_<table>``
tables: the decisions the simulator itself obtained from the core while it ran, keyed
by ``run`` and ``seq`` of the input row (e.g. ``sim_messages``: verdict, rho,
entries). They let anyone check that an offline replay decides exactly as the
simulation did; the pipeline ignores them.

Determinism: rows are written in the order the simulation produced them, with fixed
schemas, fixed row-group size and fixed compression, so the same seed gives the same
bytes.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from timebound.arrowtypes import ARROW_TYPES
from timebound.contract import INPUT_TABLES, METRICS, SIM_TABLES, dataset_columns
from timebound.errors import UsageError

ROW_GROUP = 131_072


#: Every table the simulator writes, ``(column, type)`` in order, from the contract
#: (``timebound.contract``): the protocol input tables (input columns plus run/seq/ground
#: truth and the option columns the simulator sets), ``metrics`` and the ``sim_*``
#: decision tables.
SCHEMAS: dict[str, list[tuple[str, str]]] = {
    name: dataset_columns(name, simulated=True)
    for name in (*INPUT_TABLES, METRICS.name, *SIM_TABLES)
}


class TableWriter:
    """Buffers rows (tuples in schema order) and writes row groups to one file."""

    def __init__(self, folder: str, name: str, omit: Collection[str] = ()) -> None:
        columns = [(c, t) for c, t in SCHEMAS[name] if c not in omit]
        self.name = name
        self.names = [c for c, _ in columns]
        self.schema = pa.schema([(c, ARROW_TYPES[t]) for c, t in columns])
        os.makedirs(os.path.join(folder, name))
        self.path = os.path.join(folder, name, "part-00000.parquet")
        self._rows: list[tuple[Any, ...]] = []
        self._writer: pq.ParquetWriter | None = None
        self.count = 0

    def add(self, row: tuple[Any, ...]) -> None:
        self._rows.append(row)
        if len(self._rows) >= ROW_GROUP:
            self._flush()

    def _flush(self) -> None:
        if self._writer is None:
            self._writer = pq.ParquetWriter(self.path, self.schema, compression="snappy")
        if self._rows:
            columns = list(zip(*self._rows, strict=True))
            arrays = [pa.array(col, type=field.type)
                      for col, field in zip(columns, self.schema, strict=True)]
            self._writer.write_table(pa.Table.from_arrays(arrays, schema=self.schema),
                                     row_group_size=ROW_GROUP)
            self.count += len(self._rows)
            self._rows = []

    def close(self) -> None:
        self._flush()
        assert self._writer is not None
        self._writer.close()
        self._writer = None


class DatasetWriter:
    """A dataset folder being written (module docstring)."""

    def __init__(self, out_dir: str) -> None:
        out_dir = os.path.abspath(out_dir)
        if os.path.exists(out_dir) and (
            not os.path.isdir(out_dir)
            or (os.listdir(out_dir)
                and not os.path.exists(os.path.join(out_dir, "manifest.json")))
        ):
            raise UsageError("--out", f"'{out_dir}' exists and is not a timebound dataset")
        parent = os.path.dirname(out_dir)
        if not os.path.isdir(parent):
            raise UsageError("--out", f"parent folder '{parent}' does not exist")
        self.out_dir = out_dir
        self.tmp = os.path.join(parent, f".{os.path.basename(out_dir)}.tmp-{os.getpid()}")
        if os.path.exists(self.tmp):
            shutil.rmtree(self.tmp)
        os.makedirs(self.tmp)
        self.tables: dict[str, TableWriter] = {}

    def table(self, name: str, omit: Collection[str] = ()) -> TableWriter:
        """The writer of table ``name``; the first call creates it, without the
        (optional, extension) columns in ``omit``."""
        writer = self.tables.get(name)
        if writer is None:
            writer = self.tables[name] = TableWriter(self.tmp, name, omit)
        return writer

    def commit(self, manifest: Mapping[str, Any]) -> dict[str, int]:
        counts = {}
        for name, writer in sorted(self.tables.items()):
            writer.close()
            counts[name] = writer.count
        with open(os.path.join(self.tmp, "manifest.json"), "w", encoding="utf-8") as fh:
            json.dump(manifest, fh, indent=2, sort_keys=True, allow_nan=False)
            fh.write("\n")
        if os.path.exists(self.out_dir):
            old = self.tmp + ".old"
            os.rename(self.out_dir, old)
            os.rename(self.tmp, self.out_dir)
            shutil.rmtree(old)
        else:
            os.rename(self.tmp, self.out_dir)
        return counts

    def abort(self) -> None:
        for writer in self.tables.values():
            if writer._writer is not None:
                writer._writer.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def read_table(dataset: str, name: str) -> pa.Table:
    """One table of a dataset (all its part files), for tests and the reproduction."""
    return pq.read_table(os.path.join(dataset, name))


def run_rows(dataset: str, name: str, run: str,
             columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The rows of one run of a table, sorted by ``seq`` when the table has it."""
    table = read_table(dataset, name)
    rows = [r for r in table.to_pylist() if r["run"] == run]
    if rows and "seq" in rows[0]:
        rows.sort(key=lambda r: r["seq"])
    if columns is not None:
        rows = [{k: r[k] for k in columns} for r in rows]
    return rows
