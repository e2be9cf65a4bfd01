"""Each measure the simulator and the pipeline compute, declared once as a mergeable
aggregate: its rows (a predicate over named columns), its kind, and the kind's
``partial`` / ``merge`` / ``finish``.

A measure (``Aggregate``) is data: a protocol, a name, a ``Kind`` and what the kind
needs -- the rows a ``COUNT`` counts (``where``: every ``Clause`` holds), the column a
``SUM`` / ``MAX`` / ``PERCENTILE`` reads, the two named aggregates a ``RATIO``
divides. From the one declaration:

- the simulator counts partials as it runs (``Tally.add`` of each decided row, or the
  numbers it counted itself) and calls the one ``finish``;
- the pipeline's Spark SQL builds its aggregate, merge and finish columns from it
  (``timebound.pipeline._measure_columns``, used by ``metrics`` and ``_fast_metrics``);
- the pipeline's in-worker partials (``timebound.spark.traces._partial_metrics``)
  merge their groups' partials with ``merge`` and finish them on the driver.

Null rules, the SQL ones: a ``COUNT`` with a ``known`` column is null when no row has
that column (no ground truth), else the rows where ``where`` holds (a clause over a
null value does not hold); a ``SUM`` / ``MAX`` skips nulls and is null over none;
a ``PERCENTILE`` is Spark's exact ``percentile`` (null over no rows); ``LAST`` is the
last non-null value in row order (a reading the simulator hands over).

Two kinds read the row order or the row keys themselves:

- ``LAST_BY``: in each group (the values of ``within``), ``column`` on the row with
  the largest ``by`` among the rows where ``among`` (default ``column``) is not null
  (that value may be null); the groups' values are combined by ``across`` (``SUM`` or
  ``MAX``, nulls skipped, null over none). Partial: ``group -> (by, value)``; merge:
  per group the pair of larger ``by`` (``by`` is unique: any order). A ``series``
  measure is one value per time bucket ``t`` of ``at``: its partial is per bucket.
- ``REPEATED``: the keys (values of ``within``) of the rows where ``where`` holds that
  occur more than once. Partial: ``key -> rows`` (null over no such row); merge: the
  counts added. Partials over disjoint key sets finish to the sum of their finishes
  (``finish_disjoint``), which lets a worker whose group holds every row of its keys
  send one number. A ``Tally``'s
counts start at 0: the simulator knows the ground truth of every row it tallies.

**Empty denominator, decided once here**: a ``RATIO`` whose denominator is zero or
null (or whose numerator is null) is **null** -- Spark's ``try_divide``. A null
measure has no row in the metrics table (``long_form`` drops it), in the simulator's
table as in the pipeline's, so a reader finds the measure missing, never a 0.0 that
looks measured. ``finish`` of a ratio is ``times * numerator / denominator / per``
in doubles (``times`` 100 for a percentage, ``per`` 1000 for ticks -> ms).
"""

from __future__ import annotations

import bisect
import enum
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from timebound.contract import LOST_VERDICTS, UNDECIDED_VERDICT


class Kind(enum.Enum):
    """How a measure aggregates (each kind's partial, merge and finish below)."""

    COUNT = "count"            # rows where ``where`` holds: int (null: see ``known``)
    SUM = "sum"                # sum of ``column`` (nulls skipped; null over none)
    MAX = "max"                # largest ``column`` (nulls skipped; null over none)
    RATIO = "ratio"            # ``of[0] / of[1]`` (null over zero: module docstring)
    PERCENTILE = "percentile"  # Spark's exact percentile ``p`` of ``column``
    LAST = "last"              # ``column`` of the last row (in row order) that has one
    LAST_BY = "last_by"        # per group: ``column`` at the largest ``by``; groups: ``across``
    REPEATED = "repeated"      # keys (``within``) of ``where`` rows seen more than once


@dataclass(frozen=True, slots=True)
class Clause:
    """``column`` is one of ``values`` (``negated``: is not null and none of them).
    A null value never satisfies a clause (SQL: a comparison with null is not true)."""

    column: str
    values: tuple[Any, ...]
    negated: bool = False

    def holds(self, value: Any) -> bool:
        if value is None:
            return False
        return (value in self.values) != self.negated


def one_of(column: str, *values: Any) -> Clause:
    return Clause(column, values)


def none_of(column: str, *values: Any) -> Clause:
    return Clause(column, values, negated=True)


