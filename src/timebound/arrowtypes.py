"""The contract's column types (``timebound.contract.TYPES``) as Arrow types, written
once for every driver that reads or writes Parquet (the replay, the simulator); the
Spark drivers take theirs from ``sparkutil.spark_types``, derived from this map."""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from timebound.contract import TYPES

#: Contract type name -> Arrow type (every column is nullable).
ARROW_TYPES: Mapping[str, pa.DataType] = {
    "string": pa.string(),
    "int64": pa.int64(),
    "bool": pa.bool_(),
    "double": pa.float64(),
    "list<int64>": pa.list_(pa.int64()),
    "map<string,int64>": pa.map_(pa.string(), pa.int64()),
}
assert tuple(ARROW_TYPES) == TYPES, "every contract type has one Arrow type"
