"""Read a trace dataset (CONTRIBUTING.md, "The trace-dataset contract") with Spark.

Each table present is checked against its declared schema (``schemas.py``) before any
job runs: a missing required column, or a column of the wrong type, is a
``SchemaError`` naming the table, the column and the expected type (exit status 2).
Optional columns a dataset leaves out are added as typed nulls, so every operator
sees one shape. A table carrying a row extension column the pipeline does not decide
(``contract.REFUSED_BY_DRIVERS``: ``marked`` incarnation marks) is refused
the same way, before Spark starts: deciding it without the column would give other
verdicts than ``timebound replay``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BooleanType, DataType, LongType, MapType, StringType

from timebound.errors import SchemaError, UsageError
from timebound.spark.traces.schemas import OPTIONAL, OPTIONS, PROTOCOLS, REFUSED, REQUIRED

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession


def type_name(kind: DataType) -> str:
    """The contract's name of a Spark type (``int64``, ``list<int64>``...)."""
    if isinstance(kind, LongType):
        return "int64"
    if isinstance(kind, StringType):
        return "string"
    if isinstance(kind, BooleanType):
        return "bool"
    if isinstance(kind, ArrayType):
        return f"list<{type_name(kind.elementType)}>"
    if isinstance(kind, MapType):
        return f"map<{type_name(kind.keyType)},{type_name(kind.valueType)}>"
    names = {"integer": "int32", "short": "int16", "byte": "int8", "double": "double",
             "float": "float", "timestamp": "timestamp", "binary": "binary"}
    return names.get(kind.typeName(), kind.simpleString())


def _same(actual: DataType, expected: DataType) -> bool:
    if isinstance(expected, ArrayType):
        return isinstance(actual, ArrayType) and _same(actual.elementType, expected.elementType)
    return type(actual) is type(expected)


def present_tables(dataset: str) -> list[str]:
    """Input tables present in ``dataset``, in protocol order."""
    if not os.path.isdir(dataset):
        raise UsageError("DATASET", f"'{dataset}' is not a folder")
    return [t for t in PROTOCOLS if os.path.isdir(os.path.join(dataset, t))]


def table_bytes(dataset: str, tables: list[str]) -> int:
    total = 0
    for table in tables:
        for root, _dirs, files in os.walk(os.path.join(dataset, table)):
            total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


def validate(df: DataFrame, table: str) -> DataFrame:
    """Check ``df`` against the declared schema of ``table``; add absent optional columns."""
    actual = {field.name: field.dataType for field in df.schema.fields}
    refuse_extensions(table, actual)
    for field in REQUIRED[table].fields:
        if field.name not in actual:
            raise SchemaError(table, field.name,
                              f"missing (expected {type_name(field.dataType)})")
    for group in (REQUIRED, OPTIONAL, OPTIONS):
        for field in group[table].fields:
            kind = actual.get(field.name)
            if kind is not None and not _same(kind, field.dataType):
                raise SchemaError(table, field.name,
                                  f"expected {type_name(field.dataType)}, "
                                  f"found {type_name(kind)}")
    for field in OPTIONAL[table].fields:
        if field.name not in actual:
            df = df.withColumn(field.name, F.lit(None).cast(field.dataType))
    return df


def refuse_extensions(table: str, columns: Iterable[str]) -> None:
    """A SchemaError when ``columns`` hold a row extension column the pipeline does not
    decide (module docstring)."""
    for name in REFUSED.get(table, ()):
        if name in columns:
            raise SchemaError(table, name, "incarnation marks (our extension) are "
                              "decided by `timebound replay atmostonce` only; the pipeline "
                              "refuses a table that carries them")


def check_parquet_files(table: str, path: str) -> None:
    """Read every part file's footer with pyarrow first, so that a truncated or foreign
    file is a SchemaError naming that file (Spark's own error names neither)."""
    import pyarrow.parquet as pq

    for root, _dirs, files in os.walk(path):
        for name in sorted(files):
            if name.startswith((".", "_")):
                continue  # Spark's _SUCCESS and .crc files
            part = os.path.join(root, name)
            try:
                names = pq.read_metadata(part).schema.names
            except (OSError, ValueError) as exc:  # ArrowInvalid is a ValueError
                raise SchemaError(table, "<table>", f"cannot read '{part}' as Parquet: "
                                  f"{exc}") from None
            refuse_extensions(table, names)


def read_table(spark: SparkSession, dataset: str, table: str) -> DataFrame:
    path = os.path.join(dataset, table)
    check_parquet_files(table, path)
    try:
        df = spark.read.parquet(path)
    except Exception as exc:  # AnalysisException: empty folder, not Parquet
        raise SchemaError(table, "<table>", f"cannot read {path} as Parquet: "
                          f"{str(exc).splitlines()[0]}") from None
    return validate(df, table)


def read_manifest(dataset: str) -> dict[str, Any]:
    path = os.path.join(dataset, "manifest.json")
    if not os.path.exists(path):
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            manifest = json.load(handle)
    except (OSError, ValueError) as exc:
        raise SchemaError("manifest.json", "<file>", f"not readable JSON: {exc}") from None
    if not isinstance(manifest, dict):
        raise SchemaError("manifest.json", "<file>", "expected a JSON object")
    return manifest
