"""The library's batch ``at_most_once`` taken apart, for measuring where its time goes
(benchmarks/profile_pipeline.py): its plan around any partition worker (``planned``),
its own worker (``worker``), a worker's answer with no decision (``undecided``, typed
``RETURNED``), and what the call builds from its arguments first (``options``,
``columns``, ``Columns``, ``placement``). ``at_most_once`` is ``planned(df, cols,
opts, worker(cols, opts))``; nothing here is a second copy of it.
"""

from __future__ import annotations

from timebound.spark._batch import RETURNED, Worker, planned, undecided, worker
from timebound.spark._check import Columns, columns, options, placement

__all__ = ["RETURNED", "Columns", "Worker", "columns", "options", "placement", "planned",
           "undecided", "worker"]
