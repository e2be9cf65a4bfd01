"""Crossing the Python-worker boundary: our typed errors, and output rows.

A ``TimeboundError`` raised inside a Spark task (a malformed row met by the source or
by a row adapter) reaches the driver as an opaque Spark exception. ``marked`` wraps it
in a marked message; ``translate_errors`` finds the mark in the driver's exception and
raises the typed error again, so the CLI prints its one line and exits 2. Both live
in ``timebound.sparkutil`` (shared with the pipeline) and are re-exported here.
"""

from __future__ import annotations

from typing import Any

from timebound.sparkutil import MARK, marked, rebuild, translate_errors

__all__ = ["MARK", "OutRow", "grouping_key", "marked", "rebuild", "translate_errors"]


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
