"""The at-most-once measures' inputs, gathered while the operator decides.

``_fast_metrics`` computes the measures from three small tables: the *cells*, one
aggregate per (run, receiver, cls, time bucket ``t``); the *joint* histogram
``(run, at - ts, verdict) -> count``; and the at-most-once violations per run. Read
from the written decision table, they cost a scan and a shuffle each (most of the
``metrics`` step of ``timebound pipeline``). Each (run, receiver, cls) group of the
operator already holds exactly its rows, in one Python worker, with its decisions: here
each group sums its own share of the three tables as it decides (numpy and Arrow over
the group's output columns), and sends the result to the driver through a Spark
accumulator at the end of its partition.

Exactness: a group is one cell family (its key is in every cell's key), so groups never
need merging with each other; within a group the batches merge by the aggregates' own
rules (sums, maxima, the value at the largest ``seq``). The null rules are the SQL ones
of ``_fast_metrics`` (``originals``/``lost`` null without ground truth, ``entries``
and ``rho`` null on ``down`` rows). The buckets need each run's span of ``at`` before
any group starts: the driver computes it from the input (``spans``) and every group
checks its own rows against it.

Idempotent: the accumulator's value is ``group key -> partial``; a task that Spark runs
again (a retry, a speculative copy) sends the same partial for the same keys, which
replaces, never adds. ``Gathered.usable`` is the driver's check before it uses them: every
decision row accounted for, every group's ``at`` inside its run's span, no histogram
over ``JOINT_LIMIT`` entries; otherwise the pipeline reads the decision table as before.

tests/test_pipeline_partial_metrics.py checks the measures from these partials equal
the definition (``metrics.atmostonce``) on the operator's own decision tables.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.accumulators import AccumulatorParam

from timebound.contract import LOST_VERDICTS, UNDECIDED_VERDICT
from timebound.pipeline.metrics import BUCKETS

if TYPE_CHECKING:  # pragma: no cover
    from pyspark import Accumulator
    from pyspark.sql import DataFrame, SparkSession

#: Largest (lifetime, verdict) histogram one group sends to the driver; a larger one
#: (``at - ts`` of fine resolution) makes the pipeline read the decision table instead.
JOINT_LIMIT = 50_000

Key = tuple[Any, ...]  # (run, receiver, cls)

# cell fields, in the order ``_fast_metrics`` names them
N, ORIGINALS, LOST, ACCEPTED, ENTRIES_MAX, ENTRIES_SUM, ENTRIES_N, \
    SIZE_SEQ, SIZE_LAST, SIZE_RHO, RHO_SEQ, RHO_LAST = range(12)


def _add(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else a + b


def _max(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else max(a, b)


def merge_cell(a: list[Any], b: list[Any]) -> list[Any]:
    """Two partial aggregates of one cell (any order) -> one."""
    out = [a[N] + b[N], _add(a[ORIGINALS], b[ORIGINALS]), _add(a[LOST], b[LOST]),
           a[ACCEPTED] + b[ACCEPTED], _max(a[ENTRIES_MAX], b[ENTRIES_MAX]),
           _add(a[ENTRIES_SUM], b[ENTRIES_SUM]), a[ENTRIES_N] + b[ENTRIES_N]]
    later = b if a[SIZE_SEQ] is None or (b[SIZE_SEQ] is not None
                                          and b[SIZE_SEQ] > a[SIZE_SEQ]) else a
    out += [later[SIZE_SEQ], later[SIZE_LAST], later[SIZE_RHO]]
    later = b if a[RHO_SEQ] is None or (b[RHO_SEQ] is not None
                                         and b[RHO_SEQ] > a[RHO_SEQ]) else a
    return out + [later[RHO_SEQ], later[RHO_LAST]]


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
    violations: int = 0
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
        is_msg = pc.fill_null(pc.equal(table.column("type"), "msg"), False)
        if not pc.all(is_msg).as_py():
            table = table.filter(is_msg)
            if table.num_rows == 0:
                return
        at = table.column("at").to_numpy()
        ts = table.column("ts").to_numpy()
        seq = table.column("seq").to_numpy()
        lo, hi = int(at.min()), int(at.max())
        part.lo = lo if part.lo is None else min(part.lo, lo)
        part.hi = hi if part.hi is None else max(part.hi, hi)
        # verdicts as codes into ``names`` (the last name, None, is a null verdict)
        encoded = pc.dictionary_encode(table.column("verdict").combine_chunks())
        names = [*encoded.dictionary.to_pylist(), None]
        code = encoded.indices.fill_null(len(names) - 1).to_numpy(zero_copy_only=False)

        def verdict_in(wanted: tuple[str, ...]) -> np.ndarray:
            return np.isin(code, [i for i, name in enumerate(names) if name in wanted])

        accepted = verdict_in(("accepted",))
        decided = ~verdict_in((UNDECIDED_VERDICT, None))  # type: ignore[arg-type]
        lost = verdict_in(LOST_VERDICTS)
        if "original" in table.column_names:
            original, known = _nullable(table.column("original"))
        else:
            original = known = np.zeros(table.num_rows, dtype=bool)
        entries, has_entries = _nullable(table.column("entries"))
        rho, has_rho = _nullable(table.column("rho"))

        # Spark: floor(double(at - lo) / double(width)) * width + lo
        t = (np.floor((at - self.lo).astype(np.float64) / float(self.width))
             .astype(np.int64) * self.width + self.lo)
        keys, inv = np.unique(t, return_inverse=True)
        m = len(keys)

        def count(mask: np.ndarray) -> list[int]:
            return np.bincount(inv[mask], minlength=m).tolist()  # type: ignore[no-any-return]

        n = np.bincount(inv, minlength=m).tolist()
        known_n = count(known)
        originals = count(known & original & decided)
        lost_n = count(known & original & lost)
        accepted_n = count(accepted)
        entries_n = count(has_entries)
        entries_sum = np.bincount(inv[has_entries], weights=entries[has_entries]
                                  .astype(np.float64), minlength=m).tolist()
        entries_max = np.full(m, np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(entries_max, inv[has_entries], entries[has_entries])
        size_at = _last_by_seq(inv, seq, has_entries, m)
        rho_at = _last_by_seq(inv, seq, has_rho, m)
        for i, key in enumerate(keys.tolist()):
            s, r = size_at[i], rho_at[i]
            cell = [n[i], originals[i] if known_n[i] else None,
                    lost_n[i] if known_n[i] else None, accepted_n[i],
                    int(entries_max[i]) if entries_n[i] else None,
                    entries_sum[i] if entries_n[i] else None, entries_n[i],
                    None if s < 0 else int(seq[s]), None if s < 0 else int(entries[s]),
                    None if s < 0 or not has_rho[s] else int(rho[s]),
                    None if r < 0 else int(seq[r]), None if r < 0 else int(rho[r])]
            old = part.cells.get(key)
            part.cells[key] = cell if old is None else merge_cell(old, cell)

        self.joints.append(_counts(at - ts, code.astype(np.int64), names))
        part.accepted += int(accepted.sum())
        if accepted.any():
            self.accepted_keys.append(table.select(["conn", "ts"]).filter(pa.array(accepted)))

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
            keys = pa.concat_tables(self.accepted_keys)
            conn = pc.dictionary_encode(keys.column("conn").combine_chunks()).indices
            codes = conn.to_numpy(zero_copy_only=False).astype(np.int64)
            _, _, copies = _pair_counts(codes, keys.column("ts").to_numpy())
            part.violations = int(np.count_nonzero(copies > 1))
        if not self.has_span and part.lo is not None:
            part.overflow = True  # message rows of a run without a span: not usable
        return part


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
                lo, hi = self.spans[run]
                if p.lo < lo or p.hi is None or p.hi > hi:
                    return False
        # each run's span is its groups' span (as the decision table would give it)
        seen: dict[str, tuple[int, int]] = {}
        for (run, _, _), p in parts.items():
            if p.lo is not None and p.hi is not None:
                lo, hi = seen.get(run, (p.lo, p.hi))
                seen[run] = (min(lo, p.lo), max(hi, p.hi))
        return seen == self.spans

    def tables(self, spark: SparkSession) -> tuple[DataFrame, DataFrame, DataFrame]:
        """(cells, joint, violations) as ``_fast_metrics`` reads them (built from Arrow
        tables on the driver: no Python worker reads them back)."""
        parts = self.accumulator.value
        cells = [(run, receiver, cls, t, *(c[i] for i in _CELL_FIELDS))
                 for (run, receiver, cls), p in sorted(parts.items(), key=_order)
                 for t, c in sorted(p.cells.items())]
        joint: Counter[tuple[str, int, str | None]] = Counter()
        violations: dict[str, int] = {}
        for (run, _, _), p in parts.items():
            for lifetime, verdict, number in p.joint:
                joint[(run, lifetime, verdict)] += number
            if p.accepted:
                violations[run] = violations.get(run, 0) + p.violations
        counts = [(*k, v) for k, v in sorted(joint.items(), key=_order)]
        return (_frame(spark, CELL_SCHEMA, cells), _frame(spark, JOINT_SCHEMA, counts),
                _frame(spark, TWICE_SCHEMA, sorted(violations.items())))


_CELL_FIELDS = (N, ORIGINALS, LOST, ACCEPTED, ENTRIES_MAX, ENTRIES_SUM, ENTRIES_N,
                SIZE_LAST, SIZE_RHO, RHO_SEQ, RHO_LAST)
CELL_SCHEMA = pa.schema(
    [("run", pa.string()), ("receiver", pa.string()), ("cls", pa.int64()),
     ("t", pa.int64()), ("n", pa.int64()), ("originals", pa.int64()), ("lost", pa.int64()),
     ("accepted", pa.int64()), ("entries_max", pa.int64()), ("entries_sum", pa.float64()),
     ("entries_n", pa.int64()), ("size_last", pa.int64()), ("size_rho", pa.int64()),
     ("rho_seq", pa.int64()), ("rho_last", pa.int64())])
JOINT_SCHEMA = pa.schema([("run", pa.string()), ("lifetime", pa.int64()),
                          ("verdict", pa.string()), ("count", pa.int64())])
TWICE_SCHEMA = pa.schema([("run", pa.string()), ("at_most_once_violations", pa.int64())])


def _frame(spark: SparkSession, schema: pa.Schema, rows: list[tuple[Any, ...]]) -> DataFrame:
    columns: list[list[Any]] = [[row[i] for row in rows] for i in range(len(schema))]
    table = pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(columns, schema)],
                                 schema=schema)
    return spark.createDataFrame(table)


def _order(item: tuple[Any, Any]) -> tuple[str, ...]:
    return tuple(str(x) for x in item[0])
