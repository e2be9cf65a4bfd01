"""The at-most-once measures, gathered while the operator decides.

``_fast_metrics`` computes the measures from three small tables read back from the
written decision table: the *cells*, one aggregate per (run, receiver, cls, time
bucket ``t``); the *joint* histogram ``(run, at - ts, verdict) -> count``; and the
accepted copies per (run, receiver, conn, ts). That costs scans and shuffles of every
row (most of the ``metrics`` step of ``timebound pipeline``). Each (run, receiver, cls)
group of the operator already holds exactly its rows, in one Python worker, with its
decisions: here each group sums its own share of those tables as it decides (numpy
over the group's output columns, ``GroupGatherer``) and sends it to the driver through
a Spark accumulator at the end of its partition; the driver turns the partials into
the metrics rows (``Gathered.rows``: the same sums, maxima, "value at the largest
seq" and Spark's exact percentile interpolation, in the same double arithmetic). The
run-wide measures are the declared ones (``timebound.measures``): the rows a count
counts are its declared ``where``, and the driver merges the cells' partials and
finishes them with the declaration's own ``merge`` and ``finish``.

Exactness: every cell key holds its group's key, so groups never merge with each
other; within a group the batches merge by the aggregates' own rules. The null rules
are the SQL ones (``originals``/``lost`` null without ground truth, ``entries`` and
``rho`` null on ``down`` rows; a ratio over zero is null, the one convention of
``timebound.measures``). The
buckets need each run's span of ``at`` before any group starts: the operator's survey
of its input gives it (``spans``), and the driver checks every group against it.

Idempotent: the accumulator's value is ``group key -> partial``; a task that Spark runs
again (a retry, a speculative copy) sends the same partial for the same keys, which
replaces, never adds. ``Gathered.usable`` is the driver's check before it uses them:
every decision row accounted for, the groups' spans making up each run's span, no
histogram over ``JOINT_LIMIT`` entries; otherwise the pipeline computes the measures
from the decision table as before (``_fast_metrics``).

Memory: a group keeps its cells (at most ``metrics.BUCKETS``), its (lifetime, verdict)
counts, and the (conn, ts) of its accepted rows until its partition ends (for the
violations count): a few bytes per accepted row, as the grouped operator held its rows.

tests/test_pipeline_partial_metrics.py checks these rows equal the definition
(``metrics.atmostonce``) on the operator's own decision tables.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.accumulators import AccumulatorParam

from timebound.measures import Aggregate, Clause, aggregate, nullable_add, nullable_max
from timebound.spark.traces._measures import BUCKETS

if TYPE_CHECKING:  # pragma: no cover
    from pyspark import Accumulator
    from pyspark.sql import SparkSession

#: Largest (lifetime, verdict) histogram one group sends to the driver; a larger one
#: (``at - ts`` of fine resolution) makes the pipeline read the decision table instead.
JOINT_LIMIT = 50_000

Key = tuple[Any, ...]  # (run, receiver, cls)
MetricRow = tuple[str, str, str, "float | None", "int | None"]  # a metrics table row

# cell fields, in the order ``_fast_metrics`` names them
N, ORIGINALS, LOST, ACCEPTED, ENTRIES_MAX, ENTRIES_SUM, ENTRIES_N = range(7)
#: then one ``(by, value)`` pair (None: no row) per declared ``LAST_BY`` measure
_LAST_BY = tuple(aggregate("atmostonce", name)
                 for name in ("table_size", "estimate", "estimate_final"))
LAST = {m.name: ENTRIES_N + 1 + i for i, m in enumerate(_LAST_BY)}
_SERIES = tuple(m for m in _LAST_BY if m.series)


_add, _max = nullable_add, nullable_max


def merge_cell(a: list[Any], b: list[Any]) -> list[Any]:
    """Two partial aggregates of one cell (any order) -> one."""
    out = [a[N] + b[N], _add(a[ORIGINALS], b[ORIGINALS]), _add(a[LOST], b[LOST]),
           a[ACCEPTED] + b[ACCEPTED], _max(a[ENTRIES_MAX], b[ENTRIES_MAX]),
           _add(a[ENTRIES_SUM], b[ENTRIES_SUM]), a[ENTRIES_N] + b[ENTRIES_N]]
    return out + [m.later(a[LAST[m.name]], b[LAST[m.name]]) for m in _LAST_BY]


def bucket_width(lo: int, hi: int) -> int:
    """``greatest(1, ceil((hi - lo + 1) / BUCKETS))`` in Spark's arithmetic (doubles)."""
    return max(1, math.ceil(float(hi - lo + 1) / float(BUCKETS)))


