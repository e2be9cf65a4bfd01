"""``causal_merge`` on a batch DataFrame: each merger's arrivals to its deterministic
order (causal merge paper, section 4; ``timebound replay merge``).

One task per merger (``_groups.run`` grouped by the ``merger`` column): its arrivals in
decision order go to the replay's ``MergeAdapter``, one ``Merger`` of the core. Every
arrival gets exactly one of the replay's output rows back, so every input row comes
back with the one that is its fate:

- ``late`` or ``duplicate`` (``time`` = its ``at``): the row the adapter answers for the
  arrival itself (it is the last row it produced, after the deliveries the arrival's
  time made due);
- ``deliver`` (``time`` = its deadline ``r + c + delta + epsilon``): the arrival was
  buffered (the merger's buffer holds one arrival per ``(proc, msg)``, so the delivery
  of that pair is this arrival's), delivered when its deadline passed or at the end.

``position`` is the row's place in its merger's output (from 0): the replay's order of
that merger's rows, so ``where action = 'deliver' order by position`` is the merged
stream.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from timebound.adapters import MERGE, Row
from timebound.adapters.merge import MergeOptions
from timebound.errors import UsageError
from timebound.spark._check import TABLE
from timebound.spark._groups import Operator, Role

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql.types import StructField

#: The columns causal_merge adds.
ADDED = ("action", "time", "position")


def added_fields() -> tuple[StructField, ...]:
    from pyspark.sql.types import LongType, StringType, StructField

    return (StructField("action", StringType(), True), StructField("time", LongType(), True),
            StructField("position", LongType(), True))


def roles(merger: object, msg: object, proc: object, at: object, r: object, c: object,
          kn: object, order: object, variant: str) -> tuple[Role, ...]:
    if variant == "rckn" and kn is None:
        raise UsageError("kn", "required with variant rckn (or variant='rc')")
    if variant == "rc" and kn is not None:
        raise UsageError("kn", "not used with variant rc")
    given = [Role("merger", merger, "id"),
             Role("msg", msg, "id"), Role("proc", proc, "id"),
             Role("at", at, "int"), Role("r", r, "int"),
             Role("c", c, "int")]
    if variant == "rckn":
        given.append(Role("kn", kn, "ints"))
    given.append(Role("order", order, "order", optional=True))
    return tuple(given)


def _ties(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return (row.get("proc"), row.get("msg"), row.get("r"), row.get("c"))


def decider(options: MergeOptions) -> Any:
    """``decide(rows)`` for one merger's rows in decision order."""

    def decide(rows: list[dict[str, Any]]) -> list[Mapping[str, Any]]:
        adapter = MERGE.adapter(options)
        results: list[dict[str, Any] | None] = [None] * len(rows)
        waiting: dict[tuple[str, str], int] = {}
        position = 0

        def record(produced: Iterable[Mapping[str, Any]], current: int | None) -> None:
            nonlocal position
            for out in produced:
                if out["action"] == "deliver":
                    index = waiting.pop((out["proc"], out["msg"]))
                else:
                    assert current is not None
                    index = current
                results[index] = {"action": out["action"], "time": out["time"],
                                  "position": position}
                position += 1

        name = None
        for index, data in enumerate(rows):
            adapter.feed(Row(TABLE, index + 1, data))
            name = data["merger"]
            produced = adapter.drain(name)
            own = bool(produced) and produced[-1]["action"] != "deliver"
            record(produced[:-1] if own else produced, None)
            if own:
                record(produced[-1:], index)
            else:
                waiting[(data["proc"], data["msg"])] = index
        record(adapter.finish(), None)
        assert not waiting and all(r is not None for r in results)
        return [r for r in results if r is not None]

    return decide


def operator(options: MergeOptions, given: tuple[Role, ...]) -> Operator:
    return Operator("causal_merge", given, added_fields(), _ties, decider(options))
