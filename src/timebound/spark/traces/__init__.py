"""``timebound.spark.traces``: the protocols over the trace-dataset contract's tables,
as ``timebound pipeline`` (batch) and ``timebound stream`` (streaming) run them.

The commands are clients of this module and of ``timebound.spark``: they read a
dataset (or a folder of trace files), resolve each run's options and write what comes
back; every Spark operator they run lives here or there (``at_most_once`` on a batch
DataFrame decides through ``decide_messages``' decider; on a stream through the
per-key processor below, which ``timebound stream atmostonce`` runs through
``timebound.spark.trace_verdicts``).

A table follows the contract (``timebound.contract``; CONTRIBUTING.md "The
trace-dataset contract"): ``run`` and ``seq`` columns, the protocol's row columns and
its per-run option columns; ``schemas`` holds their Spark types.

Batch (a DataFrame of one input table):

- ``OPERATORS``: table -> ``Operator`` (the table, its row adapter, the option defaults
  the pipeline adds, ``operate(df, options_by_run)`` giving the decision table);
- ``run_options`` / ``typed_options``: each run's options (the table's option columns
  over the given values), validated, then typed;
- ``decide_messages(df, options, gather=..., surveyed=...)``: the ``messages`` table
  with its at-most-once measures gathered while deciding (``Gathered``,
  ``MetricRow``) after one ``survey`` of the table; ``first_time_error`` names the
  first row whose ``at`` goes back in time;
- ``BUCKETS``, ``long_form``: the measures' time buckets and long form.

Streaming (a streaming DataFrame of trace rows with the file source's provenance
columns ``FILE_COLUMN``, ``LINE_COLUMN``):

- ``stream_accepted``: the accepted messages of a verdict table (the verdicts
  themselves come from ``timebound.spark``'s stream engine, ``GROUPED``);
  ``stream_floor``: rows through that engine's Spark operator, unchanged (the
  ``floor`` side of ``timebound bench stream``);
- ``stream_merge_order``: each merger's output rows of ``arrivals`` (``TIMERS``; engine
  ``MERGE_ENGINE``, ``transformWithStateInPandas``, for a new query);
- ``source_schema``: the schema a streamed table's files are read with, and
  ``STREAM_VERDICTS`` the verdict table's;
- ``ROCKSDB``: the state store provider those queries run on.

What the library's own operators (``timebound.spark``) run of these: the batch
decider (``Decider``, ``answered``, ``VERDICTS``, ``arrow_schema``), the stream's
per-key processor (``AtMostOnceProcessor``, ``decide_rows``, ``state_value``,
``StateValue``, ``STATE_SCHEMA``, ``grouping_key``, ``frames_of``,
``prefer_exact_integers``) and the merge processor (``MergeProcessor``, ``Arrival``,
``Produced``, ``TIME_MODES``, ``MERGE_ENGINE``).

Errors raised inside a task come back typed through ``translate_errors``.
"""

from __future__ import annotations

from typing import Any

from timebound.spark.traces import schemas
from timebound.spark.traces._atmostonce import ENGINE, VERDICTS, Decider, answered, first_time_error
from timebound.spark.traces._atmostonce import OPERATOR as _MESSAGES
from timebound.spark.traces._atmostonce import operate as decide_messages
from timebound.spark.traces._causal import OPERATOR as _EVENTS
from timebound.spark.traces._group import (
    Operator,
    arrow_schema,
    run_options,
    translate_errors,
    typed_options,
)
from timebound.spark.traces._measures import BUCKETS, long_form
from timebound.spark.traces._merge import OPERATOR as _ARRIVALS
from timebound.spark.traces._partial_metrics import Gathered, MetricRow
from timebound.spark.traces._placement import Survey, survey
from timebound.spark.traces._rows import (
    FILE_COLUMN,
    LINE_COLUMN,
    ROCKSDB,
    frames_of,
    grouping_key,
)
from timebound.spark.traces._slotted import OPERATOR as _CHANNEL
from timebound.spark.traces._stability import OPERATOR as _ACKS
from timebound.spark.traces._stream_atmostonce import (
    GROUPED,
    STATE_SCHEMA,
    AtMostOnceProcessor,
    StateValue,
    decide_rows,
    prefer_exact_integers,
    state_value,
)
from timebound.spark.traces._stream_atmostonce import accepted as stream_accepted
from timebound.spark.traces._stream_atmostonce import floor as stream_floor
from timebound.spark.traces._stream_merge import COLUMNAR as MERGE_ENGINE
from timebound.spark.traces._stream_merge import (
    TIME_MODES,
    TIMERS,
    Arrival,
    MergeProcessor,
    Produced,
)
from timebound.spark.traces._stream_merge import merge_order as stream_merge_order
from timebound.spark.traces._stream_schemas import VERDICTS as STREAM_VERDICTS
from timebound.spark.traces._stream_schemas import source_schema

#: table -> its operator, in the contract's table order.
OPERATORS: dict[str, Operator[Any]] = {
    op.table: op for op in (_MESSAGES, _EVENTS, _ARRIVALS, _CHANNEL, _ACKS)}
#: The table ``decide_messages`` decides (the one whose measures are gathered).
MESSAGES = _MESSAGES.table

__all__ = [
    "BUCKETS", "ENGINE", "FILE_COLUMN", "GROUPED", "LINE_COLUMN", "MERGE_ENGINE", "MESSAGES",
    "OPERATORS", "Produced",
    "ROCKSDB", "STATE_SCHEMA", "STREAM_VERDICTS", "TIMERS", "TIME_MODES", "VERDICTS", "Arrival",
    "AtMostOnceProcessor", "Decider", "Gathered", "MergeProcessor", "MetricRow", "Operator",
    "StateValue", "Survey", "answered", "arrow_schema", "decide_messages", "decide_rows",
    "first_time_error", "frames_of", "grouping_key", "long_form", "prefer_exact_integers",
    "run_options", "schemas", "source_schema", "state_value", "stream_accepted",
    "stream_floor", "stream_merge_order", "survey", "translate_errors", "typed_options",
]
