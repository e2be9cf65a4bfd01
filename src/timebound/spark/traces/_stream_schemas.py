"""Spark schemas of the streaming queries, derived from ``timebound.contract``.

Sources read a dataset table's input columns (``messages``, ``arrivals``) plus the
source's ``_file`` and ``_line``. Outputs:

- ``verdicts`` (atmostonce): the input columns, then ``verdict``, ``rho``,
  ``entries`` (the batch decision table's), ``cls`` (the hash class), ``late_arrival``
  (the row's ``at`` was behind its receiver's clock: decided at that clock), ``file``
  and ``line`` (where the row was read);
- ``accepted`` (atmostonce): the input columns of every accepted message, once;
- ``order`` (merge): ``run``, ``merger``, ``seq`` (position in that merger's output,
  from 0), ``msg``, ``proc``, ``action``, ``time`` -- the replay's rows plus ``run`` and
  ``seq``.
"""

from __future__ import annotations

from pyspark.sql.types import BooleanType, DataType, LongType, StringType, StructType

from timebound.contract import INPUT_TABLES
from timebound.spark.traces._rows import FILE_COLUMN, LINE_COLUMN
from timebound.spark.traces.schemas import SPARK_TYPES, struct


def _struct(columns: list[tuple[str, DataType]]) -> StructType:
    return struct(*columns)


def input_columns(table: str) -> list[tuple[str, DataType]]:
    return [(c.name, SPARK_TYPES[c.type]) for c in INPUT_TABLES[table].columns]


def source_schema(table: str) -> StructType:
    return _struct(input_columns(table) + [(FILE_COLUMN, StringType()),
                                           (LINE_COLUMN, LongType())])


MESSAGES_IN = input_columns("messages")
VERDICTS = _struct(MESSAGES_IN + [
    ("verdict", StringType()), ("rho", LongType()), ("entries", LongType()),
    ("cls", LongType()), ("late_arrival", BooleanType()), ("file", StringType()),
    ("line", LongType()),
])
ACCEPTED = _struct(MESSAGES_IN)
ORDER = _struct([
    ("run", StringType()), ("merger", StringType()), ("seq", LongType()),
    ("msg", StringType()), ("proc", StringType()), ("action", StringType()),
    ("time", LongType()),
])
