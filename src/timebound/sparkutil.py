"""Spark plumbing shared by the drivers that run on Spark (``pipeline``, ``stream``).

Drivers never import each other, so what both need lives here, a leaf helper beside
``timebound.storage``: it imports only ``timebound.errors`` and the standard library
(never pyspark at import time, never a driver).

Errors: a ``TimeboundError`` raised inside a Spark task (a malformed row met by a
source or a row adapter) reaches the driver as an opaque Spark exception. ``marked``
wraps it in a plain exception whose message carries the typed error between two marks;
``rebuild`` finds the mark in any text (the exception's message, the JVM's trace) and
``translate_errors`` re-raises the typed error on the driver, so the CLI prints its one
line and exits 2.

Session options: ``parse_conf`` turns the ``--conf KEY=VALUE`` items of both drivers'
commands into a dict.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

from timebound.errors import SchemaError, TimeboundError, TraceError, UsageError

__all__ = ["MARK", "marked", "parse_conf", "rebuild", "stopped_after", "translate_errors"]

MARK = "@@timebound-error@@"
_MARKED = re.compile(re.escape(MARK) + r"(.*?)" + re.escape(MARK), re.S)


def marked(exc: TimeboundError) -> RuntimeError:
    """A plain exception carrying ``exc`` in its message (``rebuild`` undoes it)."""
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
    """The typed error ``marked`` put in ``text`` (anywhere in it), or None."""
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


def parse_conf(items: Sequence[str]) -> dict[str, str]:
    """``["k=v", ...]`` -> dict; a malformed item is a UsageError naming ``--conf``."""
    conf: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError("--conf", f"expected KEY=VALUE, got {item!r}")
        conf[key.strip()] = value
    return conf


@contextlib.contextmanager
def stopped_after(spark: Any, owned: bool = True) -> Iterator[Any]:
    """Stop ``spark`` (if ``owned``) when the block ends. When the block ends by an
    exception, a failure to stop never replaces it: a SIGTERM or Ctrl-C in the middle of
    a Py4J call leaves the connection unusable, and ``stop`` then raises a Py4J error
    that would turn "terminated" into an internal error."""
    try:
        yield spark
    except BaseException:
        if owned:
            with contextlib.suppress(Exception):
                spark.stop()
        raise
    if owned:
        spark.stop()