@dataclass(frozen=True, slots=True)
class Aggregate:
    """One declared measure (module docstring). ``published``: a row of the metrics
    table (else only a part of a published ratio)."""

    protocol: str
    name: str
    kind: Kind
    where: tuple[Clause, ...] = ()
    known: str | None = None
    column: str | None = None
    of: tuple[str, str] = ("", "")
    times: float = 1.0
    per: float = 1.0
    p: float = 0.0
    published: bool = True
    within: tuple[str, ...] = ()
    by: str = ""
    among: str | None = None
    across: Kind = Kind.MAX
    series: bool = False

    def holds(self, row: Mapping[str, Any]) -> bool:
        """``row`` is one the ``COUNT`` counts."""
        return all(c.holds(row.get(c.column)) for c in self.where)

    def partial(self, rows: Iterable[Mapping[str, Any]]) -> Any:
        """The partial aggregate of ``rows`` (``column -> value`` mappings)."""
        rows = list(rows)
        if self.kind is Kind.RATIO:
            num, den = self.parts
            return (num.partial(rows), den.partial(rows))
        if self.kind is Kind.COUNT:
            if self.known is not None and all(r.get(self.known) is None for r in rows):
                return None
            return sum(1 for r in rows if self.holds(r))
        if self.kind is Kind.LAST_BY or self.kind is Kind.REPEATED:
            out: Any = None
            add = self.adder()
            for r in rows:
                out = add(out, r)
            return out
        values = [r.get(self.column or "") for r in rows]
        found = [v for v in values if v is not None]
        if self.kind is Kind.PERCENTILE:
            return dict(Counter(found))
        if not found:
            return None
        if self.kind is Kind.LAST:
            return found[-1]
        return sum(found) if self.kind is Kind.SUM else max(found)

    def add(self, partial: Any, row: Mapping[str, Any]) -> Any:
        """``merge(partial, self.partial([row]))``, for one row at a time."""
        return self.adder()(partial, row)

    def adder(self) -> Callable[[Any, Mapping[str, Any]], Any]:
        """``add`` as a function specialised to this measure (the simulator calls it
        once per decided row)."""
        kind, known, column = self.kind, self.known, self.column or ""
        if kind is Kind.COUNT:
            clauses = tuple((c.column, frozenset(c.values), c.negated) for c in self.where)

            def count(partial: Any, row: Mapping[str, Any]) -> Any:
                if known is not None and row.get(known) is None:
                    return partial
                base = 0 if partial is None else partial
                for name, values, negated in clauses:
                    value = row.get(name)
                    if value is None or (value in values) == negated:
                        return base
                return base + 1
            return count
        if kind is Kind.RATIO or kind is Kind.PERCENTILE:
            return lambda partial, row: self.merge(partial, self.partial((row,)))
        within = self.within
        if kind is Kind.REPEATED:
            def repeat(partial: Any, row: Mapping[str, Any]) -> Any:
                if not self.holds(row):
                    return partial
                out = {} if partial is None else partial
                key = tuple(row.get(c) for c in within)
                out[key] = out.get(key, 0) + 1
                return out
            return repeat
        if kind is Kind.LAST_BY:
            by, among = self.by, self.among or column

            def last(partial: Any, row: Mapping[str, Any]) -> Any:
                order = row.get(by)
                if row.get(among) is None or order is None:
                    return partial
                out = {} if partial is None else partial
                key = tuple(row.get(c) for c in within)
                out[key] = self.later(out.get(key), (order, row.get(column)))
                return out
            return last

        def fold(partial: Any, row: Mapping[str, Any]) -> Any:
            value = row.get(column)
            if value is None:
                return partial
            if partial is None or kind is Kind.LAST:
                return value
            return partial + value if kind is Kind.SUM else max(partial, value)
        return fold

    def merge(self, a: Any, b: Any) -> Any:
        """Two partials of consecutive rows (``a`` first; any order but for ``LAST``)
        -> the partial of all of them."""
        if self.kind is Kind.RATIO:
            num, den = self.parts
            return (num.merge(a[0], b[0]), den.merge(a[1], b[1]))
        if self.kind is Kind.PERCENTILE:
            out = Counter(a)
            out.update(b)
            return dict(out)
        if self.kind is Kind.MAX:
            return nullable_max(a, b)
        if self.kind is Kind.LAST:
            return a if b is None else b
        if self.kind is Kind.LAST_BY or self.kind is Kind.REPEATED:
            if a is None or b is None:
                return b if a is None else a
            one = self.later if self.kind is Kind.LAST_BY else nullable_add
            return {k: one(a.get(k), b.get(k)) for k in a.keys() | b.keys()}
        return nullable_add(a, b)

    @staticmethod
    def later(a: tuple[Any, Any] | None, b: tuple[Any, Any] | None) -> Any:
        """A ``LAST_BY`` group's merge: of two ``(by, value)`` pairs (None: no row),
        the one of larger ``by``."""
        if a is None or b is None:
            return b if a is None else a
        return b if b[0] > a[0] else a

    def combine(self, values: Iterable[Any]) -> Any:
        """A ``LAST_BY``'s groups' values combined by ``across`` (nulls skipped; null
        over none)."""
        out = None
        for value in values:
            out = (nullable_add if self.across is Kind.SUM else nullable_max)(out, value)
        return out

    def finish_disjoint(self, finished: Iterable[float | None]) -> float | None:
        """A ``REPEATED``'s finish of the merge of partials over disjoint key sets,
        from their own finishes (a key repeated in one is repeated in the merge)."""
        out = None
        for value in finished:
            out = nullable_add(out, value)
        return out

    def finish(self, partial: Any) -> float | None:
        """The measure's value from its partial (None: null, no row)."""
        if self.kind is Kind.RATIO:
            num, den = self.parts
            return ratio(num.finish(partial[0]), den.finish(partial[1]), self.times,
                         self.per)
        if self.kind is Kind.PERCENTILE:
            return spark_percentile(partial, self.p)
        if partial is None:
            return None
        if self.kind is Kind.REPEATED:
            return float(sum(1 for n in partial.values() if n > 1))
        if self.kind is Kind.LAST_BY:
            found = self.combine(value for _, value in partial.values())
            return None if found is None else float(found)
        return float(partial)

    @property
    def parts(self) -> tuple[Aggregate, Aggregate]:
        """A ratio's numerator and denominator aggregates."""
        return aggregate(self.protocol, self.of[0]), aggregate(self.protocol, self.of[1])


