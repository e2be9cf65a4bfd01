"""Typed errors shared by every layer of timebound.

This is a leaf module: it imports nothing of ours, so ``timebound.core`` may use it.

Two families, after h11, so a caller can ``except`` one of them: ``CallerError``, the
*local* caller misused an API or the command line (``ProtocolUsageError``,
``UsageError``, ``MissingExtra``), and ``InputError``, bytes from *elsewhere* are
garbage (``MalformedDatagram`` from a peer, ``TraceError`` for a trace file,
``SchemaError`` for a dataset). ``StorageError`` (the machine's stable storage) and the
drivers' own errors (an RPC's outcome, a failed Spark query) are ``TimeboundError``s of
neither family. Every command-line failure that is the user's doing exits with status
2 and one line.
"""

from __future__ import annotations


class TimeboundError(Exception):
    """Base class of every error timebound raises on purpose."""


class CallerError(TimeboundError):
    """The local caller got something wrong: an option, an API precondition, a missing
    dependency. Retrying the same call fails the same way; fix the call."""


class InputError(TimeboundError):
    """Bytes from elsewhere -- a peer's datagram, a trace file, a dataset -- break the
    protocol or the contract. A network driver counts and drops them; a command names
    where they are."""


class UsageError(CallerError):
    """A command-line option is missing, meaningless or out of range (exit status 2)."""

    def __init__(self, option: str, reason: str) -> None:
        self.option = option
        self.reason = reason
        super().__init__(f"{option}: {reason}")


class TraceError(InputError):
    """A trace row is malformed or breaks a rule of its replay contract (exit status 2).

    ``line`` is 1-based: the line of a JSON Lines file, the row of a Parquet file.
    """

    def __init__(self, source: str, line: int, field: str, reason: str) -> None:
        self.source = source
        self.line = line
        self.field = field
        self.reason = reason
        super().__init__(f"{source}:{line}: field '{field}': {reason}")


class SchemaError(InputError):
    """A dataset table is missing a column or has one of the wrong type."""

    def __init__(self, table: str, column: str, reason: str) -> None:
        self.table = table
        self.column = column
        self.reason = reason
        super().__init__(f"table '{table}', column '{column}': {reason}")


class ProtocolUsageError(CallerError):
    """The local caller broke a core API precondition (e.g. time went backwards)."""


class MalformedDatagram(InputError):
    """A peer sent bytes that do not decode as a message of the protocol."""


class StorageError(TimeboundError):
    """Stable storage could not be read or written."""


class MissingExtra(CallerError):
    """A command needs an optional dependency group (a pip "extra") that is not installed."""

    def __init__(self, command: str, extra: str, module: str) -> None:
        self.command = command
        self.extra = extra
        self.module = module
        super().__init__(f"{command} needs {module}, which is not installed: "
                         f"pip install 'timebound[{extra}]'")
