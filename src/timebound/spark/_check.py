"""Everything ``at_most_once`` checks on the driver, before any Spark job exists.

Options become the replay's own ``AtMostOnceOptions`` (``timebound.adapters``), so the
ranges and the reasons are those of ``ReceiverConfig`` and of the command line; only
the name changes: a reason that names ``--gc-every`` names the keyword ``gc_every``
here (``UsageError("gc_every", "required here")``).

Columns are read from the DataFrame's schema alone (no job): a column that is missing,
of a type the operator cannot use, or already named like one the operator adds is a
``SchemaError`` of the table ``'DataFrame'`` naming the column, one line.

Then the row checks Spark runs as it reads the rows (``guarded``): a null, an empty
string, a ``ts`` below 1 or an ``at`` below 0 -- what ``timebound replay`` refuses --
stops the job with Spark's ``raise_error`` carrying the same ``SchemaError``, written
as ``timebound.sparkutil.carried`` writes errors: the message a user reads without
``typed_errors`` is one sentence, ``timebound SchemaError: table 'DataFrame', column
'sent': "ts must not be null (row with user = u1, sent = null, at = 5)"`` (Spark puts
``[USER_RAISED_EXCEPTION]`` before it and ``SQLSTATE: P0001`` after it), and
``typed_errors`` raises it again as itself. A null reads ``<role> must not be null``,
an empty identifier ``<role> must not be empty``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from timebound.adapters.atmostonce import AtMostOnceOptions
from timebound.contract import MESSAGE_MINIMUMS
from timebound.errors import SchemaError, UsageError
from timebound.sparkutil import hash_class, quoted_column, schema_head, with_hash_class

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType, StructType

#: The table name in column errors: the caller's DataFrame.
TABLE = "DataFrame"
#: Columns the operator adds (``late_arrival`` only when streaming, refused always: a
#: query must read the same as a batch job and as a stream).
ADDED = ("verdict", "rho", "entries", "late_arrival")
#: The operator's own working columns start with this; a caller's may not.
PREFIX = "__timebound_"
_FLAG = re.compile(r"--([a-z][a-z-]*)")


def keyword(text: str) -> str:
    """``--gc-every`` -> ``gc_every`` wherever the command line's flags are named."""
    return _FLAG.sub(lambda m: m.group(1).replace("-", "_"), text)


def options(values: Mapping[str, Any]) -> AtMostOnceOptions:
    """The receivers' options from the keyword arguments (``None``: not given), checked
    as ``timebound replay atmostonce`` checks its flags."""
    estimator = values.get("estimator")
    if estimator is not None and not isinstance(estimator, str):
        raise UsageError("estimator", f"expected a string, got {estimator!r}")
    resilient = values.get("resilient")
    if not isinstance(resilient, bool):
        raise UsageError("resilient", f"expected True or False, got {resilient!r}")
    given = dict(values)
    if not resilient and given.get("recovery_grace") == 0:
        given["recovery_grace"] = None  # the default: the figures' behaviour
    try:
        return AtMostOnceOptions.from_values(given)
    except UsageError as exc:
        raise UsageError(keyword(exc.option), keyword(exc.reason)) from None


@dataclass(frozen=True)
class Columns:
    """The caller's column names for each role (``receiver``, ``order``, ``down``:
    optional)."""

    conn: str
    ts: str
    at: str
    receiver: str | None
    order: str | None
    down: str | None = None

    def roles(self) -> list[tuple[str, str]]:
        named = [("conn", self.conn), ("ts", self.ts), ("at", self.at),
                 ("receiver", self.receiver), ("order", self.order), ("down", self.down)]
        return [(role, name) for role, name in named if name is not None]


def locked(opts: AtMostOnceOptions, cols: Columns, schema: StructType) -> dict[str, Any]:
    """What decides a stream's keys and verdicts, for its checkpoint's lock: every
    option under its keyword, then each role's column as [name, type] (None: not
    given)."""
    import dataclasses

    fields: dict[str, Any] = dataclasses.asdict(opts.receiver)
    # The live servers' byte bound: a library receiver has none (and locks written
    # before the field existed stay valid).
    del fields["max_bytes"]
    fields["classes"] = opts.classes
    for role in ("conn", "ts", "at", "receiver", "order", "down"):
        name = getattr(cols, role)
        if role == "down" and name is None:
            continue  # locks written before crash rows existed stay valid
        fields[role] = None if name is None else [name, schema[name].dataType.simpleString()]
    return fields


def _integral(kind: DataType) -> bool:
    from pyspark.sql.types import IntegralType

    return isinstance(kind, IntegralType)


def _string(kind: DataType) -> bool:
    from pyspark.sql.types import StringType

    return isinstance(kind, StringType)


def _orderable(kind: DataType) -> bool:
    from pyspark.sql.types import (
        BooleanType,
        DateType,
        DecimalType,
        TimestampNTZType,
        TimestampType,
    )

    return _integral(kind) or _string(kind) or isinstance(
        kind, BooleanType | DateType | DecimalType | TimestampType | TimestampNTZType)


