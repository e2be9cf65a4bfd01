"""Crossing the Python-worker boundary: our typed errors.

A ``TimeboundError`` raised inside a Spark task (a malformed row met by the source or
by a row adapter) reaches the driver as an opaque Spark exception. ``marked`` wraps it
in a marked message; ``translate_errors`` finds the mark in the driver's exception and
raises the typed error again, so the CLI prints its one line and exits 2. Both live
in ``timebound.sparkutil`` (shared with the pipeline) and are re-exported here.
"""

from __future__ import annotations

import re

from timebound.errors import TimeboundError
from timebound.sparkutil import MARK, marked, rebuild, translate_errors

__all__ = ["MARK", "QueryFailed", "marked", "rebuild", "translate_errors"]

#: Longest Spark reason quoted in a ``QueryFailed`` line.
REASON_CHARS = 300


class QueryFailed(TimeboundError):
    """Spark stopped the query for a reason that is not one of our typed errors (a
    checkpoint another query wrote, a state store that does not match, a full disk):
    one line with Spark's first line of reason and where its whole log is; exit 2."""

    def __init__(self, exc: BaseException, log: str | None) -> None:
        self.reason = spark_reason(exc)
        where = f" (Spark's log: {log}; --verbose shows it here)" if log else ""
        super().__init__(f"the streaming query failed: {self.reason}{where}")


def spark_reason(exc: BaseException) -> str:
    """The first line of a Spark exception's message, without Java's class prefix;
    when that line only introduces a Python traceback (a task's or the
    ``foreachBatch`` function's), the traceback's last line (``KeyError: 'x'``) after
    it."""
    text = getattr(exc, "_desc", None) or str(exc) or type(exc).__name__
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    first = lines[0] if lines else type(exc).__name__
    for prefix in ("org.apache.spark.sql.streaming.StreamingQueryException: ",
                   "StreamingQueryException: "):
        first = first.removeprefix(prefix)
    if first.endswith(_TRACEBACK):
        first = first.removesuffix(_TRACEBACK).rstrip(" :")
        raised = next((line for line in lines[1:] if _RAISED.match(line)), None)
        if raised is not None:
            first = f"{first}: {raised}"
    return first if len(first) <= REASON_CHARS else first[:REASON_CHARS - 3] + "..."


_TRACEBACK = "Traceback (most recent call last):"
#: The last line of a Python traceback: ``Name: message`` of an exception class.
_RAISED = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b")
