"""``timebound.spark``: the protocols as DataFrame operators (docs/spark.md).

``at_most_once(df, conn=..., ts=..., at=...)`` deduplicates any DataFrame, batch or
streaming, under the caller's column names: every input row comes back with all its
columns plus ``verdict``, ``rho`` and ``entries`` (and ``late_arrival`` on a stream),
the verdicts ``timebound replay atmostonce`` gives those rows taken in ``at`` order
per receiver. A batch DataFrame goes through the decider ``timebound pipeline`` runs
(``_batch``, over ``traces``' ``Decider``), a stream through the grouped engine
(``_stream``: ``applyInPandasWithState``, the key's receiver in its state), which
``timebound stream atmostonce`` runs through ``trace_verdicts``; both decide
column-wise through the shared row adapter (``timebound.columnar``), so no protocol
rule lives here. Options and columns are checked on the driver before any job
(``_check``).

``compare(df, conn=..., ts=..., at=...)`` runs ``at_most_once`` (fixed and adaptive
lifetimes) beside Spark's ``dropDuplicatesWithinWatermark`` on the caller's arrivals
and returns what each did, counted from the rows (``_compare``).

``typed_errors()`` turns the error a bad row raises inside a Spark job back into the
``TimeboundError`` it is (Spark wraps it in its own exception).

``timebound.spark.traces`` holds the operators over the trace-dataset tables that
``timebound pipeline`` and ``timebound stream`` run: the commands are its clients.

Layer: below ``pipeline`` and ``stream`` (they call it), above the shared adapters and
cores (tests/test_layers.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from timebound.errors import MissingExtra, SchemaError, UsageError
from timebound.sparkutil import translate_errors as typed_errors

try:
    import pyspark  # noqa: F401
except ImportError:  # pragma: no cover - the extra is missing
    raise MissingExtra("timebound.spark", "spark", "pyspark") from None

from timebound.spark._check import columns, locked, options

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable, Sequence

    import pandas as pd
    from pyspark.sql import DataFrame

    from timebound.adapters.atmostonce import AtMostOnceOptions

__all__ = ["SchemaError", "UsageError", "at_most_once", "causal_merge", "causal_stamp",
           "compare", "slotted", "stability", "typed_errors"]


def at_most_once(
    df: DataFrame,
    *,
    conn: str,
    ts: str,
    at: str,
    receiver: str | None = None,
    order: str | None = None,
    down: str | None = None,
    estimator: str = "fixed",
    rho: int | None = None,
    gc_every: int | None = None,
    window: int | None = None,
    spikes: int | None = None,
    p: int | None = None,
    resilient: bool = False,
    beta: int | None = None,
    latest_every: int | None = None,
    recovery_grace: int = 0,
    classes: int = 1,
    reorder_window: int = 8,
) -> DataFrame:
    """SCMP at-most-once verdicts for the rows of ``df`` (docs/spark.md).

    ``conn``: the connection id column (string or integer); ``ts``: the sender's
    timestamp, ``at``: the receiver's clock when the row arrived (integer ticks, ``ts``
    >= 1, ``at`` >= 0). ``receiver``: one independent receiver per value of this column
    (string or integer; default: one receiver for every row). Each receiver takes its
    rows in ``at`` order; rows with equal ``at`` by ``order`` (nulls first), then
    ``ts``, then ``conn`` (as a string), then Spark's ``xxhash64`` of the row's columns.
    ``down``: an integer column of crashes (resilient receivers): a row where it is set
    is a crash of its receiver at ``at``, down for ``down`` ticks (>= 1; its ``conn``
    and ``ts`` are not read), as the replay's ``crash`` rows; messages it receives
    while down are ``down``. The other options are ``timebound replay atmostonce``'s,
    with its ranges: ``estimator`` ``fixed`` (``rho``, ``gc_every``), ``unlimited``
    (``gc_every``) or ``limited`` (``window``, ``spikes``, ``p``); ``resilient`` with
    ``beta`` and ``latest_every`` (and ``recovery_grace``); ``classes``: hash classes per receiver;
    ``reorder_window``: timestamps kept per connection (default 8: a message overtaken
    by up to 8 later ones of its connection is accepted; 1: SCMP's rule, the commands'
    default, so ``--reorder-window 8`` gives the replay this default's verdicts).

    Returns every row of ``df`` with all its columns plus ``verdict`` (``accepted``,
    ``duplicate``, ``stale``, ``early``; ``down``; null on a crash row), ``rho`` and
    ``entries`` (longs; null on a crash row and while down), and on a streaming
    ``df`` ``late_arrival`` (the row's ``at`` was behind its receiver's
    clock: decided at that clock). Raises ``UsageError`` (an option) or ``SchemaError``
    (a column: missing, of a wrong type, or one the operator adds already present)
    before any Spark job.
    """
    opts = options({"estimator": estimator, "rho": rho, "gc_every": gc_every,
                    "window": window, "spikes": spikes, "p": p, "resilient": resilient,
                    "beta": beta, "latest_every": latest_every,
                    "recovery_grace": recovery_grace, "classes": classes,
                    "reorder_window": reorder_window})
    cols = columns(df.schema, conn, ts, at, receiver, order, down)
    if df.isStreaming:
        from timebound.spark import _stream

        return _stream.decide(df, cols, opts, locked(opts, cols, df.schema))
    from timebound.spark import _batch

    return _batch.decide(df, cols, opts)


def trace_verdicts(messages: DataFrame, options: AtMostOnceOptions) -> DataFrame:
    """``at_most_once``'s stream engine over a stream of ``messages`` trace rows (the
    trace-dataset contract's columns and the file source's ``_file``, ``_line``): what
    ``timebound stream atmostonce`` runs. Its own reading of trace rows: one receiver
    per (run, receiver), crash rows by ``type``, rows with equal ``at`` by ``seq`` (rows
    without one after, by file, then line), every row checked as the replay checks it
    and a bad one named by its file and line; the message rows come back with the
    verdict table's columns (``timebound.spark.traces.STREAM_VERDICTS``)."""
    from timebound.spark._stream import trace_verdicts as run

    return run(messages, options)


