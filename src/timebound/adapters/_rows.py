"""Rows in, decisions out: what every row adapter shares (no file I/O).

``Row`` wraps one input record (from a trace file, a dataset group, a stream batch)
with validating accessors that raise a ``TraceError`` naming the source, the line and
the field. ``RowAdapter`` is the protocol every per-protocol adapter implements: the
replay, the pipeline, the simulator's offline re-check and streaming feed rows to it in
trace order and collect the output rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from timebound.contract import INT64_MAX, INT64_MIN
from timebound.errors import TraceError


class Row:
    """One input record with validating accessors; ``data`` is the record itself."""

    __slots__ = ("source", "line", "data")

    def __init__(self, source: str, line: int, data: dict[str, Any]) -> None:
        self.source = source
        self.line = line
        self.data = data

    def error(self, field: str, reason: str) -> TraceError:
        return TraceError(self.source, self.line, field, reason)

    def _get(self, field: str) -> Any:
        try:
            return self.data[field]
        except KeyError:
            raise self.error(field, "missing") from None

    def string(self, field: str) -> str:
        """A non-empty string field."""
        value = self._get(field)
        if not isinstance(value, str) or not value:
            raise self.error(field, f"expected a non-empty string, got {value!r}")
        return value

    def integer(self, field: str, *, minimum: int = 0) -> int:
        """An integer field: trace integers are times, timestamps and counters, so
        >= 0 (or ``minimum``) and within int64 (what Parquet and Spark can hold)."""
        value = self._get(field)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(field, f"expected an integer, got {value!r}")
        if value < minimum:
            raise self.error(field, f"must be >= {minimum}, got {value}")
        if value > INT64_MAX:
            raise self.error(field, f"must fit in 64 bits (<= 2^63-1), got {value}")
        return value

    def choice(self, field: str, choices: Sequence[str]) -> str:
        value = self._get(field)
        if value not in choices:
            raise self.error(field, f"expected one of {', '.join(choices)}, got {value!r}")
        return str(value)

    def int_list(self, field: str, *, length: int | None = None) -> list[int]:
        value = self._get(field)
        if not isinstance(value, list) or not all(
            isinstance(item, int) and not isinstance(item, bool) for item in value
        ):
            raise self.error(field, f"expected a list of integers, got {value!r}")
        if any(not INT64_MIN <= item <= INT64_MAX for item in value):
            raise self.error(field, "an integer does not fit in 64 bits")
        if length is not None and len(value) != length:
            raise self.error(field, f"expected {length} integers, got {len(value)}")
        return value

    def has(self, field: str) -> bool:
        return field in self.data


class RowAdapter(Protocol):
    """Feeds rows, in trace order, to the core protocol objects."""

    def feed(self, row: Row) -> Iterable[Mapping[str, Any]]:
        """Output rows caused by this input row (may be none)."""
        ...

    def finish(self) -> Iterable[Mapping[str, Any]]:
        """Output rows due at the end of the input (may be none)."""
        ...

    def summary(self) -> list[tuple[str, object]]:
        """``(label, value)`` pairs describing the run, for people."""
        ...

    @property
    def output_types(self) -> Mapping[str, str]:
        """Output column -> contract type name, for this adapter's mode."""
        ...
