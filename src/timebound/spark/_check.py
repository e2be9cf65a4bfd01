"""Everything ``at_most_once`` checks on the driver, before any Spark job exists.

Options become the replay's own ``AtMostOnceOptions`` (``timebound.adapters``), so the
ranges and the reasons are those of ``ReceiverConfig`` and of the command line; only
the name changes: a reason that names ``--gc-every`` names the keyword ``gc_every``
here (``UsageError("gc_every", "required here")``).

Columns are read from the DataFrame's schema alone (no job): a column that is missing,
of a type the operator cannot use, or already named like one the operator adds is a
``SchemaError`` of the table ``'DataFrame'`` naming the column, one line.

Then the row checks (``checks``: one list, the rule): a null, an empty string, a ``ts``
below 1 or an ``at`` below 0 -- what ``timebound replay`` refuses -- stops the job. Spark
computes, per row, the index of the first check it fails (``prepared``); the decider,
before it decides a row of its partition or key, writes the first refused row's
``SchemaError`` as ``timebound.sparkutil.carried`` writes errors (``refused``), and
Spark's ``raise_error`` raises that sentence (``failed_guard``): the message a user
reads without ``typed_errors`` is one sentence, ``timebound SchemaError: table
'DataFrame', column 'sent': "ts must not be null (row with user = u1, sent = null, at =
5)"`` (Spark puts ``[USER_RAISED_EXCEPTION]`` before it and ``SQLSTATE: P0001`` after
it), and ``typed_errors`` raises it again as itself. A null reads ``<role> must not be
null``, an empty identifier ``<role> must not be empty``; the row is shown by the
columns the checks read (``described``: not ``order``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from timebound.adapters.atmostonce import AtMostOnceOptions
from timebound.contract import MESSAGE_MINIMUMS
from timebound.errors import SchemaError, UsageError
from timebound.sparkutil import hash_class, with_hash_class

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
#: The index of the first row check a row fails (``prepared``); the sentence of the
#: error a decider refused a row with (``failed_guard``).
BAD, FAILED = PREFIX + "bad", PREFIX + "failed"
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


@dataclass(frozen=True)
class Check:
    """One row check: the rows of the caller's ``column`` (its ``role``) that fail
    ``test`` -- ``null``, ``empty`` (an identifier), ``below`` (``least``) or ``set``
    (a crash row without ``resilient``) -- are refused with ``reason``; ``messages``:
    only message rows (a crash row has no ``conn`` or ``ts``)."""

    role: str
    column: str
    test: str
    least: int = 0
    messages: bool = False

    @property
    def reason(self) -> str:
        return {"null": f"{self.role} must not be null",
                "empty": f"{self.role} must not be empty",
                "below": f"{self.role} must be >= {self.least}",
                "set": "a crash row (down set) needs resilient=True"}[self.test]


def checks(cols: Columns, resilient: bool) -> tuple[Check, ...]:
    """The row checks in the order they are tried (the first a row fails names it):
    what the replay refuses, a null before the range."""
    found = [] if cols.receiver is None else [Check("receiver", cols.receiver, "null"),
                                              Check("receiver", cols.receiver, "empty")]
    found += [Check("conn", cols.conn, "null", messages=True),
              Check("conn", cols.conn, "empty", messages=True),
              Check("ts", cols.ts, "null", messages=True),
              Check("ts", cols.ts, "below", MESSAGE_MINIMUMS["ts"], messages=True),
              Check("at", cols.at, "null"),
              Check("at", cols.at, "below", MESSAGE_MINIMUMS["at"])]
    if cols.down is not None:
        if not resilient:
            found.append(Check("down", cols.down, "set"))
        found.append(Check("down", cols.down, "below", 1))
    return tuple(found)


def described(cols: Columns) -> tuple[str, ...]:
    """The caller's columns a refused row is shown by (the ones the checks read)."""
    return tuple(dict.fromkeys(name for role, name in cols.roles() if role != "order"))


def _text(value: object) -> str:
    """A row's value as a refusal shows it (as Spark casts it to a string): ``null``,
    ``''`` (empty), or the value (the checked roles are strings and integers)."""
    import pandas as pd

    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return "null"
    if isinstance(value, str):
        return value or "''"
    return str(int(value))  # type: ignore[call-overload]


def refused(check: Check, row: Mapping[str, object]) -> SchemaError:
    """The error of a row that fails ``check``: ``row`` maps ``described``'s columns to
    the row's values."""
    where = ", ".join(f"{name} = {_text(value)}" for name, value in row.items())
    return SchemaError(TABLE, check.column, f"{check.reason} (row with {where})")


def _failing(check: Check, crash: Column | None) -> Column:
    value = col(check.column)
    if check.role in ("receiver", "conn"):
        value = value.cast("string")
    if check.test == "null":
        bad = value.isNull()
    elif check.test == "empty":
        bad = value == ""
    elif check.test == "below":
        bad = value < check.least
    else:  # "set"
        bad = value.isNotNull()
    return bad & ~crash if check.messages and crash is not None else bad