@dataclass
class GroupPartial:
    """One (run, receiver, cls) group's share of the measures."""

    rows: int = 0  # decision rows of every type
    cells: dict[int, list[Any]] = field(default_factory=dict)
    lo: int | None = None  # span of the group's message rows' ``at``
    hi: int | None = None
    joint: list[tuple[int, str | None, int]] = field(default_factory=list)
    violations: float | None = None  # the declared REPEATED's finish (None: no row)
    accepted: int = 0
    overflow: bool = False


class Partials(AccumulatorParam[dict[Key, GroupPartial]]):
    """Accumulator of ``group key -> GroupPartial``: a key sent twice is replaced."""

    def zero(self, value: dict[Key, GroupPartial]) -> dict[Key, GroupPartial]:
        return {}

    def addInPlace(self, value1: dict[Key, GroupPartial],  # noqa: N802 (Spark's name)
                   value2: dict[Key, GroupPartial]) -> dict[Key, GroupPartial]:
        value1.update(value2)
        return value1


def _nullable(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(values with nulls as 0, valid mask) of an integer or boolean column."""
    valid = pc.is_valid(column).to_numpy(zero_copy_only=False)
    values = column.fill_null(False if pa.types.is_boolean(column.type) else 0)
    return values.to_numpy(zero_copy_only=False), valid


class GroupGatherer:
    """Sums one group's output batches (``add``), then ``finish`` -> ``GroupPartial``."""

    def __init__(self, span: tuple[int, int] | None) -> None:
        self.partial = GroupPartial()
        self.lo, self.width = (span[0], bucket_width(*span)) if span else (0, 1)
        self.has_span = span is not None
        self.joints: list[dict[tuple[int, str | None], int]] = []
        self.accepted_keys: list[pa.Table] = []

    def add(self, table: pa.Table) -> None:
        part = self.partial
        part.rows += table.num_rows
        # no ``type`` column: every row is a message (the operator's plain input)
        is_msg = (pc.fill_null(pc.equal(table.column("type"), "msg"), False)
                  if "type" in table.column_names else pa.array([True]))
        if not pc.all(is_msg).as_py():
            table = table.filter(is_msg)
            if table.num_rows == 0:
                return
        at = table.column("at").to_numpy()
        ts = table.column("ts").to_numpy()
        lo, hi = int(at.min()), int(at.max())
        part.lo = lo if part.lo is None else min(part.lo, lo)
        part.hi = hi if part.hi is None else max(part.hi, hi)
        # verdicts as codes into ``names`` (the last name, None, is a null verdict)
        encoded = pc.dictionary_encode(table.column("verdict").combine_chunks())
        names = [*encoded.dictionary.to_pylist(), None]
        code = encoded.indices.fill_null(len(names) - 1).to_numpy(zero_copy_only=False)

        def verdict_in(wanted: tuple[Any, ...]) -> np.ndarray:
            return np.isin(code, [i for i, name in enumerate(names) if name in wanted])

        # the rows each declared count counts (``timebound.measures``: its ``where``)
        accepted = _holds(table, _ACCEPTED.where, verdict_in)
        repeats = _holds(table, _REPEATED.where, verdict_in)
        known = _known(table, _ORIGINALS.known)
        entries, has_entries = _nullable(table.column("entries"))

        # Spark: floor(double(at - lo) / double(width)) * width + lo
        t = (np.floor((at - self.lo).astype(np.float64) / float(self.width))
             .astype(np.int64) * self.width + self.lo)
        keys, inv = np.unique(t, return_inverse=True)
        m = len(keys)

        def count(mask: np.ndarray) -> list[int]:
            return np.bincount(inv[mask], minlength=m).tolist()  # type: ignore[no-any-return]

        n = np.bincount(inv, minlength=m).tolist()
        known_n = count(known)
        originals = count(known & _holds(table, _ORIGINALS.where, verdict_in))
        lost_n = count(known & _holds(table, _LOST.where, verdict_in))
        accepted_n = count(accepted)
        entries_n = count(has_entries)
        entries_sum = np.bincount(inv[has_entries], weights=entries[has_entries]
                                  .astype(np.float64), minlength=m).tolist()
        entries_max = np.full(m, np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(entries_max, inv[has_entries], entries[has_entries])
        lasts = [_last_pairs(table, measure, inv, m) for measure in _LAST_BY]
        for i, key in enumerate(keys.tolist()):
            cell = [n[i], originals[i] if known_n[i] else None,
                    lost_n[i] if known_n[i] else None, accepted_n[i],
                    int(entries_max[i]) if entries_n[i] else None,
                    entries_sum[i] if entries_n[i] else None, entries_n[i],
                    *(pairs[i] for pairs in lasts)]
            old = part.cells.get(key)
            part.cells[key] = cell if old is None else merge_cell(old, cell)

        self.joints.append(_counts(at - ts, code.astype(np.int64), names))
        part.accepted += int(accepted.sum())
        if repeats.any():
            self.accepted_keys.append(table.select(list(_REPEAT_KEYS)).filter(pa.array(repeats)))

    def finish(self) -> GroupPartial:
        part = self.partial
        if self.joints:
            joint: Counter[tuple[int, str | None]] = Counter()
            for counts in self.joints:
                joint.update(counts)
                if len(joint) > JOINT_LIMIT:
                    part.overflow = True
                    break
            else:
                part.joint = [(lifetime, verdict, number)
                              for (lifetime, verdict), number in joint.items()]
        if self.accepted_keys:
            # the REPEATED partial (key -> rows) as counts; its finish: keys seen twice
            keys = pa.concat_tables(self.accepted_keys)
            codes = [_codes(keys.column(c)) for c in _REPEAT_KEYS]
            if len(codes) == 2:
                _, _, copies = _pair_counts(*codes)
            else:
                _, copies = np.unique(np.stack(codes, axis=1), axis=0, return_counts=True)
            part.violations = float(np.count_nonzero(copies > 1))
        if not self.has_span and part.lo is not None:
            part.overflow = True  # message rows of a run without a span: not usable
        return part


_ORIGINALS, _LOST, _ACCEPTED, _REPEATED = (
    aggregate("atmostonce", name)
    for name in ("originals", "lost", "accepted", "at_most_once_violations"))
#: The group key's columns; a group holds every row of each of its REPEATED keys
#: (``cls`` is a function of ``conn``), so groups' partials have disjoint keys.
_GROUP = ("run", "receiver", "cls")
_REPEAT_KEYS = tuple(c for c in _REPEATED.within if c not in _GROUP)


def _codes(column: pa.ChunkedArray) -> np.ndarray:
    """An integer or string column as int64 codes (strings: dictionary indices)."""
    if pa.types.is_integer(column.type):
        return column.to_numpy().astype(np.int64)  # type: ignore[no-any-return]
    encoded = pc.dictionary_encode(column.combine_chunks()).indices
    return encoded.to_numpy(zero_copy_only=False).astype(np.int64)  # type: ignore[no-any-return]


def _last_pairs(table: pa.Table, measure: Aggregate, inv: np.ndarray, m: int,
                ) -> list[tuple[int, Any] | None]:
    """Per cell, a ``LAST_BY`` measure's ``(by, value)`` pair (None: no row)."""
    by, has_by = _nullable(table.column(measure.by))
    values, has_value = _nullable(table.column(measure.column or ""))
    at = _last_by_seq(inv, by, has_by & _known(table, measure.among or measure.column), m)
    return [None if r < 0 else (int(by[r]), int(values[r]) if has_value[r] else None)
            for r in at.tolist()]


def _known(table: pa.Table, column: str | None) -> np.ndarray:
    """Rows where ``column`` is not null (none: the table has no such column)."""
    if column is None or column not in table.column_names:
        return np.zeros(table.num_rows, dtype=bool)
    return pc.is_valid(table.column(column)).to_numpy(zero_copy_only=False)  # type: ignore[no-any-return]


def _holds(table: pa.Table, where: tuple[Clause, ...],
           verdict_in: Callable[[tuple[Any, ...]], np.ndarray]) -> np.ndarray:
    """Rows where every clause holds (a null never does; ``verdict`` by its codes)."""
    mask = np.ones(table.num_rows, dtype=bool)
    for clause in where:
        if clause.column == "verdict":
            found, valid = verdict_in(clause.values), ~verdict_in((None,))
        elif clause.column in table.column_names:
            column = table.column(clause.column)
            valid = _known(table, clause.column)
            found = (pc.is_in(column, value_set=pa.array(clause.values, type=column.type))
                     .to_numpy(zero_copy_only=False) if clause.values
                     else np.zeros(table.num_rows, dtype=bool))
        else:
            return np.zeros(table.num_rows, dtype=bool)
        mask &= valid & (~found if clause.negated else found)
    return mask


def _counts(lifetime: np.ndarray, code: np.ndarray, names: list[str | None],
            ) -> dict[tuple[int, str | None], int]:
    """``(lifetime, verdict) -> rows`` of one batch (``code``: verdicts as indexes
    into ``names``, a few values)."""
    low = int(lifetime.min())
    span = int(lifetime.max()) - low + 1
    if span * len(names) <= 4 * len(lifetime) + 1024:  # dense: one bincount
        found = np.bincount((lifetime - low) * len(names) + code)
        keys = np.flatnonzero(found)
        numbers = found[keys]
        lifetimes, codes = keys // len(names) + low, keys % len(names)
    else:
        lifetimes, codes, numbers = _pair_counts(lifetime, code)
    return {(lt, names[c]): n for lt, c, n in zip(lifetimes.tolist(), codes.tolist(),
                                                   numbers.tolist())}


def _pair_counts(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct pairs ``(a[i], b[i])`` and how often each occurs."""
    a_low, b_low = int(a.min()), int(b.min())
    a_span, b_span = int(a.max()) - a_low + 1, int(b.max()) - b_low + 1
    if a_span * b_span < 2**62:  # one int64 key: a plain sort
        key = np.sort((a - a_low) * b_span + (b - b_low))
        first = np.r_[True, key[1:] != key[:-1]]
        starts = np.flatnonzero(first)
        return (key[starts] // b_span + a_low, key[starts] % b_span + b_low,
                np.diff(np.r_[starts, len(key)]))
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    first = np.r_[True, (a[1:] != a[:-1]) | (b[1:] != b[:-1])]
    starts = np.flatnonzero(first)
    return a[starts], b[starts], np.diff(np.r_[starts, len(a)])


def _last_by_seq(inv: np.ndarray, seq: np.ndarray, mask: np.ndarray, m: int) -> np.ndarray:
    """Per cell, the row index of the largest ``seq`` among ``mask`` rows (-1: none)."""
    out = np.full(m, -1, dtype=np.int64)
    rows = np.flatnonzero(mask)
    if len(rows):
        order = rows[np.lexsort((seq[rows], inv[rows]))]
        cells = inv[order]
        last = np.r_[cells[1:] != cells[:-1], True]
        out[cells[last]] = order[last]
    return out


class Gatherer:
    """One partition's groups: ``group(key)`` to add batches; ``send()`` at its end."""

    def __init__(self, accumulator: Accumulator[dict[Key, GroupPartial]],
                 spans: Mapping[str, tuple[int, int]]) -> None:
        self.accumulator = accumulator
        self.spans = spans
        self.groups: dict[Key, GroupGatherer] = {}

    def group(self, key: Key) -> GroupGatherer:
        found = self.groups.get(key)
        if found is None:
            found = self.groups[key] = GroupGatherer(self.spans.get(key[0]))
        return found

    def send(self) -> None:
        self.accumulator.add({key: g.finish() for key, g in self.groups.items()})


@dataclass
class Gathered:
    """The driver's side: the accumulator, and each run's span of message ``at`` that
    the groups bucket by (from the operator's survey of its input)."""

    accumulator: Accumulator[dict[Key, GroupPartial]]
    spans: dict[str, tuple[int, int]]

    @classmethod
    def create(cls, spark: SparkSession) -> Gathered:
        """An empty accumulator; ``atmostonce.operate`` fills in the spans."""
        return cls(spark.sparkContext.accumulator({}, Partials()), {})

    def usable(self, decision_rows: int) -> bool:
        """Every decision row accounted for, in span, no histogram too large."""
        parts = self.accumulator.value
        if sum(p.rows for p in parts.values()) != decision_rows:
            return False
        for (run, _, _), p in parts.items():
            if p.overflow:
                return False
            if p.lo is not None:
                lo, hi = self.spans.get(run, (p.lo + 1, p.lo))  # no span: refused
                if p.lo < lo or p.hi is None or p.hi > hi:
                    return False
        # each run's span is its groups' span (as the decision table would give it)
        seen: dict[str, tuple[int, int]] = {}
        for (run, _, _), p in parts.items():
            if p.lo is not None and p.hi is not None:
                lo, hi = seen.get(run, (p.lo, p.hi))
                seen[run] = (min(lo, p.lo), max(hi, p.hi))
        return seen == self.spans

    def rows(self) -> list[MetricRow]:
        """The at-most-once rows of the metrics table (run, protocol, measure, value,
        t), computed here from the partials: the declared measures' merge and finish
        (``timebound.measures``), no Spark job. A ratio over zero is null and dropped,
        as in the pipeline's SQL."""
        out: list[MetricRow] = []
        runs: dict[str, list[tuple[Key, GroupPartial]]] = {}
        for (run, *group), p in sorted(self.accumulator.value.items(), key=_order):
            runs.setdefault(run, []).append((tuple(group), p))
        for run, groups in runs.items():
            parts = [p for _, p in groups]
            cells = [c for p in parts for c in p.cells.values()]
            if not cells:
                continue
            hist: Counter[int] = Counter()
            verdicts: Counter[str] = Counter()
            for p in parts:
                for lifetime, verdict, number in p.joint:
                    hist[lifetime] += number
                    if verdict is not None:
                        verdicts[verdict] += number
            # each declared measure's partial, merged over the cells (timebound.measures)
            partials: dict[str, Any] = {"lifetime_p50": hist, "lifetime_p99": hist}
            for name, index in _CELL_PARTS.items():
                merge = aggregate(PROTOCOL, name).merge
                partials[name] = _merged(merge, (c[index] for c in cells))
            wide: dict[str, float | None] = {
                name: _finish(name, partials) for name in _WIDE}
            # LAST_BY: each group's pair merged over its cells, then finished
            final = aggregate(PROTOCOL, "estimate_final")
            wide["estimate_final"] = final.finish(
                {key: _merged(final.later, (c[LAST[final.name]] for c in p.cells.values()))
                 for key, p in groups})
            wide["at_most_once_violations"] = _REPEATED.finish_disjoint(
                p.violations for p in parts)
            out += [(run, PROTOCOL, m, float(v), None) for m, v in wide.items()
                    if v is not None]
            out += [(run, PROTOCOL, f"verdict.{v}", float(n), None)
                    for v, n in sorted(verdicts.items())]
            # series: a cell is one group's rows in one bucket (its pair is the group's)
            buckets: dict[int, list[tuple[Key, list[Any]]]] = {}
            for key, p in groups:
                for t, c in p.cells.items():
                    buckets.setdefault(t, []).append((key, c))
            for t, found in sorted(buckets.items()):
                if all(c[LAST[m.name]] is None for m in _SERIES for _, c in found):
                    continue  # no row with the series' ``among`` in the bucket
                out += [(run, PROTOCOL, m.name, m.finish(
                    {key: c[LAST[m.name]] for key, c in found if c[LAST[m.name]] is not None}),
                    t) for m in _SERIES]
        return out


PROTOCOL = "atmostonce"
#: The declared measures (``timebound.measures``) a cell field is the partial of.
_CELL_PARTS = {"messages": N, "originals": ORIGINALS, "lost": LOST, "accepted": ACCEPTED,
               "table_size_max": ENTRIES_MAX, "entries_sum": ENTRIES_SUM,
               "entries_n": ENTRIES_N}
#: The run-wide rows, in the order ``_fast_metrics`` writes them.
_WIDE = ("messages", "originals", "lost", "lifetime_p50", "lifetime_p99",
         "table_size_max", "table_mean", "lost_rate", "lost_per_accepted")


def _merged(merge: Any, partials: Any) -> Any:
    out = None
    for partial in partials:
        out = merge(out, partial)
    return out


def _finish(name: str, partials: dict[str, Any]) -> float | None:
    """The one finish of a declared measure over the merged partials."""
    found = aggregate(PROTOCOL, name)
    if found.of[0]:
        return found.finish(tuple(partials[n] for n in found.of))
    return found.finish(partials[name])


def _order(item: tuple[Any, Any]) -> tuple[str, ...]:
    return tuple(str(x) for x in item[0])
