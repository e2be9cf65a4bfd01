"""``slotted`` on a batch DataFrame: one slotted-FIFO channel per group (slotted paper,
Figs. 3 and 4; ``timebound replay slotted``).

One task per channel (the ``group`` column's value; default: every row is one
channel): its rows -- ``send`` rows in send order and ``arrive`` rows in the order the
transport handed the messages over, interleaved as they happened -- go to the replay's
``SlottedAdapter`` (the core's sender stamps, its receiver acts). The trace has no
clock: the decision order is the caller's ``order`` column (required), then ``send``
before ``arrive``, then ``id`` and the row hash; the receiver's ``now`` is the row's
place in that order, as the replay's is the line.

Each message arrives at most once, so every action of the receiver is on the ``arrive``
row of its message: that row gets ``action`` (``deliver`` or ``discard``) and
``position`` (the action's place in the channel's output, from 0: the order the
receiver acts in). ``send`` rows, and arrivals still buffered at the end, get nulls.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from timebound.adapters import SLOTTED, Row
from timebound.adapters.slotted import SlottedOptions
from timebound.spark._check import TABLE
from timebound.spark._groups import Operator, Role

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql.types import StructField

#: The columns slotted adds.
ADDED = ("action", "position")
_RANK = {"send": 0, "arrive": 1}


def added_fields() -> tuple[StructField, ...]:
    from pyspark.sql.types import LongType, StringType, StructField

    return (StructField("action", StringType(), True),
            StructField("position", LongType(), True))


def roles(type_: object, ident: object, kind: object, order: object) -> tuple[Role, ...]:
    return (Role("type", type_, "string"), Role("id", ident, "id"),
            Role("kind", kind, "string"), Role("order", order, "order"))


def _ties(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return (_RANK.get(str(row.get("type")), len(_RANK)), row.get("type"), row.get("id"))


def _decide(rows: list[dict[str, Any]]) -> list[Mapping[str, Any]]:
    """One channel's rows in decision order."""
    adapter = SLOTTED.adapter(SlottedOptions())
    results: list[Mapping[str, Any]] = [{} for _ in rows]
    arrival: dict[str, int] = {}
    position = 0
    for index, data in enumerate(rows):
        if data.get("type") == "arrive" and isinstance(data.get("id"), str):
            arrival.setdefault(data["id"], index)
        for out in adapter.feed(Row(TABLE, index + 1, data)):
            results[arrival[out["id"]]] = {"action": out["action"], "position": position}
            position += 1
    return results


def operator(given: tuple[Role, ...]) -> Operator:
    return Operator("slotted", given, added_fields(), _ties, _decide, first="order")