def nullable_add(a: Any, b: Any) -> Any:
    """SQL ``sum`` of two partial sums: null only when both are."""
    return b if a is None else a if b is None else a + b


def nullable_max(a: Any, b: Any) -> Any:
    """SQL ``max`` of two partial maxima: null only when both are."""
    return b if a is None else a if b is None else max(a, b)


def ratio(numerator: Any, denominator: Any, times: float = 1.0,
          per: float = 1.0) -> float | None:
    """``times * numerator / denominator / per`` in doubles; null over a zero or null
    denominator or a null numerator (``try_divide``; the one convention)."""
    if numerator is None or denominator is None or denominator == 0:
        return None
    return times * float(numerator) / float(denominator) / per


def spark_percentile(hist: Mapping[Any, int], p: float) -> float | None:
    """Spark's exact ``percentile(value, p, frequency)`` of ``value -> count``
    (Percentile.getPercentile: position (n - 1) p, linear interpolation between the
    values at floor and ceil, in doubles); null over no rows."""
    keys = sorted(k for k, n in hist.items() if n > 0)
    if not keys:
        return None
    accumulated = []
    total = 0
    for k in keys:
        total += hist[k]
        accumulated.append(total)
    position = float(total - 1) * p
    lower, higher = math.floor(position), math.ceil(position)
    lower_key = keys[bisect.bisect_left(accumulated, lower + 1)]
    if higher == lower:
        return float(lower_key)
    higher_key = keys[bisect.bisect_left(accumulated, higher + 1)]
    if higher_key == lower_key:
        return float(lower_key)
    return (higher - position) * float(lower_key) + (position - lower) * float(higher_key)


def _count(protocol: str, name: str, *where: Clause, known: str | None = None,
           published: bool = True) -> Aggregate:
    return Aggregate(protocol, name, Kind.COUNT, where, known, published=published)


def _of(protocol: str, name: str, kind: Kind, column: str, *, p: float = 0.0,
        published: bool = True) -> Aggregate:
    return Aggregate(protocol, name, kind, column=column, p=p, published=published)


def _part(protocol: str, name: str, kind: Kind = Kind.SUM) -> Aggregate:
    """A ratio's part that the simulator measures itself and hands over (``column``
    ``value``): a sum of its readings, or the last one (``LAST``)."""
    return Aggregate(protocol, name, kind, column="value", published=False)


def _last_by(protocol: str, name: str, column: str, across: Kind, *,
             among: str | None = None, series: bool = False) -> Aggregate:
    """A ``LAST_BY`` of a receiver's decided messages: per (receiver, class) group, by
    ``seq`` (unique within a run)."""
    return Aggregate(protocol, name, Kind.LAST_BY, column=column, within=_RECEIVER,
                     by="seq", among=among, across=across, series=series)


