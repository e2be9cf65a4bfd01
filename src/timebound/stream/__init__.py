"""``timebound stream``: the protocols' cores as Structured Streaming queries.

A driver (docs/stream.md). Trace files dropped into a folder are read in
name order (``_source``), keyed, and fed by stateful operators (at-most-once:
``applyInPandasWithState``; merge: ``transformWithStateInPandas``, with its timers)
to the same cores ``timebound replay`` uses, one core per key kept in the RocksDB
state store between micro-batches as a core snapshot
(``timebound.core.atmostonce.classified_snapshot``,
``timebound.core.merge.merger_snapshot``). Each micro-batch's output is written once,
whole, under its batch id (``_sink``), so a query killed at any moment and restarted
from its checkpoint emits nothing twice. The checkpoint remembers the protocol,
options, source and sink it was started with (``_lock``): a restart with others is
refused in one line before Spark starts. Spark's own output goes to
``CHECKPOINT/timebound-spark.log`` (stderr with ``--verbose``); a failure or a signal
inside a micro-batch is one line.

- ``stream_atmostonce``: ``messages`` rows in; ``SINK/verdicts/`` (every message row's
  verdict, ``rho``, ``entries``, class and ``late_arrival``) and ``SINK/accepted/``
  (each accepted message once) out;
- ``stream_merge``: ``arrivals`` rows in; ``SINK/order/`` (each merger's deliveries,
  late and duplicate arrivals, in the causal deterministic order) out.

No protocol rule lives here. Imports: adapters, contract, core, errors and pyspark.
"""

from __future__ import annotations

from typing import Any

__all__ = ["StreamResult", "stream_atmostonce", "stream_merge"]


def __getattr__(name: str) -> Any:
    # Lazy: ``timebound --help`` imports ``timebound.stream.cli``, not pyspark.
    if name in __all__:
        from timebound.stream import _commands

        return getattr(_commands, name)
    raise AttributeError(name)
