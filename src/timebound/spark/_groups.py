"""What the batch group operators share (``causal_merge``, ``causal_stamp``,
``stability``).

``at_most_once`` decides column-wise through the pipeline's decider; the other protocols
decide a whole group of rows at once (a merger's arrivals, an execution's nodes), so
their operators are one ``groupBy(...).applyInArrow`` each: the group's rows, every
column of the caller's, go to one Python task, which puts them in decision order, hands
them to the replay's own row adapter (``timebound.adapters``: no protocol rule lives
here) and returns the same rows with the result columns appended. Nothing is joined
back: the caller's columns ride through the task untouched.

The conventions are ``at_most_once``'s (``_check``): a streaming DataFrame, an option,
a missing column, one of a wrong type, a name used twice or one the operator adds or
reserves (``__timebound_``) is refused on the driver, before any Spark job, in one line
naming it. A row the adapter refuses inside the job becomes the ``SchemaError`` naming
the caller's column and the row's role values (``typed_errors()`` rebuilds it).

Decision order within a group: ``at`` ascending (``Operator.first``), then ``order``
(nulls first), then the operator's own tie-breaks (``Operator.ties``), then Spark's
``xxhash64`` of the row's hashable columns (computed by the JVM, as ``at_most_once`` does), so the order, and so
every verdict, is the same however Spark splits the rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from timebound.errors import SchemaError, TimeboundError, TraceError, UsageError
from timebound.spark._check import (
    PREFIX,
    TABLE,
    _hashable,
    _integral,
    _orderable,
    _string,
    col,
)
from timebound.sparkutil import marked

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType, StructField, StructType

#: Working columns: the row hash (last tie-break) and the group key when the caller
#: names no group column. Both are dropped before the rows come back.
TIE, GROUP = PREFIX + "tie", PREFIX + "group"


def _integers(kind: DataType) -> bool:
    from pyspark.sql.types import ArrayType

    return isinstance(kind, ArrayType) and _integral(kind.elementType)


#: kind -> (what it accepts, in the error; the test). ``id`` values reach the adapter
#: as strings (an integer as its decimal string), the others as they are.
KINDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "id": ("a string or integer column", lambda k: _string(k) or _integral(k)),
    "string": ("a string column", _string),
    "int": ("an integer column", _integral),
    "ints": ("an array of integers column", _integers),
    "order": ("an integer, decimal, string, boolean, date or timestamp column", _orderable),
}


@dataclass(frozen=True)
class Role:
    """One column the operator reads: the keyword naming it, the caller's column
    (None: not given), its kind (``KINDS``), and the replay field it feeds."""

    keyword: str
    column: Any  # the caller's argument: a str or None once check_columns passed it
    kind: str
    field: str | None = None
    optional: bool = False


def refuse_stream(df: DataFrame, operator: str) -> None:
    if df.isStreaming:
        raise UsageError("df", f"a streaming DataFrame: {operator} takes a batch DataFrame "
                               "only (streaming is not supported yet)")


def check_columns(schema: StructType, operator: str, roles: Sequence[Role],
                  added: Sequence[str]) -> None:
    """``_check.columns``'s checks for ``roles``: names given as strings, each column
    present once with a usable type, none of ``added`` or ``__timebound_*`` present."""
    for role in roles:
        name = role.column
        if (name is None and not role.optional) or (name is not None
                                                     and not isinstance(name, str)):
            raise UsageError(role.keyword, "expected a column name (a string)"
                             + (" or None" if role.optional else "") + f", got {name!r}")
    names = schema.names
    for name in names:
        if names.count(name) > 1:
            raise SchemaError(TABLE, name, f"{names.count(name)} columns have this name "
                              "(rename them first)")
        if name in added:
            raise SchemaError(TABLE, name, f"already present: {operator} adds it "
                              "(rename or drop it first)")
        if name.startswith(PREFIX):
            raise SchemaError(TABLE, name, f"names starting with {PREFIX!r} are "
                              f"{operator}'s own (rename it first)")
    for role in roles:
        if role.column is None:
            continue
        found = [field for field in schema.fields if field.name == role.column]
        if not found:
            shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
            raise SchemaError(TABLE, role.column, f"missing ({role.keyword}=); the "
                              f"DataFrame's columns: {shown or 'none'}")
        what, fits = KINDS[role.kind]
        kind = found[0].dataType
        if not fits(kind):
            raise SchemaError(TABLE, role.column, f"{role.keyword}= needs {what}, found "
                              f"{kind.simpleString()}")


def _value(kind: str, value: Any) -> Any:
    if kind == "id" and value is not None and not isinstance(value, str):
        return str(value)
    return value


def _key(value: Any) -> tuple[bool, Any]:
    """Nulls first, and never compared with a value."""
    return (value is not None, value)


@dataclass(frozen=True)
class Operator:
    """One group operator: its name (in errors), the columns it reads (``roles``; the
    one keyworded ``at`` is the time, ``order`` the caller's tie-break), the columns it
    adds (``added``), its own tie-breaks after ``order`` (``ties``: role keywords, or a
    function of the row), and ``decide(rows)``: one result dict per row, the rows given
    in decision order as dicts of replay fields (a null field left out) and fed by the
    caller to the row adapter as ``Row(TABLE, index + 1, row)``."""

    name: str
    roles: tuple[Role, ...]
    added: tuple[StructField, ...]
    ties: Callable[[Mapping[str, Any]], tuple[Any, ...]]
    decide: Callable[[list[dict[str, Any]]], list[Mapping[str, Any]]]
    #: The role whose column comes first in decision order (``order``: the caller's
    #: order is the whole order, the ties follow it).
    first: str = "at"


def run(df: DataFrame, operator: Operator, group: str | None) -> DataFrame:
    """Every row of ``df``, all its columns, plus ``operator.added``: one task per value
    of the ``group`` column (None: one task for every row)."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import to_arrow_type
    from pyspark.sql.types import StructType as ST

    by_keyword = {role.keyword: role for role in operator.roles if role.column is not None}
    read = [(role.column, role.field or role.keyword, role.kind)
            for role in operator.roles if role.column is not None]
    field_column = {(role.field or role.keyword): role.column
                    for role in operator.roles if role.column is not None}
    at_column = by_keyword[operator.first].column
    order_column = (by_keyword["order"].column
                    if "order" in by_keyword and operator.first != "order" else None)
    added = list(operator.added)
    types = [to_arrow_type(f.dataType) for f in added]
    decide, ties = operator.decide, operator.ties

    def described(row: Mapping[str, Any]) -> str:
        shown = [f"{column} = {'null' if row.get(field) is None else row.get(field)}"
                 for column, field, _kind in read if column is not None]
        return " (row with " + ", ".join(dict.fromkeys(shown)) + ")"

    def group_rows(table: pa.Table) -> pa.Table:
        try:
            columns = {name: table.column(name).to_pylist()
                       for name in {c for c, _f, _k in read} | {TIE} if name is not None}
            rows: list[tuple[tuple[Any, ...], int, dict[str, Any]]] = []
            for i in range(table.num_rows):
                data = {field: _value(kind, columns[column][i])
                        for column, field, kind in read if column is not None}
                key = (_key(columns[at_column][i]),
                       _key(columns[order_column][i]) if order_column else (False, None),
                       *map(_key, ties(data)), columns[TIE][i])
                rows.append((key, i, data))
            rows.sort(key=lambda item: item[0])
            ordered = [{k: v for k, v in data.items() if v is not None}
                       for _key_, _i, data in rows]
            try:
                results = decide(ordered)
            except TraceError as exc:
                row = rows[exc.line - 1][2] if 1 <= exc.line <= len(rows) else {}
                raise SchemaError(TABLE, field_column.get(exc.field, exc.field),
                                  exc.reason + described(row)) from None
            back: list[Mapping[str, Any]] = [{}] * table.num_rows
            for (_k, i, _d), result in zip(rows, results, strict=True):
                back[i] = result
            out = table.drop_columns([c for c in (TIE, GROUP) if c in table.column_names])
            for field, kind in zip(added, types, strict=True):
                out = out.append_column(field.name, pa.array(
                    [_arrow(r.get(field.name)) for r in back], type=kind))
            return out
        except TimeboundError as exc:
            raise marked(exc) from None

    hashed = [col(f.name) for f in df.schema.fields if _hashable(f.dataType)]
    tie = F.xxhash64(*hashed) if hashed else F.lit(0).cast("long")
    working = df.select("*", tie.alias(TIE))
    if group is None:
        working = working.withColumn(GROUP, F.lit(0))
        keys = [F.col(GROUP)]
    else:
        keys = [col(group)]
    schema = ST(list(df.schema.fields) + added)
    return working.groupBy(*keys).applyInArrow(group_rows, schema)


def _arrow(value: Any) -> Any:
    """A result value as Arrow takes it (a map from a dict: its items)."""
    return list(value.items()) if isinstance(value, dict) else value
