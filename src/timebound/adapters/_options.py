"""Typed options from a mapping of option values (argparse dests -> values).

Every driver names a protocol's options the same way: the replay's command line
(``vars(namespace)``), a row of a dataset's option columns, a streaming query's
settings. ``require`` and ``forbid`` check them against the contract's documented
ranges and raise a ``UsageError`` naming the command-line flag, so a bad value reads
the same whichever driver met it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from timebound.contract import INT64_MAX, INT64_MIN, OPTION_LIMITS
from timebound.errors import UsageError

#: Option values by argparse dest (missing or None: not given).
Values = Mapping[str, Any]


def flag(dest: str) -> str:
    """``gc_every`` -> ``--gc-every``."""
    return "--" + dest.replace("_", "-")


def given(values: Values, dest: str) -> bool:
    """The option is set (``None`` and ``False`` are "not given")."""
    value = values.get(dest)
    return value is not None and value is not False


def require(values: Values, dest: str, *, minimum: int | None = None) -> int:
    """A numeric option the mode needs: present, >= minimum, within its range."""
    value = values.get(dest)
    if value is None:
        raise UsageError(flag(dest), "required here")
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(flag(dest), f"expected an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise UsageError(flag(dest), f"must be >= {minimum}, got {value}")
    low, high = OPTION_LIMITS.get(dest, (INT64_MIN, INT64_MAX))
    if not low <= value <= high:
        raise UsageError(flag(dest), f"must be in [{low}, {high}], got {value}")
    return int(value)


def optional(values: Values, dest: str, *, minimum: int | None = None) -> int | None:
    """A numeric option that may be left out (``None``)."""
    return None if values.get(dest) is None else require(values, dest, minimum=minimum)


def forbid(values: Values, dests: Iterable[str], why: str) -> None:
    """Options the mode does not use must not be given."""
    for dest in dests:
        if given(values, dest):
            raise UsageError(flag(dest), f"not used {why}")


def choice(values: Values, dest: str, choices: tuple[str, ...], default: str) -> str:
    """A string option from a fixed set (``default`` when not given)."""
    value = values.get(dest)
    if value is None:
        return default
    if value not in choices:
        raise UsageError(flag(dest), f"expected one of {', '.join(choices)}, got {value!r}")
    return str(value)
