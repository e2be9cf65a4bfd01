"""``causal_stamp`` on a batch DataFrame: bounded logical timestamps ``<r, c, kn>``
(causal merge paper, Fig. 1 with section 3.3; ``<r, c>``: Fig. 3; ``timebound replay
causal``).

One task per execution (the ``group`` column's value; default: every row is one
execution, since its processes exchange messages): its events go to the replay's
``CausalAdapter`` (one process of the core per ``proc``) and each row gets the
timestamp the replay gives its event: ``r``, ``c`` and, for ``rckn``, ``kn``.

The replay reads its rows in a causally consistent order (a ``recv`` after the ``send``
of its message), which the processes' clocks ``rt`` need not give (loosely synchronized
clocks: a receive may read an earlier ``rt`` than its send). So the decision order here
is the caller's ``order`` column (required: a sequence number, a global event time),
then ``rt``, then the type (``send`` before ``recv`` before ``local``), ``proc``, ``msg``
and the row hash.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from timebound.adapters import CAUSAL, Row
from timebound.adapters.causal import CausalOptions
from timebound.errors import UsageError
from timebound.spark._check import TABLE, keyword
from timebound.spark._groups import Operator, Role

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql.types import StructField

#: The columns causal_stamp adds (``kn`` with the variant ``rckn`` only).
ADDED = ("r", "c", "kn")
_RANK = {"send": 0, "recv": 1, "local": 2}


def options(epsilon: object, variant: object, n: object) -> CausalOptions:
    try:
        return CausalOptions.from_values({"epsilon": epsilon, "variant": variant, "n": n})
    except UsageError as exc:
        raise UsageError(keyword(exc.option), keyword(exc.reason)) from None


def added_fields(variant: str) -> tuple[StructField, ...]:
    from pyspark.sql.types import ArrayType, LongType, StructField

    fields = [StructField("r", LongType(), True), StructField("c", LongType(), True)]
    if variant == "rckn":
        fields.append(StructField("kn", ArrayType(LongType()), True))
    return tuple(fields)


def roles(type_: object, proc: object, rt: object, msg: object, order: object
          ) -> tuple[Role, ...]:
    return (Role("type", type_, "string"), Role("proc", proc, "id"), Role("rt", rt, "int"),
            Role("msg", msg, "id"), Role("order", order, "order"))


def _ties(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return (row.get("rt"), _RANK.get(str(row.get("type")), len(_RANK)), row.get("type"),
            row.get("proc"), row.get("msg"))


def decider(opts: CausalOptions) -> Any:
    """``decide(rows)`` for one execution's events in decision order."""

    def decide(rows: list[dict[str, Any]]) -> list[Mapping[str, Any]]:
        adapter = CAUSAL.adapter(opts)
        results: list[Mapping[str, Any]] = []
        for index, data in enumerate(rows):
            (out,) = adapter.feed(Row(TABLE, index + 1, data))
            results.append({name: out.get(name) for name in ADDED})
        return results

    return decide


def operator(opts: CausalOptions, given: tuple[Role, ...]) -> Operator:
    return Operator("causal_stamp", given, added_fields(opts.variant), _ties, decider(opts),
                    first="order")
