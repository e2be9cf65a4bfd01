"""``stability`` on a batch DataFrame: timestamp (or vector) acknowledgments
(stability paper, Fig. 1; ``timebound replay stability``).

One task per execution (the ``group`` column's value; default: every row is one
execution, since its nodes exchange messages and acks): its rows in decision order go to
the replay's ``StabilityAdapter``, one ``StabilityNode`` of the core per node, and each
row gets the replay's answer for it: ``delivered`` on ``recv`` rows, ``value`` on
``ack`` rows (the timestamp ack, a long; with ``acks="vector"`` the vector, a map
sender -> last ts) and ``stable`` (the sorted timestamps of the node's own buffered
messages this row made stable) on ``ackrecv`` rows and on ``ack`` rows of a node that
is also a sender. Other cells are null.

One DataFrame column names the acknowledgment on both rows that carry it: the replay's
``id`` of an ``ack`` row and ``ack`` of an ``ackrecv`` row (``ack=``). The replay's
``from`` is ``origin=`` (``from`` is a Python keyword).

Ties in ``at`` after ``order``: the row's type in the order a message's life goes
(``send``, ``recv``, ``ack``, ``ackrecv``), then ``node``, ``ts``, ``origin``, ``ack``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from timebound.adapters import STABILITY, Row
from timebound.adapters.stability import ROW_TYPES, StabilityOptions
from timebound.core.stability import AckMode
from timebound.errors import TraceError, UsageError
from timebound.spark._check import TABLE, keyword
from timebound.spark._groups import Operator, Role

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql.types import StructField

#: The columns stability adds.
ADDED = ("delivered", "value", "stable")
_RANK = {kind: rank for rank, kind in enumerate(ROW_TYPES)}


def names(value: object, option: str) -> str | None:
    """A list of node names (a sequence of strings, or one comma-separated string) as
    the replay's option value."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return ",".join(value)
    raise UsageError(option, f"expected a list of node names, got {value!r}")


def options(acks: object, senders: object, receivers: object) -> StabilityOptions:
    values = {"acks": acks, "senders": names(senders, "senders"),
              "receivers": names(receivers, "receivers")}
    try:
        return StabilityOptions.from_values(values)
    except UsageError as exc:
        raise UsageError(keyword(exc.option), keyword(exc.reason)) from None


def added_fields(acks: AckMode) -> tuple[StructField, ...]:
    from pyspark.sql.types import (
        ArrayType,
        BooleanType,
        LongType,
        MapType,
        StringType,
        StructField,
    )

    value = LongType() if acks is AckMode.TIMESTAMP else MapType(StringType(), LongType())
    return (StructField("delivered", BooleanType(), True), StructField("value", value, True),
            StructField("stable", ArrayType(LongType()), True))


def roles(type_: object, node: object, at: object, ts: object, origin: object,
          ack: object, order: object) -> tuple[Role, ...]:
    return (Role("type", type_, "string"), Role("node", node, "id"),
            Role("at", at, "int"), Role("ts", ts, "int"),
            Role("origin", origin, "id", field="from"),
            Role("ack", ack, "id"), Role("order", order, "order", optional=True))


def _ties(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return (_RANK.get(str(row.get("type")), len(_RANK)), row.get("type"), row.get("node"),
            row.get("ts"), row.get("from"), row.get("ack"))


def decider(opts: StabilityOptions) -> Any:
    """``decide(rows)`` for one execution's rows in decision order."""

    def decide(rows: list[dict[str, Any]]) -> list[Mapping[str, Any]]:
        adapter = STABILITY.adapter(opts)
        results: list[Mapping[str, Any]] = []
        for index, data in enumerate(rows):
            if data.get("type") == "ack" and "ack" in data:
                data = {k: v for k, v in data.items() if k != "ack"} | {"id": data["ack"]}
            try:
                (out,) = adapter.feed(Row(TABLE, index + 1, data))
            except TraceError as exc:  # the replay's ``id`` is our ``ack`` column
                if exc.field != "id":
                    raise
                raise TraceError(exc.source, exc.line, "ack", exc.reason) from None
            results.append({name: out.get(name) for name in ADDED})
        return results

    return decide


def operator(opts: StabilityOptions, given: tuple[Role, ...]) -> Operator:
    return Operator("stability", given, added_fields(opts.acks), _ties, decider(opts))
