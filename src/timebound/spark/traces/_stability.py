"""Batch message stability: one group per run, the shared ``StabilityAdapter``.

Decision rows are the replay's (every input column plus ``delivered``, ``value``,
``stable``) with one change of shape: ``value`` is the timestamp ack (int64) and
``value_vector`` the vector ack (map sender -> ts), so runs of both schemes share one
table. ``ack_bytes`` is the core's size of the ack an ``ack`` row sent.

Defaults when neither the command line nor a column gives them: ``--acks timestamp``,
``--senders`` the nodes with ``send`` rows and ``--receivers`` the nodes with ``recv``
or ``ack`` rows of the run (in order of first appearance).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import functions as F

from timebound.adapters import STABILITY
from timebound.adapters.stability import StabilityAdapter, StabilityOptions
from timebound.spark.traces import _group
from timebound.spark.traces.schemas import DECISION_EXTRA

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

TABLE = "acks"


def default_groups(df: DataFrame) -> dict[str, dict[str, str]]:
    """Per run, senders and receivers named by the trace (first appearance by seq)."""
    firsts = df.groupBy("run", "node", "type").agg(F.min("seq").alias("first")).collect()
    groups: dict[str, dict[str, list[tuple[int, str]]]] = {}
    for row in firsts:
        role = "senders" if row["type"] == "send" else "receivers"
        if row["type"] in ("send", "recv", "ack"):
            groups.setdefault(row["run"], {"senders": [], "receivers": []})[role].append(
                (row["first"], row["node"]))
    result: dict[str, dict[str, str]] = {}
    for run, roles in groups.items():
        result[run] = {}
        for role, seen in roles.items():
            names = list(dict.fromkeys(name for _first, name in sorted(seen)))
            if names:
                result[run][role] = ",".join(names)
    return result


def operate(df: DataFrame, options: Mapping[str, StabilityOptions]) -> DataFrame:
    schema = _group.out_schema(df.schema, DECISION_EXTRA[TABLE])

    @_group.guarded
    def group(key: tuple[pa.Scalar, ...], table: pa.Table) -> pa.Table:
        run = key[0].as_py()
        replayer: StabilityAdapter = STABILITY.adapter(options[run])
        out: list[dict[str, Any]] = []
        for data, produced in _group.replay_rows(
                replayer, _group.sorted_rows(table), f"{TABLE}[run {run!r}]"):
            for row in produced:
                row = dict(row)
                if isinstance(row.get("value"), dict):
                    row["value_vector"] = row.pop("value")
                if data is not None and data.get("type") == "ack":
                    row["ack_bytes"] = replayer.ack(data["id"]).nbytes
                out.append(row)
        return _group.to_arrow(out, schema)

    return df.groupBy("run").applyInArrow(group, schema)


#: ``--acks timestamp`` when neither the command line nor a column names the scheme;
#: senders and receivers default to the run's own nodes (``default_groups``).
OPERATOR = _group.Operator(TABLE, STABILITY, operate, defaults={"acks": "timestamp"},
                           run_defaults=default_groups)
