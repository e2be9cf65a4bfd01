"""Batch at-most-once: SCMP receivers per (run, receiver, hash class) inside Spark.

Groups are ``(run, receiver, cls)`` with ``cls = crc32(utf-8 conn) mod K`` (K: the run's
``--classes``, default 1) -- the replay's classes, so one receiver too large for a task
spreads over K tasks. Spark's SQL ``crc32`` (java.util.zip.CRC32 over the UTF-8 bytes)
is the same function as ``timebound.core.atmostonce.crc32_class``; every group checks
that on each of its rows, so a disagreement could never pass silently
(tests/test_pipeline_atmostonce.py pins it on non-ASCII ids). A crash row is copied to
every class of its receiver, as the replay's ``ClassifiedReceiver`` applies a crash to
every class. Each group runs the shared ``AtMostOnceAdapter`` (with the run's
K, so the row is routed by the core's classifier) over its rows sorted by ``seq``.

``at`` never decreasing per receiver is verified inside each group; with K > 1 the
groups only see their own class, so a window over (run, receiver) ordered by ``seq``
checks the whole receiver first (``check_time_order``), naming the first bad row.

When the survey can spread whole receivers evenly over the partitions
(``_placement``), there is no class column and no copy of a crash row per class: each
partition holds whole receivers, and each run's rows there go to one replayer of the
run (every receiver, every class, crash rows once: exactly ``timebound replay``), which
checks ``at`` per receiver across classes itself; each decision row's ``cls`` is the
core classifier's class of its ``conn``, as a per-class group would have it. The
metrics partials are still kept per (run, receiver, cls). When the survey saw only
plain messages (``type`` msg, no ``down``), those two columns stay in the JVM
(``Names.plain``). Placed receivers are decided by an iterator Arrow UDF, not
``mapInArrow``: only the columns the receivers read go to the Python workers, only the
decision columns come back, and the JVM joins them to the rows it kept
(``_evaluated``).

``timebound pipeline`` runs ``operate`` (``traces.decide_messages``); the library's
``at_most_once`` on a batch DataFrame builds on ``Decider``, ``answered`` and
``VERDICTS`` (verdict names by code).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import ArrowUDFType, arrow_udf
from pyspark.sql.types import ByteType, IntegerType, LongType, StructField, StructType

from timebound.adapters import ATMOSTONCE
from timebound.adapters.atmostonce import AtMostOnceOptions
from timebound.columnar import NAMES
from timebound.errors import TimeboundError, TraceError
from timebound.spark.traces import _columnar, _group
from timebound.spark.traces._group import arrow_schema as arrow_schema
from timebound.spark.traces._partial_metrics import Gathered, Gatherer
from timebound.spark.traces._placement import Survey, label_column, place, survey
from timebound.spark.traces.schemas import DECISION_EXTRA
from timebound.sparkutil import marked, with_hash_class

#: Verdict names by verdict code (the core loop's codes).
VERDICTS = NAMES

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

TABLE = "messages"
#: How the operator runs in Spark, for benchmark output (with ``timebound.columnar.path()``).
ENGINE = ("whole receivers evenly placed: an iterator Arrow UDF over partitions in "
          "seq order (only the columns the receivers read go to Python, only the "
          "decisions come back), one replayer per run, type/down/run left in the JVM "
          "when the survey allows, sorted in the worker up to 2,000,000 rows a "
          "partition; else mapInArrow over receiver classes sorted by the JVM")
#: A partition of placed receivers up to this many rows (the survey counts them) is
#: sorted by ``seq`` in its Python worker, in numpy, holding the columns the receivers
#: read in memory (a few hundred MB at most; the JVM's queue of the rows waiting for
#: their decisions spills to disk when it must); a larger one is sorted by the JVM.
SORT_IN_WORKER_ROWS = 2_000_000
#: Rows per record batch handed on after a sort in the worker (the session's
#: ``spark.sql.execution.arrow.maxRecordsPerBatch``).
_BATCH_ROWS = 100_000


def _loads(labels: Mapping[Any, int], rows: Mapping[Any, int]) -> dict[int, int]:
    """Rows per partition label of the placed receivers."""
    loads: dict[int, int] = {}
    for receiver, label in labels.items():
        loads[label] = loads.get(label, 0) + rows.get(receiver, 0)
    return loads or {0: 0}


def _seq_order(table: pa.Table) -> np.ndarray | None:
    """The row order of ``table`` by ``seq`` (nulls last, ties in row order); None
    when the rows are in that order already."""
    seq = table.column("seq")
    if seq.null_count == 0 and _ascending(seq.to_numpy()):
        return None
    return np.lexsort((seq.fill_null(0).to_numpy(), seq.is_null().to_numpy()))


def _ascending(values: np.ndarray) -> bool:
    return bool(len(values) < 2 or np.all(values[1:] >= values[:-1]))


def _classes(options: AtMostOnceOptions) -> int:
    return options.classes


def with_classes(df: DataFrame, options: Mapping[str, AtMostOnceOptions]) -> DataFrame:
    """Add ``cls``; crash rows go to every class of their run's K (``with_hash_class``)."""
    pairs: list[Any] = []
    for run, opts in options.items():
        pairs += [F.lit(run), F.lit(_classes(opts))]
    k = F.element_at(F.create_map(*pairs), F.col("run")) if pairs else F.lit(1)
    return with_hash_class(df, "cls", F.col("conn"), k, F.col("type") == "crash")


