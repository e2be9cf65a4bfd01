"""Batch slotted FIFO: one group per (run, channel), the shared ``SlottedAdapter``.

The replay's clock is the row's line in the file; here a channel's rows, sorted by
``seq``, are numbered from 1 exactly as if they were that channel's trace file, so the
decisions (and delays, in rows) are the replay's. Error messages name that number.

Decision rows are the replay's ``id``, ``action`` plus ``run``, ``channel``, ``seq``
(position in the channel's output, from 0) and what the core's action records say:
``kind``, ``reason`` (discards), ``arrived`` and ``step`` (row numbers of the arrival
and of the action, so the delay is step - arrived) and ``buffered`` (messages the
receiver holds right after the row). The core's actions are the adapter's typed
``last_actions`` and ``buffered``: nothing is recomputed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from timebound.adapters import SLOTTED
from timebound.adapters.slotted import SlottedAdapter, SlottedOptions
from timebound.core.slotted import Discard
from timebound.spark.traces import _group
from timebound.spark.traces.schemas import SLOTTED_DECISIONS

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

TABLE = "channel"


def operate(df: DataFrame, options: Mapping[str, SlottedOptions]) -> DataFrame:
    schema = SLOTTED_DECISIONS

    @_group.guarded
    def group(key: tuple[pa.Scalar, ...], table: pa.Table) -> pa.Table:
        run, channel = key[0].as_py(), key[1].as_py()
        replayer: SlottedAdapter = SLOTTED.adapter(options[run])
        arrived: dict[str, int] = {}
        out: list[dict[str, Any]] = []
        source = f"{TABLE}[run {run!r}, channel {channel!r}] row"
        for step, (data, produced) in enumerate(_group.replay_rows(
                replayer, _group.sorted_rows(table), source,
                line=lambda index, _row: index + 1), start=1):
            if data is not None and data.get("type") == "arrive":
                arrived.setdefault(data["id"], step)
            if data is None or not produced:
                continue
            buffered = replayer.buffered
            for row, action in zip(produced, replayer.last_actions, strict=True):
                out.append({**row, "run": run, "channel": channel, "seq": len(out),
                            "kind": action.stamp.kind.value,
                            "reason": action.reason.value if isinstance(action, Discard)
                            else None,
                            "arrived": arrived.get(row["id"]), "step": step,
                            "buffered": buffered})
        return _group.to_arrow(out, schema)

    return df.groupBy("run", "channel").applyInArrow(group, schema)


OPERATOR = _group.Operator(TABLE, SLOTTED, operate)