def causal_merge(
    df: DataFrame,
    *,
    merger: str,
    msg: str,
    proc: str,
    at: str,
    r: str,
    c: str,
    kn: str | None = None,
    epsilon: int,
    delta: int,
    variant: str = "rckn",
    order: str | None = None,
    timers: str = "processing",
    tick: str = "1ms",
) -> DataFrame:
    """Causal deterministic merge of the arrivals in ``df`` (batch or streaming;
    docs/spark.md), as ``timebound replay merge`` merges them.

    Each row is an arrival of message ``msg`` of process ``proc`` (string or integer
    columns) at merger ``merger`` (one independent merger per value) at the merger's
    clock ``at``, with its timestamp ``r``, ``c`` (integer columns) and, for the
    variant ``rckn``, ``kn`` (an array of 2 * ``epsilon`` integers; none for ``rc``).
    Each merger takes its rows in ``at`` order; rows with equal ``at`` by ``order``
    (nulls first), then ``proc``, ``msg``, ``r``, ``c``, then Spark's ``xxhash64`` of
    the row's columns. Options as the replay's: ``epsilon`` >= 1, ``delta`` >= 0.

    Returns every row of ``df`` with all its columns plus ``action`` (``deliver``,
    ``late``, ``duplicate``), ``time`` (a delivery's deadline ``r + c + delta +
    epsilon``; the arrival's ``at`` otherwise) and ``position`` (the row's place in its
    merger's output, from 0): ``where action = 'deliver'`` ordered by ``position`` is
    the merger's deterministic order.

    On a streaming ``df`` each row comes out once its fate is known (a buffered arrival
    when it is delivered) with ``late_arrival`` too, and ``timers`` says what moves a
    merger's clock between arrivals: ``"processing"`` (default) Spark's processing-time
    timers, ``tick`` being the wall-clock length of one ``at`` tick (``"1ms"``,
    ``"250us"``, ``"1s"``), so a buffered message is delivered once its deadline has
    passed even when no new arrival comes; ``"none"``: only arrivals move it (the batch
    operator's rows, minus those still buffered). The stream runs as
    ``transformWithStateInPandas`` on the RocksDB state store. Raises ``UsageError``
    (an option) or ``SchemaError`` (a column) before any Spark job.
    """
    from timebound.adapters.merge import MergeOptions
    from timebound.spark import _groups, _merge
    from timebound.spark._check import keyword

    try:
        opts = MergeOptions.from_values({"epsilon": epsilon, "delta": delta,
                                         "variant": variant})
    except UsageError as exc:
        raise UsageError(keyword(exc.option), keyword(exc.reason)) from None
    roles = _merge.roles(merger, msg, proc, at, r, c, kn, order, opts.variant)
    if df.isStreaming:
        from timebound.spark import _merge_stream

        mode, tick_us = _merge_stream.timer_options(timers, tick)
        _groups.check_columns(df.schema, "causal_merge", roles,
                              (*_merge.ADDED, "late_arrival"))
        return _merge_stream.merge(df, opts, roles, mode, tick_us)
    _merge_stream_options(timers, tick)
    _groups.check_columns(df.schema, "causal_merge", roles, _merge.ADDED)
    return _groups.run(df, _merge.operator(opts, roles), merger)


