"""The shape every ``timebound replay PROTOCOL`` command shares.

A replay command is a ``ReplayCommand``: its options, a ``build`` that validates them
and returns a ``Replayer`` (a thin adapter that feeds rows to the one core copy of the
protocol), the types of its output columns and a bundled example. ``run_replay`` does
the rest: it streams the input, wraps each record in a ``Row`` (typed accessors that
raise a ``TraceError`` naming file, line and field), and writes the output atomically.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from timebound.errors import TraceError, UsageError
from timebound.replay._io import OutputWriter, read_rows


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

    def str(self, field: str) -> str:
        value = self._get(field)
        if not isinstance(value, str) or not value:
            raise self.error(field, f"expected a non-empty string, got {value!r}")
        return value

    def int(self, field: str, *, minimum: int | None = None) -> int:
        value = self._get(field)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(field, f"expected an integer, got {value!r}")
        if minimum is not None and value < minimum:
            raise self.error(field, f"must be >= {minimum}, got {value}")
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
        if length is not None and len(value) != length:
            raise self.error(field, f"expected {length} integers, got {len(value)}")
        return value

    def has(self, field: str) -> bool:
        return field in self.data


class Replayer(Protocol):
    """Feeds rows, in file order, to the core protocol objects."""

    def feed(self, row: Row) -> Iterable[Mapping[str, Any]]:
        """Output rows caused by this input row (may be none)."""
        ...

    def finish(self) -> Iterable[Mapping[str, Any]]:
        """Output rows due at the end of the input (may be none)."""
        ...

    def summary(self) -> list[tuple[str, object]]:
        """``(label, value)`` pairs describing the replay, for people."""
        ...


@dataclass(frozen=True)
class ReplayCommand:
    name: str
    help: str
    description: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    build: Callable[[argparse.Namespace], Replayer]
    output_types: Mapping[str, str]
    example_file: str
    example_args: Sequence[str] = field(default_factory=tuple)


def replay_rows(command: ReplayCommand, args: argparse.Namespace) -> Replayer:
    """Run ``command`` from ``args.input`` to ``args.output``; return the replayer."""
    replayer = command.build(args)
    source = "<stdin>" if args.input == "-" else args.input
    # A replayer may refine the column types for its mode (e.g. stability's value).
    types = getattr(replayer, "output_types", command.output_types)
    with OutputWriter(args.output, types) as out:
        for line, value in read_rows(args.input):
            if not isinstance(value, dict):
                raise TraceError(source, line, "<row>", "expected a JSON object")
            for produced in replayer.feed(Row(source, line, value)):
                out.write(produced)
        for produced in replayer.finish():
            out.write(produced)
        out.commit()
    return replayer


# -- option helpers ---------------------------------------------------------------


def require(args: argparse.Namespace, dest: str, *, minimum: int | None = None) -> int:
    """A numeric option the mode needs: present, and >= minimum."""
    value = getattr(args, dest)
    flag = "--" + dest.replace("_", "-")
    if value is None:
        raise UsageError(flag, "required here")
    if minimum is not None and value < minimum:
        raise UsageError(flag, f"must be >= {minimum}, got {value}")
    return int(value)


def forbid(args: argparse.Namespace, dests: Iterable[str], why: str) -> None:
    """Options the mode does not use must not be given."""
    for dest in dests:
        if getattr(args, dest) is not None and getattr(args, dest) is not False:
            raise UsageError("--" + dest.replace("_", "-"), f"not used {why}")


def add_io_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", "-i", required=True, metavar="IN",
                        help="input trace: .jsonl or .parquet, '-' for stdin (JSON Lines)")
    parser.add_argument("--output", "-o", required=True, metavar="OUT",
                        help="output: .jsonl or .parquet, '-' for stdout (JSON Lines); "
                             "written whole or not at all")
    parser.add_argument("--stats", action="store_true",
                        help="print a summary of the replay to stderr when done")
