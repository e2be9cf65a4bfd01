"""``timebound.spark``: the protocols as DataFrame operators (issue 28; docs/spark.md).

``at_most_once(df, conn=..., ts=..., at=...)`` deduplicates any DataFrame, batch or
streaming, under the caller's column names: every input row comes back with all its
columns plus ``verdict``, ``rho`` and ``entries`` (and ``late_arrival`` on a stream),
the verdicts ``timebound replay atmostonce`` gives those rows taken in ``at`` order
per receiver. A batch DataFrame goes through the pipeline's operator path
(``_batch``), a stream through ``timebound stream``'s ``transformWithState`` processor
(``_stream``); both hand the rows to the shared row adapter, so no protocol rule lives
here. Options and columns are checked on the driver before any job (``_check``).

``typed_errors()`` turns the error a bad row raises inside a Spark job back into the
``TimeboundError`` it is (Spark wraps it in its own exception).

Layer: above ``pipeline`` and ``stream`` (whose private operator pieces it reuses),
below the CLI (tests/test_layers.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from timebound.errors import MissingExtra
from timebound.sparkutil import translate_errors as typed_errors

try:
    import pyspark  # noqa: F401
except ImportError:  # pragma: no cover - the extra is missing
    raise MissingExtra("timebound.spark", "spark", "pyspark") from None

from timebound.spark._check import columns, options

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["at_most_once", "typed_errors"]


def at_most_once(
    df: DataFrame,
    *,
    conn: str,
    ts: str,
    at: str,
    receiver: str | None = None,
    order: str | None = None,
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
    reorder_window: int = 1,
) -> DataFrame:
    """SCMP at-most-once verdicts for the rows of ``df`` (docs/spark.md).

    ``conn``: the connection id column (string or integer); ``ts``: the sender's
    timestamp, ``at``: the receiver's clock when the row arrived (integer ticks, ``ts``
    >= 1, ``at`` >= 0). ``receiver``: one independent receiver per value of this column
    (string or integer; default: one receiver for every row). Each receiver takes its
    rows in ``at`` order; rows with equal ``at`` by ``order`` (nulls first), then
    ``ts``, then ``conn`` (as a string), then Spark's ``xxhash64`` of the row's columns.
    The other options are ``timebound replay atmostonce``'s, with its ranges:
    ``estimator`` ``fixed`` (``rho``, ``gc_every``), ``unlimited`` (``gc_every``) or
    ``limited`` (``window``, ``spikes``, ``p``); ``resilient`` with ``beta`` and
    ``latest_every`` (and ``recovery_grace``); ``classes``: hash classes per receiver;
    ``reorder_window``: timestamps kept per connection (1: SCMP's rule).

    Returns every row of ``df`` with all its columns plus ``verdict`` (``accepted``,
    ``duplicate``, ``stale``, ``early``), ``rho`` and ``entries`` (longs), and on a
    streaming ``df`` ``late_arrival`` (the row's ``at`` was behind its receiver's
    clock: decided at that clock). Raises ``UsageError`` (an option) or ``SchemaError``
    (a column: missing, of a wrong type, or one the operator adds already present)
    before any Spark job.
    """
    opts = options({"estimator": estimator, "rho": rho, "gc_every": gc_every,
                    "window": window, "spikes": spikes, "p": p, "resilient": resilient,
                    "beta": beta, "latest_every": latest_every,
                    "recovery_grace": recovery_grace, "classes": classes,
                    "reorder_window": reorder_window})
    cols = columns(df.schema, conn, ts, at, receiver, order)
    if df.isStreaming:
        from timebound.spark import _stream

        return _stream.decide(df, cols, opts)
    from timebound.spark import _batch

    return _batch.decide(df, cols, opts)
