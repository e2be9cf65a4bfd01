"""Every table schema of the pipeline, as Spark ``StructType``s, built from the one
contract (``timebound.contract``; CONTRIBUTING.md "The trace-dataset contract").

For each input table: the columns every dataset must carry (``REQUIRED``), the ones it
may leave out (``OPTIONAL``: added as nulls when absent, e.g. ``down`` in a trace
without crashes), and the per-run option columns of its protocol (``OPTIONS``: named
like the replay options' argparse dests; constant within a run when present). Then the
decision tables and ``METRICS``. Nothing here is typed by hand.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from timebound import contract
from timebound.sparkutil import spark_types

S = StringType()
L = LongType()
B = BooleanType()
LIST = ArrayType(L, containsNull=True)

#: Contract type name -> Spark type (``sparkutil.spark_types``: one map for both
#: Spark drivers).
SPARK_TYPES: dict[str, DataType] = spark_types()


def struct(*columns: tuple[str, DataType]) -> StructType:
    return StructType([StructField(name, kind, nullable=True) for name, kind in columns])


def _struct(columns: Iterable[contract.Column | contract.OptionColumn]) -> StructType:
    return struct(*[(c.name, SPARK_TYPES[c.type]) for c in columns])


#: table -> protocol (replay command name), and back.
PROTOCOLS: dict[str, str] = dict(contract.PROTOCOLS)
TABLES: dict[str, str] = dict(contract.TABLES)

REQUIRED: dict[str, StructType] = {
    name: _struct(t.required) for name, t in contract.INPUT_TABLES.items()}
OPTIONAL: dict[str, StructType] = {
    name: _struct(t.optional) for name, t in contract.INPUT_TABLES.items()}
OPTIONS: dict[str, StructType] = {
    name: _struct(t.options) for name, t in contract.INPUT_TABLES.items()}
#: Row extension columns the pipeline refuses (``contract.REFUSED_BY_DRIVERS``).
REFUSED: dict[str, tuple[str, ...]] = dict(contract.REFUSED_BY_DRIVERS)

#: Columns each operator adds to its input columns in the decision table.
DECISION_EXTRA: dict[str, StructType] = {
    name: _struct(columns) for name, columns in contract.DECISION_EXTRA.items()}

#: Decision tables not shaped like their input (their rows are the receiver's actions).
MERGE_DECISIONS = _struct(contract.DECISION_TABLES["arrivals"])
SLOTTED_DECISIONS = _struct(contract.DECISION_TABLES["channel"])

METRICS = _struct(contract.METRICS.columns)