#: role -> (what it accepts, in the error, and the test).
_KINDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "conn": ("a string or integer column", lambda k: _string(k) or _integral(k)),
    "receiver": ("a string or integer column", lambda k: _string(k) or _integral(k)),
    "ts": ("an integer column (ticks)", _integral),
    "at": ("an integer column (ticks)", _integral),
    "down": ("an integer column (ticks)", _integral),
    "order": ("an integer, decimal, string, boolean, date or timestamp column", _orderable),
}


def columns(schema: StructType, conn: object, ts: object, at: object, receiver: object,
            order: object, down: object = None) -> Columns:
    """The roles' columns, each present once with a type the operator can use; none of
    the columns the operator adds already there."""
    named = {"conn": conn, "ts": ts, "at": at, "receiver": receiver, "order": order,
             "down": down}
    for role, name in named.items():
        optional = role in ("receiver", "order", "down")
        if (name is None and not optional) or (name is not None and not isinstance(name, str)):
            raise UsageError(role, "expected a column name (a string)"
                             + (" or None" if optional else "") + f", got {name!r}")
    names = schema.names
    for name in names:
        if names.count(name) > 1:
            raise SchemaError(TABLE, name, f"{names.count(name)} columns have this name "
                              "(rename them first)")
        if name in ADDED:
            raise SchemaError(TABLE, name, "already present: at_most_once adds it "
                              "(rename or drop it first)")
        if name.startswith(PREFIX):
            raise SchemaError(TABLE, name, f"names starting with {PREFIX!r} are "
                              "at_most_once's own (rename it first)")
    for role, name in named.items():
        if name is None:
            continue
        assert isinstance(name, str)
        found = [field for field in schema.fields if field.name == name]
        if not found:
            shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
            raise SchemaError(TABLE, name, f"missing ({role}=); the DataFrame's columns: "
                              f"{shown or 'none'}")
        what, fits = _KINDS[role]
        kind = found[0].dataType
        if not fits(kind):
            raise SchemaError(TABLE, name, f"{role}= needs {what}, found "
                              f"{kind.simpleString()}")
    return Columns(str(conn), str(ts), str(at), receiver if isinstance(receiver, str) else None,
                   order if isinstance(order, str) else None,
                   down if isinstance(down, str) else None)


# -- what the operator works on: its own columns beside the caller's ------------------

#: The working columns: receiver name, conn id (strings), ts, at (longs), hash class,
#: and the last tie-break.
RECEIVER, CONN, TS, AT, CLS, TIE = (PREFIX + n for n in
                                     ("receiver", "conn", "ts", "at", "cls", "tie"))
#: A crash row's down time; a trace row's ``type`` (``traced``).
DOWN, KIND = PREFIX + "down", PREFIX + "kind"
#: The receiver's name when the caller names no receiver column (one receiver).
ONE_RECEIVER = "receiver"


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def col(name: str) -> Column:
    from pyspark.sql import functions as F

    return F.col(_quoted(name))


def _hashable(kind: DataType) -> bool:
    """Spark's ``xxhash64`` takes the type (maps, variants and intervals it does not)."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(kind, ArrayType):
        return _hashable(kind.elementType)
    if isinstance(kind, StructType):
        return all(_hashable(f.dataType) for f in kind.fields)
    if isinstance(kind, MapType):
        return False
    return kind.typeName() not in ("variant", "interval", "calendarinterval")


def _shown(value: Column) -> Column:
    """A row's value as the reason shows it: ``null``, ``''`` (empty), or as a string."""
    from pyspark.sql import functions as F

    text = value.cast("string")
    return F.when(text == "", F.lit("''")).otherwise(F.coalesce(text, F.lit("null")))


def _first(cases: list[tuple[Column, str]]) -> Column:
    """``CASE``: the text of the first case whose test holds, else null."""
    from pyspark.sql import functions as F

    found = F.when(cases[0][0], F.lit(cases[0][1]))
    for bad, text in cases[1:]:
        found = found.when(bad, F.lit(text))
    return found


