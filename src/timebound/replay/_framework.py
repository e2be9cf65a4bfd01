"""The shape every ``timebound replay PROTOCOL`` command shares.

A replay command is a ``ReplayCommand``: its options (argparse declarations), a
``build`` that turns the parsed options into the protocol's typed options and returns
its row adapter (``timebound.adapters``: the one copy the pipeline, the simulator and
streaming also use), the types of its output columns (``timebound.contract``) and a
bundled example. ``replay_rows`` does the rest: it streams the input, wraps each record
in a ``Row`` (typed accessors that raise a ``TraceError`` naming file, line and field),
and writes the output atomically. This package keeps only the file I/O, the argparse
declarations and this glue.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from timebound._safety import guard_output
from timebound.adapters import Row, RowAdapter
from timebound.adapters.atmostonce import AtMostOnceAdapter
from timebound.errors import TraceError
from timebound.replay import _batch
from timebound.replay._io import OutputWriter, read_rows


@dataclass(frozen=True)
class ReplayCommand:
    name: str
    help: str
    description: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    build: Callable[[argparse.Namespace], RowAdapter]
    output_types: Mapping[str, str]
    example_file: str
    example_args: Sequence[str] = field(default_factory=tuple)


def replay_rows(command: ReplayCommand, args: argparse.Namespace, *,
                fast: bool = True) -> RowAdapter:
    """Run ``command`` from ``args.input`` to ``args.output``; return the adapter.

    At-most-once Parquet -> Parquet takes the record-batch path (``_batch``, the same
    decisions and output) unless ``fast`` is False."""
    guard_output(args.output, [args.input], "--output")
    replayer = command.build(args)
    if fast and _batch.applies(replayer, args.input, args.output):
        assert isinstance(replayer, AtMostOnceAdapter)
        _batch.replay_parquet(replayer, args.input, args.output)
        return replayer
    source = "<stdin>" if args.input == "-" else args.input
    # An adapter may refine the column types for its mode (e.g. stability's value).
    with OutputWriter(args.output, replayer.output_types) as out:
        for line, value in read_rows(args.input):
            if not isinstance(value, dict):
                raise TraceError(source, line, "<row>", "expected a JSON object")
            for produced in replayer.feed(Row(source, line, value)):
                out.write(produced)
        for produced in replayer.finish():
            out.write(produced)
        out.commit()
    return replayer


def add_io_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", "-i", required=True, metavar="IN",
                        help="input trace: .jsonl or .parquet, '-' for stdin (JSON Lines)")
    parser.add_argument("--output", "-o", required=True, metavar="OUT",
                        help="output: .jsonl or .parquet, '-' for stdout (JSON Lines); "
                             "written whole or not at all")
    parser.add_argument("--stats", action="store_true",
                        help="print a summary of the replay to stderr when done")
