"""What the streaming processors share with the file source and the runner.

- ``OutRow``: an output row of a ``transformWithState`` processor;
- ``grouping_key``: a processor's grouping values;
- ``FILE_COLUMN``, ``LINE_COLUMN``: the provenance columns the file source
  (``timebound stream``'s) adds to every row, which the processors name in errors;
- ``ROCKSDB``: the state store provider ``transformWithState`` needs.
"""

from __future__ import annotations

from typing import Any

from timebound.sparkutil import ROCKSDB as ROCKSDB

#: The file source's provenance columns: the file's name and the row's line in it.
FILE_COLUMN = "_file"
LINE_COLUMN = "_line"


class OutRow(dict[str, object]):
    """An output row of a ``transformWithState`` processor: Spark's row-mode runner
    only calls ``asDict(True)`` on what the processor yields, so a plain dict with that
    method will do (``pyspark.sql.Row`` cannot hold a column named ``cls``)."""

    def asDict(self, recursive: bool = False) -> dict[str, object]:  # noqa: N802 (Spark's name)
        return self


def grouping_key(key: Any) -> tuple[Any, ...]:
    """The grouping values: Spark passes them as a tuple; ``TwsTester`` wraps the key
    it is given in one more tuple."""
    values = tuple(key)
    if len(values) == 1 and isinstance(values[0], tuple):
        return values[0]
    return values
