"""What every operator shares: per-run options, the per-group replay, error transport.

Per-run options: the pipeline's command-line options are the defaults; an option
column of the table (named like the replay option's argparse dest, constant within a
run: ``timebound.contract.OPTIONS``) overrides them for its run. Each run's values are
turned into the protocol's typed options (``timebound.adapters``: the same object the
replay builds from its command line) on the driver before any task starts; a bad one
is a ``UsageError`` naming the option and the run. No argparse here.

Per-group replay: a Spark group (a run, a run's merger, a receiver's hash class...) is
handed to the *same* row adapter ``timebound replay`` uses, rows sorted by ``seq``
(never by arrival order after a shuffle), each wrapped in the adapters' ``Row`` so
malformed rows fail exactly as in the replay. No protocol rule lives here.

Errors: a ``TimeboundError`` raised in a Python worker reaches the driver as an opaque
Spark exception; ``guarded`` wraps it in a marked message and ``translate_errors``
rebuilds the typed error on the driver, so the CLI exits 2 with the same one line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import pyarrow as pa

from timebound.adapters import AdapterSpec, Row, RowAdapter
from timebound.errors import SchemaError, TimeboundError, UsageError

# rebuild and translate_errors are used as _group.rebuild / _group.translate_errors.
from timebound.sparkutil import marked
from timebound.sparkutil import rebuild as rebuild
from timebound.sparkutil import translate_errors as translate_errors

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

OptionsT = TypeVar("OptionsT")



# -- options ----------------------------------------------------------------------


@dataclass(frozen=True)
class Operator(Generic[OptionsT]):
    """One protocol's Spark operator: its input table, its row adapter (``spec``), the
    option defaults the pipeline adds to the replay's (``defaults``, for every run;
    ``run_defaults(df)``, per run from the data) and ``operate(df, options)``, which
    returns the decision table given each run's typed options."""

    table: str
    spec: AdapterSpec[OptionsT, Any]
    operate: Callable[[DataFrame, Mapping[str, OptionsT]], DataFrame]
    defaults: Mapping[str, Any] = field(default_factory=dict)
    run_defaults: Callable[[DataFrame], Mapping[str, Mapping[str, Any]]] | None = None


def run_options(df: DataFrame, table: str, spec: AdapterSpec[Any, Any],
                given: Mapping[str, Any],
                per_run_defaults: Mapping[str, Mapping[str, Any]] | None = None,
                rows: Sequence[Mapping[str, Any]] | None = None,
                ) -> dict[str, dict[str, Any]]:
    """``run -> option values`` for every run of ``df``, each validated by building the
    protocol's typed options (a bad one is a UsageError naming the option and the run).
    Precedence: the table's option columns, then ``given`` (the command line), then
    ``per_run_defaults`` of the run. ``rows``: the distinct (run, option columns) of
    ``df`` if the caller has them already."""
    columns = [c for c in spec.option_columns if c in df.columns]
    if rows is None:
        rows = [r.asDict() for r in df.select("run", *columns).distinct().collect()]
    per_run: dict[str, dict[str, Any]] = {}
    for row in rows:
        run = row["run"]
        if run in per_run:
            other = per_run[run]
            changed = next(c for c in columns if other.get(c, None) != row[c]
                           and not (row[c] is None and c not in other))
            raise SchemaError(table, changed, f"not constant within run {run!r}")
        per_run[run] = {c: row[c] for c in columns if row[c] is not None}
    known = set(spec.option_columns)
    resolved: dict[str, dict[str, Any]] = {}
    for run, overrides in sorted(per_run.items(), key=lambda item: str(item[0])):
        options = {k: v for k, v in given.items() if k in known and v is not None}
        for dest, value in (per_run_defaults or {}).get(run, {}).items():
            if options.get(dest) is None:
                options[dest] = value
        options.update(overrides)
        try:
            spec.options(options)
        except UsageError as exc:
            raise UsageError(f"{exc.option} (run {run!r})", exc.reason) from None
        resolved[run] = options
    return resolved


def typed_options(spec: AdapterSpec[OptionsT, Any], values: Mapping[str, Mapping[str, Any]]
                  ) -> dict[str, OptionsT]:
    """Each run's typed options (``values`` as ``run_options`` returns them)."""
    return {run: spec.options(options) for run, options in values.items()}


# -- groups -----------------------------------------------------------------------


def sorted_rows(table: pa.Table) -> list[dict[str, Any]]:
    """The group's rows in trace order, null fields dropped (as the replay reads them)."""
    rows = table.sort_by([("seq", "ascending")]).to_pylist()
    return [{k: v for k, v in row.items() if v is not None} for row in rows]


def replay_rows(replayer: RowAdapter, rows: list[dict[str, Any]], source: str,
                line: Callable[[int, dict[str, Any]], int] | None = None,
                ) -> Iterator[tuple[dict[str, Any] | None, list[Mapping[str, Any]]]]:
    """Feed ``rows`` to ``replayer``: yields ``(row, outputs)`` per row, then
    ``(None, outputs of finish())``. ``line`` numbers rows for errors (default: seq)."""
    for index, data in enumerate(rows):
        number = line(index, data) if line else int(data.get("seq", index))
        yield data, list(replayer.feed(Row(source, number, data)))
    yield None, list(replayer.finish())


def arrow_schema(schema: StructType) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema)


def to_arrow(rows: Sequence[Mapping[str, Any]], schema: StructType) -> pa.Table:
    # from_pylist reads only the schema's keys and takes a missing key as null
    return pa.Table.from_pylist(rows, schema=arrow_schema(schema))


def out_schema(input_schema: StructType, extra: StructType) -> StructType:
    from pyspark.sql.types import StructType as ST

    names = set(input_schema.names)
    return ST(list(input_schema.fields) + [f for f in extra.fields if f.name not in names])


# -- errors -----------------------------------------------------------------------


def guarded(fn: Callable[..., pa.Table]) -> Callable[..., pa.Table]:
    """Wrap a group function so our typed errors survive the trip to the driver."""

    def wrapper(key: Any, table: Any) -> pa.Table:  # Spark counts the arguments
        try:
            return fn(key, table)
        except TimeboundError as exc:
            raise marked(exc) from None

    return wrapper
