"""Where the at-most-once operator's rows go: per receiver, or per receiver class.

``--classes K`` splits a receiver into K hash classes so that one large receiver spreads
over K tasks. The price: no task sees the whole receiver, so the trace rule (``at``
never decreasing per receiver, in ``seq`` order) needs a job of its own, a window over
(run, receiver) that sorts every row (``atmostonce.check_time_order``).

When there are enough receivers to keep every core busy anyway, the operator instead
sends each whole receiver (all its classes) to one partition and checks the rule as it
decides. ``survey`` reads, in one small aggregate, the rows of each (run, receiver) and
each run's span of message ``at`` (the metrics' time buckets); ``place`` assigns the
receivers to the shuffle partitions largest first, each to the least loaded one
(LPT), and accepts the assignment when its largest partition is within ``SLACK`` of
an even split over the cores that run them. Spark's ``repartition(P, col)`` sends a
row to partition ``pmod(hash(col), P)`` (Murmur3, seed 42, the SQL ``hash``); so each
partition gets a label whose hash lands on it (the smallest of 0, 1, 2, ... by
``spark_hash``, Spark's Murmur3 in Python, checked against Spark by the tests) and
each receiver's rows carry the label of its partition.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

#: A per-receiver placement is used when its largest partition holds at most this
#: times an even share of the rows per core.
SLACK = 1.1

Receiver = tuple[str, str]  # (run, receiver)


@dataclass(frozen=True)
class Survey:
    rows: dict[Receiver, int]  # rows of each (run, receiver), every type
    spans: dict[str, tuple[int, int]]  # run -> (min, max) of its message rows' ``at``
    options: list[dict[str, Any]]  # the distinct (run, option columns) of the input
    # rows that are not a plain message (``type`` other than msg, or a ``down``); None:
    # not counted
    others: int | None = None


def survey(df: DataFrame, option_columns: Sequence[str] = ()) -> Survey:
    """One aggregate over (run, receiver, option columns) of the input."""
    msg_at = F.when(F.col("type") == "msg", F.col("at"))
    plain = F.col("type") == "msg"
    if "down" in df.columns:
        plain = plain & F.col("down").isNull()
    found = df.groupBy("run", "receiver", *option_columns).agg(
        F.count("*").alias("n"), F.min(msg_at).alias("lo"), F.max(msg_at).alias("hi"),
        F.sum(F.when(plain, 0).otherwise(1)).alias("others")
    ).collect()
    rows: dict[Receiver, int] = {}
    spans: dict[str, tuple[int, int]] = {}
    options: dict[tuple[Any, ...], dict[str, Any]] = {}
    others = 0
    for r in found:
        others += r["others"]
        key = (r["run"], r["receiver"])
        rows[key] = rows.get(key, 0) + r["n"]
        if r["lo"] is not None:
            lo, hi = spans.get(r["run"], (r["lo"], r["hi"]))
            spans[r["run"]] = (min(lo, r["lo"]), max(hi, r["hi"]))
        values = {c: r[c] for c in ("run", *option_columns)}
        options.setdefault(tuple(values.values()), values)
    return Survey(rows, spans, list(options.values()), others)


def place(rows: Mapping[Receiver, int], partitions: int,
          cores: int, force: bool = False) -> dict[Receiver, int] | None:
    """``(run, receiver) -> label`` (see the module's docstring), or None when the
    receivers cannot be spread evenly enough (``force``: place them anyway)."""
    if not rows or partitions < 1:
        return None
    load = [(0, p) for p in range(partitions)]
    slot: dict[Receiver, int] = {}
    for receiver, n in sorted(rows.items(), key=lambda kv: (-kv[1], str(kv[0]))):
        used, p = heapq.heappop(load)
        slot[receiver] = p
        heapq.heappush(load, (used + n, p))
    largest = max(used for used, _ in load)
    even = sum(rows.values()) / min(partitions, max(1, cores))
    if not force and largest > SLACK * even:
        return None
    labels = hash_labels(partitions)
    if labels is None:
        return None
    return {receiver: labels[p] for receiver, p in slot.items()}


def hash_labels(partitions: int) -> list[int] | None:
    """For each partition p, the smallest long x >= 0 with ``pmod(hash(x), partitions)
    == p`` (Spark's SQL ``hash``: Murmur3 x86 32-bit, seed 42; ``spark_hash``)."""
    labels: dict[int, int] = {}
    for x in range(64 * partitions):
        labels.setdefault(spark_hash(x) % partitions, x)
        if len(labels) == partitions:
            return [labels[p] for p in range(partitions)]
    return None


_MASK = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def _mix_k1(k1: int) -> int:
    return (_rotl((k1 * 0xCC9E2D51) & _MASK, 15) * 0x1B873593) & _MASK


def _mix_h1(h1: int, k1: int) -> int:
    return (_rotl(h1 ^ k1, 13) * 5 + 0xE6546B64) & _MASK


def spark_hash(value: int, seed: int = 42) -> int:
    """Spark's ``hash`` of one long (``Murmur3_x86_32.hashLong``), as a signed int."""
    h1 = _mix_h1(seed, _mix_k1(value & _MASK))
    h1 = _mix_h1(h1, _mix_k1((value >> 32) & _MASK))
    h1 ^= 8
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _MASK
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _MASK
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def label_column(labels: Mapping[Receiver, int], runs: Mapping[str, int],
                 receivers: Mapping[str, int]) -> Column:
    """The label of each row's (run, receiver), as a column over the int codes of
    ``run`` and ``receiver`` (``runs``, ``receivers``: name -> code); null for a pair
    without a label."""
    width = len(receivers) + 1
    pairs = [x for (run, receiver), label in sorted(labels.items(), key=str)
             if run is not None and receiver is not None
             for x in (F.lit(runs[run] * width + receivers[receiver]).cast("long"),
                       F.lit(label).cast("long"))]  # hashed as a long, as hash_labels does
    key = F.col("run").cast("long") * width + F.col("receiver")
    return F.try_element_at(F.create_map(*pairs), key) if pairs else F.lit(None)
