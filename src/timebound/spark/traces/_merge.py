"""Batch causal deterministic merge: one group per (run, merger), the replay's
``MergeAdapter`` inside (a merger's decisions depend only on its own arrivals).

Decision rows are the replay's output rows plus ``run``, ``seq`` (the row's position
in that merger's output, from 0: the replay's order within the merger) and ``at`` (the
first arrival time of the row's message at that merger, so buffering = time - at).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from timebound.adapters import MERGE
from timebound.adapters.merge import MergeOptions
from timebound.spark.traces import _group
from timebound.spark.traces.schemas import MERGE_DECISIONS

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

TABLE = "arrivals"


def operate(df: DataFrame, options: Mapping[str, MergeOptions]) -> DataFrame:
    schema = MERGE_DECISIONS

    @_group.guarded
    def group(key: tuple[pa.Scalar, ...], table: pa.Table) -> pa.Table:
        run = key[0].as_py()
        replayer = MERGE.adapter(options[run])
        first_at: dict[tuple[str, str], int] = {}
        out: list[Mapping[str, Any]] = []
        for data, produced in _group.replay_rows(
                replayer, _group.sorted_rows(table), f"{TABLE}[run {run!r}]"):
            if data is not None:
                first_at.setdefault((data["proc"], data["msg"]), data["at"])
            out.extend(produced)
        rows = [{**row, "run": run, "seq": index,
                 "at": first_at.get((row["proc"], row["msg"]))}
                for index, row in enumerate(out)]
        return _group.to_arrow(rows, schema)

    return df.groupBy("run", "merger").applyInArrow(group, schema)


OPERATOR = _group.Operator(TABLE, MERGE, operate)
