"""Batch causal timestamping: one group per run, the shared ``CausalAdapter`` inside.

A run is one execution (its processes exchange messages), so it cannot be split.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from timebound.adapters import CAUSAL
from timebound.adapters.causal import CausalOptions
from timebound.spark.traces import _group
from timebound.spark.traces.schemas import DECISION_EXTRA

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

TABLE = "events"


def operate(df: DataFrame, options: Mapping[str, CausalOptions]) -> DataFrame:
    """Decision table of ``events``: input columns + r, c, kn (rckn runs only)."""
    schema = _group.out_schema(df.schema, DECISION_EXTRA[TABLE])

    @_group.guarded
    def group(key: tuple[pa.Scalar, ...], table: pa.Table) -> pa.Table:
        run = key[0].as_py()
        replayer = CAUSAL.adapter(options[run])
        out: list[Mapping[str, Any]] = []
        for _data, produced in _group.replay_rows(
                replayer, _group.sorted_rows(table), f"{TABLE}[run {run!r}]"):
            out.extend(produced)
        return _group.to_arrow(out, schema)

    return df.groupBy("run").applyInArrow(group, schema)


OPERATOR = _group.Operator(TABLE, CAUSAL, operate)
