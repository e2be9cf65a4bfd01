"""Crossing the Python-worker boundary: our typed errors, and output rows.

A ``TimeboundError`` raised inside a Spark task (a malformed row met by the source or
by a row adapter) reaches the driver as an opaque Spark exception. ``marked`` wraps it
in a marked message; ``translate_errors`` finds the mark in the driver's exception and
raises the typed error again, so the CLI prints its one line and exits 2.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from typing import Any

from timebound.errors import SchemaError, TimeboundError, TraceError, UsageError

MARK = "@@timebound-error@@"
_MARKED = re.compile(re.escape(MARK) + r"(.*?)" + re.escape(MARK), re.S)


def marked(exc: TimeboundError) -> RuntimeError:
    """A plain exception carrying ``exc`` in its message."""
    payload: list[object]
    if isinstance(exc, TraceError):
        payload = ["trace", exc.source, exc.line, exc.field, exc.reason]
    elif isinstance(exc, SchemaError):
        payload = ["schema", exc.table, exc.column, exc.reason]
    elif isinstance(exc, UsageError):
        payload = ["usage", exc.option, exc.reason]
    else:
        payload = ["other", str(exc)]
    return RuntimeError(MARK + json.dumps(payload) + MARK)


def rebuild(text: str) -> TimeboundError | None:
    match = _MARKED.search(text)
    if match is None:
        return None
    kind, *rest = json.loads(match.group(1))
    if kind == "trace":
        return TraceError(*rest)
    if kind == "schema":
        return SchemaError(*rest)
    if kind == "usage":
        return UsageError(*rest)
    return TimeboundError(*rest)


@contextlib.contextmanager
def translate_errors() -> Iterator[None]:
    """Re-raise a worker's marked error as itself on the driver."""
    try:
        yield
    except TimeboundError:
        raise
    except Exception as exc:
        typed = rebuild(str(exc))
        if typed is None:
            raise
        raise typed from None


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