def _ratio(protocol: str, name: str, numerator: str, denominator: str, *,
           times: float = 1.0, per: float = 1.0, published: bool = True) -> Aggregate:
    return Aggregate(protocol, name, Kind.RATIO, of=(numerator, denominator),
                     times=times, per=per, published=published)


AMO, MERGE, SLOTTED, STABILITY = "atmostonce", "merge", "slotted", "stability"
_ORIGINAL = one_of("original", True)
_AREAS = ("queue", "queue_slot", "queue_order", "queue_f")
_RECEIVER = ("receiver", "cls")

#: Every declared measure (names and meanings: ``timebound.contract.MEASURES``).
#: Counts without ``where`` count every row given (the pipeline: the rows of the
#: table; the simulator: the events its definition names).
AGGREGATES: tuple[Aggregate, ...] = (
    # at-most-once: decided message rows (``lifetime`` = at - ts)
    _count(AMO, "messages"),
    _count(AMO, "originals", _ORIGINAL, none_of("verdict", UNDECIDED_VERDICT),
           known="original"),
    _count(AMO, "lost", _ORIGINAL, one_of("verdict", *LOST_VERDICTS), known="original"),
    _count(AMO, "accepted", one_of("verdict", "accepted"), published=False),
    _count(AMO, "entries_n", none_of("entries"), published=False),
    _of(AMO, "entries_sum", Kind.SUM, "entries", published=False),
    _of(AMO, "table_size_max", Kind.MAX, "entries"),
    _of(AMO, "lifetime_p50", Kind.PERCENTILE, "lifetime", p=0.5),
    _of(AMO, "lifetime_p99", Kind.PERCENTILE, "lifetime", p=0.99),
    _ratio(AMO, "lost_rate", "lost", "originals"),
    _ratio(AMO, "lost_per_accepted", "lost", "accepted"),
    _ratio(AMO, "table_mean", "entries_sum", "entries_n"),
    # the estimate in force on each receiver's last message, the largest of them
    _last_by(AMO, "estimate_final", "rho", Kind.MAX),
    # a copy of one message (receiver, conn, ts) accepted twice breaks at-most-once
    Aggregate(AMO, "at_most_once_violations", Kind.REPEATED,
              (one_of("verdict", "accepted"),), within=("receiver", "conn", "ts")),
    # series: per bucket, the tables' sizes on their last row with one, summed over
    # the receivers, and the largest estimate in force on those rows
    _last_by(AMO, "table_size", "entries", Kind.SUM, series=True),
    _last_by(AMO, "estimate", "rho", Kind.MAX, among="entries", series=True),
    # at-most-once, the simulator's: over the messages the clients sent
    _count(AMO, "messages_sent"),
    _count(AMO, "never_accepted", one_of("accepted", 0), published=False),
    _ratio(AMO, "never_accepted_rate", "never_accepted", "messages_sent"),
    _part(AMO, "refused_genuine"),
    _part(AMO, "judged_messages"),
    _ratio(AMO, "refused_genuine_rate", "refused_genuine", "judged_messages"),
    _part(AMO, "refused_unknown"),
    _ratio(AMO, "refused_unknown_rate", "refused_unknown", "messages_sent"),
    _part(AMO, "table_bytes_sum"),
    _part(AMO, "table_bytes_rows"),
    _ratio(AMO, "table_bytes_mean", "table_bytes_sum", "table_bytes_rows"),
    _part(AMO, "spike_arrivals"),
    _part(AMO, "arrivals"),
    _ratio(AMO, "spike_share", "spike_arrivals", "arrivals"),
    _part(AMO, "final_estimate", Kind.LAST),
    _part(AMO, "estimate_late_max", Kind.MAX),
    _part(AMO, "true_max_lifetime", Kind.LAST),
    _ratio(AMO, "estimate_over_true", "final_estimate", "true_max_lifetime"),
    _ratio(AMO, "estimate_during_over_true", "estimate_late_max", "true_max_lifetime"),
    # merge: the merger's output rows
    _count(MERGE, "late", one_of("action", "late"), published=False),
    _count(MERGE, "judged_arrivals", one_of("action", "deliver", "late"), published=False),
    _ratio(MERGE, "late_rate", "late", "judged_arrivals"),
    _part(MERGE, "received"),
    _ratio(MERGE, "late_pct", "late", "received", times=100.0),
    # slotted: the simulator's receiver (delays in ticks, reported in ms)
    _part(SLOTTED, "discarded"),
    _part(SLOTTED, "arrived"),
    _part(SLOTTED, "unreliable_arrived"),
    _ratio(SLOTTED, "discard_pct", "discarded", "arrived", times=100.0),
    _ratio(SLOTTED, "discard_pct_unreliable", "discarded", "unreliable_arrived",
           times=100.0),
    _part(SLOTTED, "fr_delay_sum"),
    _part(SLOTTED, "fr_delivered"),
    _ratio(SLOTTED, "fr_delay_ms", "fr_delay_sum", "fr_delivered", per=1000.0),
    _part(SLOTTED, "inslot_delay_sum"),
    _part(SLOTTED, "inslot_delivered"),
    _ratio(SLOTTED, "inslot_delay_ms", "inslot_delay_sum", "inslot_delivered", per=1000.0),
    _part(SLOTTED, "fr_waited"),
    _ratio(SLOTTED, "fr_waited_pct", "fr_waited", "fr_delivered", times=100.0),
    # slotted time averages: an area (messages x ticks) over the run's ticks
    _part(SLOTTED, "ticks", Kind.LAST),
    *(_part(SLOTTED, f"{q}_area") for q in (*_AREAS, "little")),
    *(_ratio(SLOTTED, f"{q}_mean", f"{q}_area", "ticks") for q in _AREAS),
    _ratio(SLOTTED, "little_mean", "little_area", "ticks", published=False),
    _part(SLOTTED, "little_gap", Kind.LAST),
    _part(SLOTTED, "queue_level", Kind.LAST),
    _ratio(SLOTTED, "little_gap_pct", "little_gap", "queue_level", times=100.0),
    # stability: the acks table
    _count(STABILITY, "sent", one_of("type", "send")),
    _count(STABILITY, "acks", one_of("type", "ack")),
    _of(STABILITY, "ack_bytes", Kind.SUM, "ack_bytes"),
    _ratio(STABILITY, "ack_bytes_per_ack", "ack_bytes", "acks"),
    _count(STABILITY, "recv.delivered", one_of("delivered", True)),
    _count(STABILITY, "recv.ignored", one_of("delivered", False)),
    # stability latency: one row per message made stable, latency = stable - send
    _count(STABILITY, "stable"),
    _of(STABILITY, "latency_sum", Kind.SUM, "latency", published=False),
    _ratio(STABILITY, "latency_mean", "latency_sum", "stable"),
    _of(STABILITY, "latency_p50", Kind.PERCENTILE, "latency", p=0.5),
    _of(STABILITY, "latency_p99", Kind.PERCENTILE, "latency", p=0.99),
    _of(STABILITY, "latency_max", Kind.MAX, "latency"),
)