def prepared(df: DataFrame, cols: Columns, classes: int, *, resilient: bool = False,
             copies: bool = True) -> DataFrame:
    """``df`` with the working columns, each row checked as Spark reads it (what the
    replay refuses stops the job naming the caller's column and the row).

    The checks are one guard on ``TS``: the first refusal that holds (receiver, conn,
    ts, at, down; a null before the range) names its column and reason in two
    ``CASE``s, and Spark's ``raise_error`` gets ``sparkutil.carried``'s sentence, with
    the row's role values written once. (One ``raise_error`` per check, each with its
    own copy of the row's description, doubled the time Spark takes to plan the
    operator's query: 19.6 against 9.4 ms, paid again by every micro-batch of a
    stream.) A crash row (``down`` not null) has no ``conn`` or ``ts`` to check: its
    ``down`` must be >= 1, and its receivers ``resilient``; it goes to every class
    (``copies``: one copy per class, as a stream keys them; else one row, as a batch
    places whole receivers)."""
    from pyspark.sql import functions as F

    refusals: list[tuple[Column, str, str]] = []  # (bad, caller's column, reason)
    crash = None if cols.down is None else col(cols.down).isNotNull()

    def message(bad: Column) -> Column:
        return bad if crash is None else bad & ~crash

    def ident(role: str, name: str, rows: Callable[[Column], Column] = lambda c: c
              ) -> Column:
        value = col(name).cast("string")
        refusals.extend([(rows(value.isNull()), name, f"{role} must not be null"),
                         (rows(value == ""), name, f"{role} must not be empty")])
        return value

    def ticks(role: str, name: str, least: int, rows: Callable[[Column], Column] = lambda c: c
              ) -> Column:
        refusals.extend([(rows(col(name).isNull()), name, f"{role} must not be null"),
                         (rows(col(name) < least), name, f"{role} must be >= {least}")])
        return col(name).cast("long")

    receiver = (F.lit(ONE_RECEIVER) if cols.receiver is None
                else ident("receiver", cols.receiver))
    conn = ident("conn", cols.conn, message)
    ts = ticks("ts", cols.ts, MESSAGE_MINIMUMS["ts"], message)
    at = ticks("at", cols.at, MESSAGE_MINIMUMS["at"])
    working = [receiver.alias(RECEIVER), conn.alias(CONN)]
    if cols.down is not None:
        assert crash is not None
        if not resilient:
            refusals.append((crash, cols.down, "a crash row (down set) needs resilient=True"))
        refusals.append((crash & (col(cols.down) < 1), cols.down, "down must be >= 1"))
        working.append(col(cols.down).cast("long").alias(DOWN))
    head = _first([(bad, schema_head(TABLE, name)) for bad, name, _ in refusals])
    reason = _first([(bad, why) for bad, _, why in refusals])
    where = F.concat(F.lit(" (row with "), F.concat_ws(", ", *[
        F.concat(F.lit(f"{name} = "), _shown(col(name)))
        for name in dict.fromkeys(n for _, n in cols.roles())]), F.lit(")"))
    failed = F.raise_error(F.concat(head, quoted_column(F.concat(reason, where))))
    guarded_ts = F.when(head.isNotNull(), failed).otherwise(ts)
    hashed = [col(f.name) for f in df.schema.fields if _hashable(f.dataType)]
    tie = F.xxhash64(*hashed) if hashed else F.lit(0).cast("long")
    out = df.select("*", *working, guarded_ts.alias(TS), at.alias(AT), tie.alias(TIE))
    return with_hash_class(out, CLS, F.col(CONN), classes, crash if copies else None)


def traced(df: DataFrame, kind: str, receiver: str, conn: str, ts: str, at: str,
           down: str, classes: int) -> DataFrame:
    """``df``, rows of a trace file (``timebound stream``'s source), with the working
    columns unchecked: ``KIND`` (the row's ``type``), ``RECEIVER``, ``CONN``, ``TS``,
    ``AT``, ``DOWN``, ``CLS`` (a ``crash`` row in every class). The engine checks
    these rows one by one as the replay does (the shared row adapter), naming the file
    and line of a bad one."""
    from pyspark.sql import functions as F

    out = df.select("*", F.col(kind).alias(KIND), F.col(receiver).alias(RECEIVER),
                    F.col(conn).alias(CONN), F.col(ts).alias(TS), F.col(at).alias(AT),
                    F.col(down).alias(DOWN))
    return with_hash_class(out, CLS, F.col(CONN), classes, F.col(KIND) == "crash")


def placement(cols: Columns, classes: int) -> list[Column]:
    """What a batch's shuffle hashes on: a row's receiver and hash class, as ``RECEIVER``
    and ``CLS`` will hold them, computed from the caller's columns (unchecked: the
    checks run after the shuffle, so only the caller's columns cross it). With crash
    rows (``down``), the receiver alone: a crash stops every class of its receiver."""
    from pyspark.sql import functions as F

    receiver = F.lit(ONE_RECEIVER) if cols.receiver is None else col(cols.receiver).cast(
        "string")
    if cols.down is not None:
        return [receiver]
    return [receiver, hash_class(col(cols.conn).cast("string"), classes)]


def working_names(cols: Columns) -> dict[str, str | None]:
    """Role -> the column that carries it once ``prepared`` ran (the working columns,
    and the caller's ``order`` column): what ``_order`` sorts by."""
    return {"at": AT, "order": cols.order, "ts": TS, "conn": CONN, "tie": TIE}


def added_schema(schema: StructType, streaming: bool) -> StructType:
    from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType

    extra = [StructField("verdict", StringType(), True), StructField("rho", LongType(), True),
             StructField("entries", LongType(), True)]
    if streaming:
        extra.append(StructField("late_arrival", BooleanType(), True))
    return StructType(list(schema.fields) + extra)