def check_time_order(df: DataFrame) -> None:
    """Per (run, receiver), ``at`` never decreases in ``seq`` order (raises TraceError)."""
    window = Window.partitionBy("run", "receiver").orderBy("seq")
    bad = (df.select("run", "receiver", "seq", "at", F.lag("at").over(window).alias("prev"))
           .where(F.col("at") < F.col("prev")).orderBy("run", "seq").limit(1).collect())
    if bad:
        row = bad[0]
        raise TraceError(f"{TABLE}[run {row['run']!r}]", int(row["seq"]), "at",
                         f"goes back in time for receiver {row['receiver']!r} "
                         f"({row['at']} < {row['prev']})")


def first_time_error(df: DataFrame, options: Mapping[str, AtMostOnceOptions]) -> None:
    """``check_time_order`` over the runs with classes: after the operator failed, the
    error to report when ``at`` goes back somewhere, whatever task failed first. The
    per-receiver plan checks the rule as it decides, so with several bad rows the
    first task to fail would otherwise choose; the per-class plan runs this first."""
    classed = sorted(run for run, opts in options.items() if _classes(opts) > 1)
    if classed:
        check_time_order(df.where(F.col("run").isin(classed)))


def operate(df: DataFrame, options: Mapping[str, AtMostOnceOptions], *,
            gather: Gathered | None = None, by_receiver: bool | None = None,
            surveyed: Survey | None = None) -> DataFrame:
    """Decision table of ``messages``: input columns + verdict, rho, entries, cls.

    With ``gather``, each group also sums its share of the at-most-once measures into
    its accumulator as the table is computed (``_partial_metrics``; this sets its
    spans). ``by_receiver``: send each whole receiver to one task (True), each
    receiver class (False), or per receiver when that keeps the cores evenly busy
    (None, ``_placement``); per receiver, the trace rule across classes is checked as
    the rows are decided instead of by ``check_time_order`` first. ``surveyed``: the
    input's ``_placement.survey`` if the caller has it (else read here when needed)."""
    schema = _group.out_schema(df.schema, DECISION_EXTRA[TABLE])
    classed = sorted(run for run, opts in options.items() if _classes(opts) > 1)
    found = surveyed
    if found is None and (classed or gather is not None):
        found = survey(df)
    if gather is not None and found is not None:
        gather.spans.update(found.spans)
    labels = None
    if classed and found is not None and by_receiver is not False:
        spark = df.sparkSession
        partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or 1)
        labels = place(found.rows, partitions, spark.sparkContext.defaultParallelism,
                       force=bool(by_receiver))
    if classed and labels is None:
        check_time_order(df.where(F.col("run").isin(classed)))

    plan = {run: (ATMOSTONCE, opts, _classes(opts)) for run, opts in options.items()}
    accumulator, spans = (gather.accumulator, gather.spans) if gather else (None, {})
    # Placed receivers are whole in their partition: one replayer per run decides
    # them, every class, with no ``cls`` column and no crash row copied per class;
    # and when every row is a plain message, ``type`` and ``down`` stay in the JVM.
    whole = labels is not None and found is not None
    plain = (whole and found is not None and found.others == 0
             and all(c in df.columns for c in PLAIN_COLUMNS))
    names = None if found is None else Names.of(options, found, plain, whole)
    # Placed partitions small enough are sorted by the worker (numpy), else by the JVM.
    in_worker = (whole and found is not None and labels is not None
                 and max(_loads(labels, found.rows).values()) <= SORT_IN_WORKER_ROWS)

    # The JVM hash-partitions by group (or places whole receivers) and each partition
    # is sorted by ``seq`` alone (by the JVM: one long key, a radix sort on its prefix;
    # or, for a small enough partition of placed receivers, by the worker:
    # ``answered``): every group's rows arrive in trace order, in record batches, with
    # no grouped-map materialization (``Decider`` keeps each group's replayer across
    # batches). With ``names``, run and receiver cross as integer codes (``Names``);
    # placed receivers go where their label hashes (computed in the shuffle).
    classes = df if whole else with_classes(df, options)
    if names is not None:
        classes = names.encode(classes)
    if labels is None or names is None:
        spread = classes.repartition("run", "receiver", "cls")
    else:
        spread = classes.repartition(partitions, label_column(
            labels, names.codes["run"], names.codes["receiver"]))
    if names is not None and names.only_run is not None:
        spread = spread.drop("run")  # placed by it; the JVM puts it back (``decode``)
    ordered = spread if in_worker else spread.sortWithinPartitions(F.asc_nulls_last("seq"))
    if whole and names is not None:
        return names.decode(_evaluated(ordered, schema, plan, names, accumulator, spans,
                                       in_worker), schema)

    # Receiver classes: every column crosses (``mapInArrow``), each (run, receiver,
    # cls) group decided by ``_stream``.
    crossing = arrow_schema(schema if names is None else names.crossing(schema))

    def decide(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        gatherer = None if accumulator is None else Gatherer(accumulator, spans)
        try:
            yield from _stream(batches, plan, crossing, gatherer, names)
        except TimeboundError as exc:
            raise marked(exc) from None

    if names is None:
        return ordered.mapInArrow(decide, schema)
    return names.decode(ordered.mapInArrow(decide, names.coded(schema)), schema)


#: The decision columns the workers send back for placed receivers (``_evaluated``).
_DECISION = ("verdict", "rho", "entries", "cls")
#: The input columns a receiver reads (and ``original`` for the metrics partials).
_READ = ("run", "seq", "type", "receiver", "conn", "ts", "at", "down")


def _evaluated(ordered: DataFrame, schema: StructType, plan: Mapping[str, Any],
               names: Names, accumulator: Any, spans: Mapping[str, Any],
               in_worker: bool) -> DataFrame:
    """Placed receivers, decided by an iterator Arrow UDF (``ArrowEvalPython``): only
    the columns the receivers read cross to the workers, only the four decision
    columns come back, and the JVM keeps every other column of each row and puts the
    two together, so ``conn``, ``original`` and the options make no round trip
    through Python (each column that crosses costs about as much as the decisions of
    a small one). The workers answer row for row in the order the rows came (a row
    with no decision row gets verdict code -1, and the JVM drops it); a partition
    sorted in the worker is decided in ``seq`` order and answered in arrival order.
    ``ordered`` has ``names``' codes; so has the result (``Names.decode``)."""
    read = [c for c in ordered.columns
            if c in _READ or (accumulator is not None and c == "original")]
    decided = _group.arrow_schema(StructType(
        [schema[c] for c in read] + [StructField("_row", LongType(), True)]
        + [schema[c] for c in _DECISION]))
    coded = names.coded(schema)
    returned = StructType([coded[c] for c in _DECISION])

    def decide(arrays: Iterator[tuple[pa.Array, ...]]) -> Iterator[pa.Array]:
        gatherer = None if accumulator is None else Gatherer(accumulator, spans)
        decider = Decider(plan, decided, gatherer, names, whole=True)
        try:
            batches = (pa.RecordBatch.from_arrays(list(a), names=read) for a in arrays)
            yield from answered(batches, decider, in_worker)
        except TimeboundError as exc:
            raise marked(exc) from None
        decider.close()

    # Nondeterministic: the optimizer must neither move it (e.g. the filter below
    # through the shuffle) nor evaluate it twice; it decides where it stands.
    with warnings.catch_warnings():  # "type hints are preferred": these are the same
        warnings.simplefilter("ignore", UserWarning)
        udf = arrow_udf(decide, returnType=returned.simpleString(),
                        functionType=ArrowUDFType.SCALAR_ITER).asNondeterministic()
    kept = [c for c in ordered.columns if c not in _DECISION]
    out = ordered.select(*kept, udf(*read).alias("_decision"))
    return (out.where(F.col("_decision.verdict") >= 0)
            .select(*kept, *[F.col(f"_decision.{c}").alias(c) for c in _DECISION]))


def answered(batches: Iterator[pa.RecordBatch], decider: Decider,
              in_worker: bool) -> Iterator[pa.StructArray]:
    """Each batch's decision columns, row for row (``_evaluated``). ``in_worker``: the
    partition is held and decided in ``seq`` order, then answered batch by batch."""
    if not in_worker:
        for batch in batches:
            n = batch.num_rows
            rows = batch.append_column("_row", pa.array(np.arange(n, dtype=np.int64)))
            yield _placed([out for _, out in decider.decide(rows)], n)
        return
    held = list(batches)
    if not held:
        return
    table = pa.Table.from_batches(held)
    n = table.num_rows
    table = table.append_column("_row", pa.array(np.arange(n, dtype=np.int64)))
    order = _seq_order(table)
    if order is not None:
        table = table.take(pa.array(order))
    answer = _placed([out for batch in table.to_batches(max_chunksize=_BATCH_ROWS)
                      for _, out in decider.decide(batch)], n)
    offset = 0
    for batch in held:
        yield answer.slice(offset, batch.num_rows)
        offset += batch.num_rows


def _placed(outs: list[pa.Table], n: int) -> pa.StructArray:
    """The decision columns of ``outs`` at the rows their ``_row`` names, for ``n``
    rows; a row with no decision row gets verdict code -1."""
    where = np.full(n, -1, dtype=np.int64)
    if outs:
        table = pa.concat_tables(outs)
        where[table.column("_row").to_numpy()] = np.arange(table.num_rows)
        columns = [table.column(c).combine_chunks() for c in _DECISION]
        columns[0] = pc.index_in(columns[0], value_set=_VERDICT_ARRAY).cast(pa.int8())
    else:
        columns = [pa.array([], pa.int8()), *[pa.array([], pa.int64())] * 3]
    index = pa.array(where, mask=where < 0)
    verdict, *rest = [pc.take(c, index) for c in columns]
    return pa.StructArray.from_arrays([verdict.fill_null(-1), *rest], names=list(_DECISION))


class Names:
    """The values of ``run`` and ``receiver`` by integer code, when the survey has seen
    them all: the JVM encodes both columns before the shuffle (an int costs the
    shuffle and the Arrow round trip less than a string), each Python worker decodes
    its batches (and, per receiver class, encodes its output: ``_stream``; placed
    receivers send back only their decisions: ``_evaluated``), and the JVM decodes the result,
    so the decision table is the same. A value the survey did not see (the input
    changed during the job) is code -1, and stops the job naming its row. The
    ``verdict`` column leaves the workers the same way, as its index in ``Verdict``.

    ``plain``: the survey saw only plain messages (``type`` msg, no ``down``), so
    ``type`` and ``down`` (``PLAIN_COLUMNS``) do not cross at all: the JVM puts them back
    after the workers (msg, null), and a row that is not a plain message after all gets
    receiver code -2, which stops the job naming its row (each column that crosses to
    Python costs about as much as the decisions of a small one). ``only_run``: the
    survey saw one run and no null one, so ``run`` does not cross either (a row of
    another run gets receiver code -3, which stops the job the same way)."""

    def __init__(self, values: Mapping[str, list[str]], plain: bool = False,
                 only_run: str | None = None) -> None:
        self.values = dict(values)
        self.plain = plain
        self.only_run = only_run
        self.arrays = {column: pa.array(v, pa.string()) for column, v in self.values.items()}
        self.codes = {column: {name: i for i, name in enumerate(v)}
                      for column, v in self.values.items()}

    @classmethod
    def of(cls, options: Mapping[str, AtMostOnceOptions], found: Survey,
           plain: bool = False, whole: bool = False) -> Names:
        """``plain`` and, with ``whole`` (placed receivers), ``only_run`` when the
        survey allows them."""
        runs = set(options) | {run for run, _ in found.rows if run is not None}
        receivers = {receiver for _, receiver in found.rows if receiver is not None}
        single = whole and len(runs) == 1 and all(run is not None for run, _ in found.rows)
        return cls({"run": sorted(runs), "receiver": sorted(receivers)}, plain,
                   next(iter(runs)) if single else None)

    def encode(self, df: DataFrame) -> DataFrame:
        for column, values in self.values.items():
            if values:
                lookup = F.create_map(*[item for code, value in enumerate(values)
                                        for item in (F.lit(value), F.lit(code))])
                code = F.coalesce(F.try_element_at(lookup, F.col(column)), F.lit(-1))
            else:
                code = F.lit(-1)
            if self.plain and column == "receiver":
                is_plain = (F.col("type") == "msg") & F.col("down").isNull()
                code = F.when(is_plain, code).otherwise(F.lit(_NOT_PLAIN))
            if self.only_run is not None and column == "receiver":  # run: coded above
                code = F.when(F.col("run") == self.codes["run"][self.only_run], code) \
                    .otherwise(F.lit(_OTHER_RUN))
            df = df.withColumn(column, F.when(F.col(column).isNotNull(), code.cast("int")))
        return df.drop(*PLAIN_COLUMNS) if self.plain else df

    def crossing(self, schema: StructType) -> StructType:
        """``schema`` without the columns that do not cross to the workers (``run``
        leaves after the shuffle, which places by it)."""
        return StructType([f for f in schema
                           if not (self.plain and f.name in PLAIN_COLUMNS)
                           and not (self.only_run is not None and f.name == "run")])

    def coded(self, schema: StructType) -> StructType:
        return StructType([StructField(f.name, IntegerType(), True) if f.name in self.values
                           else StructField(f.name, ByteType(), True) if f.name == "verdict"
                           else f for f in self.crossing(schema)])

    def decode(self, df: DataFrame, schema: StructType) -> DataFrame:
        def column(name: str) -> Any:
            if self.plain and name in PLAIN_COLUMNS:
                value = F.lit("msg") if name == "type" else F.lit(None)
                return value.cast(schema[name].dataType).alias(name)
            if self.only_run is not None and name == "run":
                return F.lit(self.only_run).cast(schema[name].dataType).alias(name)
            values = list(VERDICTS) if name == "verdict" else self.values.get(name)
            if values is None:
                return F.col(name)
            if not values:  # every code was null
                return F.lit(None).cast("string").alias(name)
            index = (F.col(name) + 1).cast("int")
            return F.element_at(F.array(*map(F.lit, values)), index).alias(name)
        return df.select(*[column(f.name) for f in schema])

    def decode_batch(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        columns = list(batch.columns)
        fields = list(batch.schema)
        for name, array in self.arrays.items():
            i = batch.schema.get_field_index(name)
            if i < 0:  # ``run``, left in the JVM (``only_run``)
                continue
            codes = batch.column(i)
            unseen = pc.less(codes, 0).fill_null(False)
            if pc.any(unseen).as_py():
                row = int(pc.index(unseen, True).as_py())
                run = (self.only_run if self.only_run is not None
                       else columns[batch.schema.get_field_index("run")][row].as_py())
                source = TABLE if name == "run" or run is None else f"{TABLE}[run {run!r}]"
                line = int(batch.column("seq")[row].as_py() or 0)
                if codes[row].as_py() == _OTHER_RUN:
                    raise TraceError(TABLE, line, "run", "a run not seen when the input "
                                     "was surveyed (did the input change during the job?)")
                if codes[row].as_py() == _NOT_PLAIN:
                    raise TraceError(source, line, "type", "a crash row or a down value, "
                                     "where the survey of the input saw only plain "
                                     "messages (did the input change during the job?)")
                raise TraceError(source, line, name,
                                 "a value not seen when the input was surveyed (did the "
                                 "input change during the job?)")
            columns[i], fields[i] = array.take(codes), pa.field(name, pa.string())
        return pa.RecordBatch.from_arrays(columns, schema=pa.schema(fields))

    def encode_table(self, table: pa.Table, key: tuple[Any, ...]) -> pa.Table:
        """A group's output, its run and receiver and verdicts as codes (``key``: the
        group's (run, receiver, ...) values, or a prefix of them: ``run`` first, then
        ``receiver``; a column the key leaves out is encoded row by row)."""
        if "verdict" in table.column_names:
            i = table.schema.get_field_index("verdict")
            table = table.set_column(i, pa.field("verdict", pa.int8()), pc.index_in(
                table.column(i), value_set=_VERDICT_ARRAY).cast(pa.int8()))
        for name, value in zip(_KEY, key):
            i = table.schema.get_field_index(name)
            if name in self.codes and i >= 0:
                code = None if value is None else self.codes[name][value]
                table = table.set_column(i, pa.field(name, pa.int32()),
                                         pa.array([code] * table.num_rows, pa.int32()))
        for name in list(self.codes)[len(key):]:  # not constant in the group: per row
            i = table.schema.get_field_index(name)
            table = table.set_column(i, pa.field(name, pa.int32()), pc.index_in(
                table.column(i), value_set=self.arrays[name]).cast(pa.int32()))
        return table


_KEY = ("run", "receiver", "cls")
#: Columns that do not cross to the workers when every row is a plain message.
PLAIN_COLUMNS = ("type", "down")
#: The receiver code of a row that is not a plain message, where none was surveyed.
_NOT_PLAIN = -2
#: The receiver code of a row of another run, where the survey saw only one.
_OTHER_RUN = -3
_VERDICT_ARRAY = pa.array(VERDICTS, pa.string())
#: Group codes stay below this (else they are renumbered); below _SMALL they sort as int16.
_SPAN = 1 << 40
_SMALL = 1 << 15


def _codes(column: pa.Array) -> tuple[np.ndarray, int]:
    """Integer codes of ``column`` (equal values, equal codes; null -> 0; values from 1)
    and the number of codes."""
    encoded = pc.dictionary_encode(column)
    codes: np.ndarray = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    return codes.astype(np.int64) + 1, len(encoded.dictionary) + 1


def _by_group(out: pa.Table, run: Any) -> Iterator[tuple[tuple[Any, ...], pa.Table]]:
    """A whole-receiver group's decision rows split by (receiver, cls), each part in
    ``seq`` order, keyed (run, receiver, cls) as the per-class plan keys them."""
    receivers, _ = _codes(out.column("receiver").combine_chunks())
    classes = out.column("cls").to_numpy()
    for rows in _slices(receivers * (int(classes.max(initial=0)) + 1) + classes):
        first = int(rows[0])
        key = (run, out.column("receiver")[first].as_py(), int(classes[first]))
        yield key, out.take(pa.array(rows))


def _slices(codes: np.ndarray, small: bool = False) -> list[np.ndarray]:
    """The row indexes of each distinct code, each in row order (a stable sort;
    ``small``: the codes fit an int16, which numpy sorts by radix)."""
    if len(codes) == 0:
        return []
    order = np.argsort(codes.astype(np.int16) if small else codes, kind="stable")
    ordered = codes[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    return np.split(order, starts[1:])


class Decider:
    """Decides one partition, its rows in ``seq`` order (groups may interleave), one
    batch at a time. Each (run, receiver, cls) group has its own replayer, kept from
    its first row to the end of the partition; each batch's rows of a group (in
    order) are decided by it in turn. The column-wise path checks a slice against the
    replayer's state, so a group spread over batches decides, and fails, exactly as in
    one piece. With ``names``, run and receiver arrive as codes (``Names``).

    ``whole``: the partition holds whole receivers with no ``cls`` column (no crash
    row copied per class): each run is one group, its replayer the run's own (all
    its receivers, every class, as ``timebound replay`` runs it), which checks ``at``
    per receiver across classes and batches itself; each decision row's ``cls`` is
    the core classifier's."""

    def __init__(self, plan: Mapping[str, Any], schema: pa.Schema,
                 gatherer: Gatherer | None = None, names: Names | None = None,
                 whole: bool = False) -> None:
        self.plan = plan
        self.schema = schema
        self.gatherer = gatherer
        self.names = names
        self.whole = whole
        self.groups: dict[tuple[Any, ...], tuple[Any, str, int]] = {}
        self.only_run = None if names is None else names.only_run
        self.key_names = () if self.only_run is not None else ("run",) if whole else _KEY

    def decide(self, batch: pa.RecordBatch) -> Iterator[tuple[tuple[Any, ...], pa.Table]]:
        """Each group's decision rows of ``batch`` (names decoded), with its key."""
        n = batch.num_rows
        if n == 0:
            return
        names, whole = self.names, self.whole
        if names is not None:
            batch = names.decode_batch(batch)
        if self.only_run is not None:  # one group: the whole batch
            slices: list[np.ndarray | None] = [None]
        else:
            combined, span = np.zeros(n, dtype=np.int64), 1
            for name in self.key_names:
                codes, size = _codes(batch.column(name))
                if span * size >= _SPAN:  # keep the codes small: renumber them densely
                    combined, span = np.unique(combined, return_inverse=True)[1], n
                combined, span = combined * size + codes, span * size
            slices = list(_slices(combined, small=span <= _SMALL))
        for rows in slices:
            if rows is None:
                key: tuple[Any, ...] = (self.only_run,)
            else:
                first = int(rows[0])
                key = tuple(batch.column(name)[first].as_py() for name in self.key_names)
            if key not in self.groups:
                spec, opts, k = self.plan[key[0]]
                self.groups[key] = (spec.adapter(opts), f"{TABLE}[run {key[0]!r}]", k)
            replayer, source, k = self.groups[key]
            part = batch if rows is None or len(rows) == n else batch.take(pa.array(rows))
            out = _columnar.atmostonce_group(
                replayer, source, pa.Table.from_batches([part]), None if whole else key[2],
                k, self.schema, all_messages=names is not None and names.plain)
            if self.gatherer is not None:
                for group, decided in (_by_group(out, key[0]) if whole else [(key, out)]):
                    self.gatherer.group(group).add(decided)
            yield key, out

    def close(self) -> None:
        """The partition is whole: its groups' metrics partials are final."""
        if self.gatherer is not None:
            self.gatherer.send()


def _stream(batches: Iterator[pa.RecordBatch], plan: Mapping[str, Any],
            schema: pa.Schema, gatherer: Gatherer | None = None,
            names: Names | None = None, whole: bool = False) -> Iterator[pa.RecordBatch]:
    """``Decider`` over a partition: its decision rows (with ``names``, run,
    receiver and verdict leave as codes)."""
    decider = Decider(plan, schema, gatherer, names, whole)
    for batch in batches:
        for key, out in decider.decide(batch):
            if names is not None:
                out = names.encode_table(out, key)
            yield from out.to_batches()
    decider.close()


OPERATOR = _group.Operator(TABLE, ATMOSTONCE, operate)