#: Each role the engine reads -> its working column; ``_READ_AS``: the type it is read as.
WORKING = {"receiver": RECEIVER, "conn": CONN, "ts": TS, "at": AT, "down": DOWN}
_READ_AS = {"receiver": "string", "conn": "string", "ts": "bigint", "at": "bigint",
            "down": "bigint"}


def reads(cols: Columns, schema: StructType | None = None) -> dict[str, str]:
    """Role (``receiver``, ``conn``, ``ts``, ``at``, ``down`` when given) -> the column
    holding it as the engine reads it once ``prepared`` ran: the caller's own column
    where ``schema`` (the caller's) shows it already of that type (a string receiver or
    conn, a long ts, at or down), so no copy of it is shuffled and sent to Python; else
    the working column ``prepared`` adds (every role without ``schema``)."""
    named = dict(cols.roles())
    out = {}
    for role, working in WORKING.items():
        name = named.get(role)
        if name is None and role != "receiver":
            continue
        if (name is not None and schema is not None
                and schema[name].dataType.simpleString() == _READ_AS[role]):
            out[role] = name
        else:
            out[role] = working
    return out


def prepared(df: DataFrame, cols: Columns, classes: int, *, resilient: bool = False,
             copies: bool = True, read: dict[str, str] | None = None) -> DataFrame:
    """``df`` with the working columns, and ``BAD``: the index in ``checks(cols,
    resilient)`` of the first check the row fails (null: none). The decider refuses
    such a row (``refused``) before it decides any, and Spark raises the sentence it
    writes (``failed_guard``).

    Spark computes only the index: a ``raise_error`` here, with its sentence built
    from the row's values by Spark, doubled the time Spark takes to plan this step
    (7.8 against 3.9 ms, median of 140 plans of a warm session; a stream plans again at
    every micro-batch). A crash row (``down`` not null)
    has no ``conn`` or ``ts`` to check: its ``down`` must be >= 1, and its receivers
    ``resilient``; it goes to every class (``copies``: one copy per class, as a stream
    keys them; else one row, as a batch places whole receivers). ``read``: ``reads``'
    answer (default: every working column); a role it gives a caller's column gets no
    working column."""
    from pyspark.sql import functions as F

    crash = None if cols.down is None else col(cols.down).isNotNull()
    tests = [_failing(check, crash) for check in checks(cols, resilient)]
    bad = F.when(tests[0], F.lit(0))
    for i, test in enumerate(tests[1:], 1):
        bad = bad.when(test, F.lit(i))
    read = reads(cols) if read is None else read
    named = dict(cols.roles())
    working = [F.lit(ONE_RECEIVER).alias(RECEIVER)] if cols.receiver is None else []
    for role, name in read.items():
        if name == WORKING[role] and role in named:
            working.append(col(named[role]).cast(_READ_AS[role]).alias(name))
    hashed = [col(f.name) for f in df.schema.fields if _hashable(f.dataType)]
    tie = F.xxhash64(*hashed) if hashed else F.lit(0).cast("long")
    out = df.select("*", *working, tie.alias(TIE), bad.alias(BAD))
    return with_hash_class(out, CLS, col(read["conn"]), classes, crash if copies else None)


def failed_guard(df: DataFrame) -> DataFrame:
    """``df`` (decided rows) without ``FAILED``, raising ``FAILED``'s sentence
    (``carried``) where it is set: Spark's exception reads that sentence. A filter,
    so no projection of the caller's drops it."""
    from pyspark.sql import functions as F

    failed = F.col(FAILED)
    return df.where(F.when(failed.isNotNull(), F.raise_error(failed)).otherwise(F.lit(True))
                    ).drop(FAILED)


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


def sorted_by(read: Mapping[str, str], order: str | tuple[str, ...] | None,
              tie: bool = True) -> dict[str, str | tuple[str, ...] | None]:
    """Role -> the column ``_order`` sorts by: ``read``'s (``reads``) for ``at``, ``ts``
    and ``conn``, the caller's ``order`` column(s), the row hash ``TIE`` (``tie``)."""
    return {"at": read["at"], "order": order, "ts": read["ts"], "conn": read["conn"],
            "tie": TIE if tie else None}


def working_names(cols: Columns) -> dict[str, str | tuple[str, ...] | None]:
    """What ``_order`` sorts by once ``prepared`` ran with every working column (the
    batch operator)."""
    return sorted_by(WORKING, cols.order)


def added_schema(schema: StructType, streaming: bool) -> StructType:
    from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType

    extra = [StructField("verdict", StringType(), True), StructField("rho", LongType(), True),
             StructField("entries", LongType(), True)]
    if streaming:
        extra.append(StructField("late_arrival", BooleanType(), True))
    return StructType(list(schema.fields) + extra)