_BY_NAME: dict[tuple[str, str], Aggregate] = {(a.protocol, a.name): a for a in AGGREGATES}


def aggregate(protocol: str, name: str) -> Aggregate:
    """The declared measure ``name`` of ``protocol`` (KeyError: not declared)."""
    return _BY_NAME[(protocol, name)]


def finish(protocol: str, name: str, *parts: Any) -> float | None:
    """The one finish of a declared measure from the partial its owner counted: a
    ratio's numerator and denominator partials, another kind's single partial."""
    found = aggregate(protocol, name)
    return found.finish(parts if found.kind is Kind.RATIO else parts[0])


class Tally:
    """Running partials of some declared ``COUNT`` / ``SUM`` / ``MAX`` / ``REPEATED``
    measures of one protocol, added row by row (the simulator's counters); ``finish`` any declared
    measure over them."""

    def __init__(self, protocol: str, names: Iterable[str]) -> None:
        self.protocol = protocol
        self.aggregates = [aggregate(protocol, n) for n in names]
        self._adders = [(a.name, a.adder()) for a in self.aggregates]
        # a tally's counts start at 0 and its repeats at none (its owner knows its
        # rows' ground truth)
        self.partials: dict[str, Any] = {
            a.name: 0 if a.kind is Kind.COUNT else {} if a.kind is Kind.REPEATED else None
            for a in self.aggregates}

    def add(self, row: Mapping[str, Any]) -> None:
        """Merge one row's partial into each aggregate's."""
        partials = self.partials
        for name, add in self._adders:
            partials[name] = add(partials[name], row)

    def value(self, name: str) -> Any:
        """The running partial of ``name`` (a count or sum; None before any row)."""
        return self.partials[name]

    def finish(self, name: str) -> float | None:
        """``name``'s value over the rows so far (a ratio of two tallied measures)."""
        found = aggregate(self.protocol, name)
        if found.kind is Kind.RATIO:
            return found.finish(tuple(self.partials[n] for n in found.of))
        return found.finish(self.partials[name])