def _merge_stream_options(timers: object, tick: object) -> None:
    """``timers`` and ``tick`` are checked on a batch ``df`` too (they are not used)."""
    from timebound.spark._merge_stream import timer_options

    timer_options(timers, tick)


def stability(
    df: DataFrame,
    *,
    type: str,  # noqa: A002 - the replay's field name
    node: str,
    at: str,
    ts: str,
    origin: str,
    ack: str,
    senders: str | Sequence[str],
    receivers: str | Sequence[str],
    acks: str = "timestamp",
    group: str | None = None,
    order: str | None = None,
) -> DataFrame:
    """Message stability by timestamp (or vector) acknowledgments for the rows of
    ``df`` (a batch DataFrame; docs/spark.md), as ``timebound replay stability``.

    Each row is an event at ``node`` at time ``at`` (integer), of ``type`` (a string
    column: ``send``, ``recv``, ``ack``, ``ackrecv``): a ``send`` of timestamp ``ts``;
    a ``recv`` of ``origin``'s message ``ts``; an ``ack`` sent under the id ``ack``; an
    ``ackrecv`` of the ack ``ack``. ``node``, ``origin`` and ``ack``: string or integer
    columns. ``senders``, ``receivers``: the node names (a list, or one comma-separated
    string), as the replay's options; ``acks``: ``timestamp`` or ``vector``. ``group``:
    one independent execution per value of this column (default: one). An execution
    takes its rows in ``at`` order; rows with equal ``at`` by ``order`` (nulls first),
    then type (``send``, ``recv``, ``ack``, ``ackrecv``), ``node``, ``ts``, ``origin``,
    ``ack``, then Spark's ``xxhash64`` of the row's columns.

    Returns every row of ``df`` with all its columns plus ``delivered`` (boolean, on
    ``recv`` rows), ``value`` (on ``ack`` rows: a long, or with ``acks="vector"`` a
    map sender -> ts) and ``stable`` (array of longs, on ``ackrecv`` rows and ``ack``
    rows of a node that is also a sender). Raises ``UsageError`` (an option, or a
    streaming ``df``) or ``SchemaError`` (a column) before any Spark job.
    """
    from timebound.spark import _groups, _stability

    _groups.refuse_stream(df, "stability")
    opts = _stability.options(acks, senders, receivers)
    roles = _stability.roles(type, node, at, ts, origin, ack, order)
    if group is not None:
        roles += (_groups.Role("group", group, "id"),)
    _groups.check_columns(df.schema, "stability", roles, _stability.ADDED)
    return _groups.run(df, _stability.operator(opts, roles), group)


