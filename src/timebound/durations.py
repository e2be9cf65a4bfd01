"""Wall-clock durations written with their unit: ``300us``, ``250ms``, ``2s``, ``1m``,
``1h``.

One grammar for every option that takes a wall-clock duration (trace and simulator
ticks stay plain integers, named as ticks): a whole number followed by its unit, no
space, the unit one of ``us``, ``ms``, ``s``, ``m``, ``h``; the value is returned in
microseconds, so every unit converts exactly. A bare number is refused (no unit is
guessed): the one-line error shows the value with each unit the option's range allows
(``300us, 300ms, 300s or 300m``). An old option name ending in ``-ms`` carries its unit
in its name and still takes a bare whole number of milliseconds (``ms_alias_type``).
Also the two spellings of a value for people that progress and refusal lines share:
``readable_duration`` (``5.036ms``) and ``format_bytes`` (``9.2 KiB``).
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable

from timebound.errors import UsageError

#: Microseconds per unit.
UNITS = {"us": 1, "ms": 1_000, "s": 1_000_000, "m": 60_000_000, "h": 3_600_000_000}
_DURATION = re.compile(r"^(\d{1,15})(us|ms|s|m|h)$")
#: The largest duration taken (about 11.6 days): far beyond any timer, still exact.
MAX_MICROS = 10**12
#: The metavar of every duration option.
METAVAR = "DURATION"


def parse_duration(text: object, option: str, *, minimum_us: int = 1,
                   maximum_us: int = MAX_MICROS) -> int:
    """``text`` (``"250ms"``) in microseconds; ``UsageError(option, ...)`` when it is not
    ``<integer><us|ms|s|m|h>`` in [``minimum_us``, ``maximum_us``] (a bare number: the
    reason shows it with each unit in that range, ``bare_number_reason``)."""
    if isinstance(text, str) and _BARE.match(text):
        raise UsageError(option, bare_number_reason(text, minimum_us, maximum_us))
    match = _DURATION.match(text) if isinstance(text, str) else None
    if match is None:
        raise UsageError(option, f"expected a duration with its unit (300us, 250ms, 2s, "
                                 f"1m, 1h), got {text!r}")
    micros = int(match.group(1)) * UNITS[match.group(2)]
    if not minimum_us <= micros <= maximum_us:
        raise UsageError(option, f"must be between {_spelled(minimum_us)} and "
                                 f"{format_duration(maximum_us)}, got {text}")
    return micros


def format_duration(micros: int) -> str:
    """The shortest exact spelling: ``1500`` -> ``1500us``, ``2000`` -> ``2ms``,
    ``7_200_000_000`` -> ``2h``."""
    for unit in ("h", "m", "s", "ms"):
        if micros and micros % UNITS[unit] == 0:
            return f"{micros // UNITS[unit]}{unit}"
    return f"{micros}us"


#: A bare number: digits, an optional fraction.
_BARE = re.compile(r"^\d{1,15}(\.\d{1,6})?$")


def bare_number_reason(text: str, minimum_us: int = 1, maximum_us: int = MAX_MICROS
                       ) -> str:
    """Why a bare number is refused: ``a duration needs its unit: 300us, 300ms, 300s or
    300m``, each spelling one that lies in [``minimum_us``, ``maximum_us``] (a fraction
    in the next smaller unit: ``1.5`` -> ``1500ms``); the range when none does."""
    number = float(text)
    spelled = []
    for unit, size in UNITS.items():
        scaled = number * size
        micros = round(scaled)
        if abs(scaled - micros) > 1e-6 or not minimum_us <= micros <= maximum_us:
            continue
        spelled.append(f"{int(number)}{unit}" if number.is_integer()
                       else format_duration(micros))
    if not spelled:
        return (f"a duration needs its unit (us, ms, s, m or h), between "
                f"{_spelled(minimum_us)} and {format_duration(maximum_us)}, got {text}")
    listed = spelled[0] if len(spelled) == 1 else \
        ", ".join(spelled[:-1]) + " or " + spelled[-1]
    return f"a duration needs its unit: {listed}"


def duration_type(option: str, *, minimum_us: int = 1, maximum_us: int = MAX_MICROS
                  ) -> Callable[[str], int]:
    """An argparse ``type`` for a wall-clock duration option: ``"250ms"`` -> 250000
    (microseconds), in [``minimum_us``, ``maximum_us``]. A bare number is refused
    (``bare_number_reason``); any bad value is argparse's one-line error naming
    ``option``."""

    def parse(text: str) -> int:
        try:
            return parse_duration(text, option, minimum_us=minimum_us,
                                  maximum_us=maximum_us)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(exc.reason) from None

    parse.__name__ = "duration"  # argparse names the type in its messages
    return parse


def ms_alias_type(option: str, *, minimum_us: int = 1, maximum_us: int = MAX_MICROS
                  ) -> Callable[[str], int]:
    """The ``type`` of an old option name ending in ``-ms``: its unit is in its name,
    so a bare whole number is milliseconds (``"5"`` -> 5000); a value with its unit is
    taken as by ``duration_type``."""
    strict = duration_type(option, minimum_us=minimum_us, maximum_us=maximum_us)

    def parse(text: str) -> int:
        return strict(f"{text}ms" if text.isdigit() and len(text) <= 15 else text)

    parse.__name__ = "duration"
    return parse


def duration_help(what: str, default_us: int | None, *, minimum_us: int = 1,
                  maximum_us: int = MAX_MICROS, default: str | None = None) -> str:
    """Help text of a duration option: what it is, the grammar, its range and its
    default (``default`` spells one that is not a duration, ``none: ...``, or is
    ``required``)."""
    if default is None:
        default = "none" if default_us is None else _spelled(default_us)
    tail = default if default == "required" else f"default {default}"
    return (f"{what} (a duration with its unit: us, ms, s, m or h, e.g. 250ms; "
            f"{_spelled(minimum_us)}..{format_duration(maximum_us)}; {tail})")


def _spelled(micros: int) -> str:
    """``format_duration``, with zero as ``0s``."""
    return format_duration(micros) if micros else "0s"


def ms_alias_help(name: str) -> str:
    """Help text of an old ``-ms`` name of the option ``name``."""
    return (f"the old name of {name}, deprecated: the same value, or a bare whole "
            f"number of milliseconds (its unit is in its name); default: as {name}")


def format_eta(seconds: float) -> str:
    """A time estimate at a glance, rounded up to the second: ``80`` -> ``1m20s``,
    ``3725`` -> ``1h02m``, ``9`` -> ``9s`` (progress lines of simulate, sweep and
    pipeline)."""
    s = max(0, int(math.ceil(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 100 * 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def readable_duration(micros: int) -> str:
    """A duration in microseconds for people: ``5036`` -> ``5.036ms``, ``20000`` ->
    ``20ms``, ``1500000`` -> ``1.5s``."""
    for unit, size in (("s", 1_000_000), ("ms", 1000)):
        if abs(micros) >= size:
            return f"{micros / size:.6f}".rstrip("0").rstrip(".") + unit
    return f"{micros}us"


def format_bytes(n: float) -> str:
    """A size for people: ``9416`` -> ``9.2 KiB``, ``512`` -> ``512 B``."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"
