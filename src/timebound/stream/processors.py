"""The parts of the streaming driver another package builds on (``timebound.spark``):
the at-most-once and merge ``transformWithState`` processors, their output row and
grouping key,
the RocksDB state-store provider, and the file source's provenance columns.

Importing this module imports pyspark (the ``spark`` extra).
"""

from __future__ import annotations

from timebound.stream._atmostonce import AtMostOnceProcessor
from timebound.stream._errors import OutRow, grouping_key
from timebound.stream._merge import TIME_MODES, TIMERS, Arrival, MergeProcessor
from timebound.stream._run import ROCKSDB
from timebound.stream._source import FILE_COLUMN, LINE_COLUMN

__all__ = ["FILE_COLUMN", "LINE_COLUMN", "ROCKSDB", "TIMERS", "TIME_MODES", "Arrival",
           "AtMostOnceProcessor", "MergeProcessor", "OutRow", "grouping_key"]