def causal_stamp(
    df: DataFrame,
    *,
    type: str,  # noqa: A002 - the replay's field name
    proc: str,
    rt: str,
    msg: str,
    order: str,
    epsilon: int,
    variant: str = "rckn",
    n: int | None = None,
    group: str | None = None,
) -> DataFrame:
    """Bounded logical timestamps for the events of ``df`` (a batch DataFrame;
    docs/spark.md), as ``timebound replay causal`` stamps them.

    Each row is an event of ``type`` (a string column: ``local``, ``send``, ``recv``)
    at process ``proc`` whose clock read ``rt`` (integer, >= 1, increasing per process),
    with the message ``msg`` on ``send`` and ``recv`` rows (``proc``, ``msg``: string or
    integer columns). ``order``: a column giving a causally consistent order of the
    events (every ``recv`` after the ``send`` of its message; ties by ``rt``, then
    ``send``, ``recv``, ``local``, ``proc``, ``msg``, then the row hash). ``group``: one
    independent execution per value (default: one). Options as the replay's:
    ``epsilon`` >= 1, ``variant`` ``rckn`` or ``rc``, ``n`` (rckn only).

    Returns every row of ``df`` with all its columns plus ``r`` and ``c`` (longs) and,
    for ``rckn``, ``kn`` (2 * ``epsilon`` longs). Raises ``UsageError`` (an option, or a
    streaming ``df``) or ``SchemaError`` (a column) before any Spark job.
    """
    from timebound.spark import _groups, _stamp

    _groups.refuse_stream(df, "causal_stamp")
    opts = _stamp.options(epsilon, variant, n)
    roles = _stamp.roles(type, proc, rt, msg, order)
    if group is not None:
        roles += (_groups.Role("group", group, "id"),)
    added = tuple(field.name for field in _stamp.added_fields(opts.variant))
    _groups.check_columns(df.schema, "causal_stamp", roles, added)
    return _groups.run(df, _stamp.operator(opts, roles), group)


def slotted(
    df: DataFrame,
    *,
    type: str,  # noqa: A002 - the replay's field name
    id: str,  # noqa: A002 - the replay's field name
    kind: str,
    order: str,
    group: str | None = None,
) -> DataFrame:
    """The receiver of a slotted-FIFO channel for the rows of ``df`` (a batch
    DataFrame; docs/spark.md), as ``timebound replay slotted`` acts.

    Each row is a ``send`` of message ``id`` with its ``kind`` (``FR``, ``R``, ``F``,
    ``N``; a string column, null on arrive rows) or its ``arrive`` at the receiver
    (``type``: a string column; ``id``: string or integer). ``order``: a column giving
    the order the events happened in (sends in send order, arrivals in the order the
    transport handed them over, each after its send; ties: ``send`` first, then ``id``,
    then the row hash). ``group``: one independent channel per value (default: one).

    Returns every row of ``df`` with all its columns plus ``action`` (``deliver`` or
    ``discard``) and ``position`` (the action's place in the channel's output, from 0)
    on the ``arrive`` row of each message the receiver acted on; nulls on ``send`` rows
    and on arrivals still buffered at the end. Raises ``UsageError`` (a streaming
    ``df``) or ``SchemaError`` (a column) before any Spark job.
    """
    from timebound.spark import _groups, _slotted

    _groups.refuse_stream(df, "slotted")
    roles = _slotted.roles(type, id, kind, order)
    if group is not None:
        roles += (_groups.Role("group", group, "id"),)
    _groups.check_columns(df.schema, "slotted", roles, _slotted.ADDED)
    return _groups.run(df, _slotted.operator(roles), group)


def compare(
    df: DataFrame,
    *,
    conn: str,
    ts: str,
    at: str,
    msg: str | None = None,
    receiver: str | None = None,
    rhos: Sequence[int] | None = None,
    reorder_windows: Sequence[int] | None = None,
    watermarks: Sequence[int] | None = None,
    micro_batches: int | None = None,
    progress: Callable[[str], None] | None = None,
    report: str | None = None,
) -> pd.DataFrame:
    """What ``at_most_once`` and Spark's ``dropDuplicatesWithinWatermark`` each do to
    the arrivals in ``df`` (a batch DataFrame), side by side (docs/spark.md, "Which
    one, on your data").

    ``conn``, ``ts``, ``at``, ``receiver``: as ``at_most_once``'s (checked alike).
    ``msg``: a string or integer column naming each message (default: ``conn`` and
    ``ts``). A message is one ``msg`` (per receiver, with ``receiver``); its first
    arrival is genuine, every later one a copy.

    Runs, on Spark: ``at_most_once`` at every ``rho`` in ``rhos`` and every
    ``reorder_window`` in ``reorder_windows`` (``gc_every`` rho / 4, rounded up); the
    adaptive estimators, ``estimator="unlimited"`` (``gc_every`` the 99th percentile
    delay / 4, rounded up) and ``"limited"`` (``window`` S: 1000, or a tenth of the
    rows if fewer; ``spikes`` S / 100; ``p`` 100), at every ``reorder_window``; Spark's ``withWatermark(...).dropDuplicatesWithinWatermark``
    keyed on the message, replayed as a stream in arrival order (Spark's Parquet file
    source, ``micro_batches`` files of consecutive rows in arrival order, one per
    trigger, collected by ``foreachBatch``; default ``rows // 500`` between 4 and 40), at every watermark in
    ``watermarks``, on the arrival time ``at`` and on the sender's time ``ts`` (1 tick
    = 1 ms of event time). Arrival order: ``at``, then ``ts``, ``conn``, ``receiver``.

    Defaults, from the delays ``at - ts`` of the rows: ``rhos`` and ``watermarks`` the
    50th and 99th percentiles (the nearest delay at or above) and the maximum, each at
    least 1; ``reorder_windows`` ``[8]``, the operator's default.

    Returns a pandas DataFrame, one row per method and setting: ``method``
    (``at_most_once``, ``adaptive_unlimited``, ``adaptive_limited``,
    ``watermark_on_arrival``, ``watermark_on_send``), ``setting`` (the rho or the
    watermark in ticks; null for the adaptive ones), ``reorder_window`` (null for the
    watermarks), ``kept`` (rows let through: accepted, or output by Spark),
    ``copies_let_through`` (rows kept beyond one per message), ``genuine_lost``
    (messages none of whose rows was kept), ``state_max`` (``at_most_once``: the most
    ``entries`` the receivers held together within one tick; the watermark: the most
    state rows Spark's ``stateOperators.numRowsTotal`` reported after a micro-batch),
    ``rho_final`` (the adaptive estimate on each receiver's last row, the largest over
    receivers; null otherwise) and ``seconds`` (the run's wall time). Every count is
    computed from the rows each method kept. ``attrs`` holds ``rows``, ``messages``,
    ``copies``, ``micro_batches``, ``gc_every_adaptive``, ``limited`` (the limited
    horizon's options), ``delays`` (``at`` and ``at - ts`` of up to 2,000 rows evenly
    spread in arrival order) and ``estimates`` (per adaptive method, ``at`` and the
    estimate ``rho`` on the same rows). ``progress``: called with one line before each
    run. ``report``: also write the table's HTML page there (a ``.html`` file, replaced
    whole; what ``timebound compare --out`` writes; needs ``timebound[report]``),
    checked before any run.

    The role columns are gathered on the driver and written to a private temporary
    folder (removed on every exit path) that every run reads. Raises ``UsageError`` (a
    keyword) or ``SchemaError`` (a column: missing, of a wrong type, with a null, an
    empty ``conn``, ``msg`` or ``receiver``, ``ts < 1`` or ``at < 0``), naming it.
    """
    from timebound.spark._compare import compare as run

    if report is not None:
        from timebound._safety import check_writable, require_extra

        require_extra("report", "matplotlib", "compare(report=...)")
        if not isinstance(report, str) or not report.lower().endswith(".html"):
            raise UsageError("report", f"expected a path to a .html file, got {report!r}")
        check_writable(report, "report")
    table = run(df, conn=conn, ts=ts, at=at, msg=msg, receiver=receiver, rhos=rhos,
                reorder_windows=reorder_windows, watermarks=watermarks,
                micro_batches=micro_batches, progress=progress)
    if report is not None:
        from timebound.report.compare import write_compare_report

        write_compare_report(table, report)
    return table
