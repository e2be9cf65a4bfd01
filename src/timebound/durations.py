"""Wall-clock durations written with their unit: ``300us``, ``250ms``, ``2s``, ``1m``.

One parser for every option that takes a wall-clock duration (trace and simulator
ticks stay plain integers, named as ticks). A duration is a whole number followed by
its unit, no space; the value is returned in microseconds, so every unit converts
exactly. Also the two spellings of a value for people that progress and refusal lines
share: ``readable_duration`` (``5.036ms``) and ``format_bytes`` (``9.2 KiB``).
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable

from timebound.errors import UsageError

#: Microseconds per unit.
UNITS = {"us": 1, "ms": 1_000, "s": 1_000_000, "m": 60_000_000}
_DURATION = re.compile(r"^(\d{1,15})(us|ms|s|m)$")
#: The largest duration taken (about 11.6 days): far beyond any timer, still exact.
MAX_MICROS = 10**12


def parse_duration(text: object, option: str, *, minimum_us: int = 1) -> int:
    """``text`` (``"250ms"``) in microseconds; ``UsageError(option, ...)`` when it is not
    ``<integer><us|ms|s|m>`` in [``minimum_us``, ``MAX_MICROS``]."""
    match = _DURATION.match(text) if isinstance(text, str) else None
    if match is None:
        raise UsageError(option, f"expected a duration with its unit (300us, 250ms, 2s, 1m), "
                                 f"got {text!r}")
    micros = int(match.group(1)) * UNITS[match.group(2)]
    if not minimum_us <= micros <= MAX_MICROS:
        raise UsageError(option, f"must be between {format_duration(minimum_us)} and "
                                 f"{format_duration(MAX_MICROS)}, got {text}")
    return micros


def format_duration(micros: int) -> str:
    """The shortest exact spelling: ``1500`` -> ``1500us``, ``2000`` -> ``2ms``."""
    for unit in ("m", "s", "ms"):
        if micros and micros % UNITS[unit] == 0:
            return f"{micros // UNITS[unit]}{unit}"
    return f"{micros}us"


#: A bare number (the spelling before units): digits, an optional fraction.
_BARE = re.compile(r"^\d{1,15}(\.\d{1,6})?$")


def duration_type(option: str, bare_unit: str, *, minimum_us: int = 1
                  ) -> Callable[[str], int]:
    """An argparse ``type`` for a wall-clock duration option: ``"250ms"`` -> 250000
    (microseconds). A bare number keeps the option's meaning from before units
    (``bare_unit``: ``"us"``, ``"ms"`` or ``"s"``; a fraction is rounded to the
    microsecond) and is deprecated (say so in the option's help: ``duration_help``).
    A bad value is argparse's one-line error naming ``option``."""
    factor = UNITS[bare_unit]

    def parse(text: str) -> int:
        if _BARE.match(text):
            micros = round(float(text) * factor) if "." in text else int(text) * factor
            if not minimum_us <= micros <= MAX_MICROS:
                raise argparse.ArgumentTypeError(
                    f"must be between {format_duration(minimum_us)} and "
                    f"{format_duration(MAX_MICROS)}, got {text} ({text}{bare_unit})")
            return micros
        try:
            return parse_duration(text, option, minimum_us=minimum_us)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(exc.reason) from None

    parse.__name__ = "duration"  # argparse names the type in its messages
    return parse


def duration_help(what: str, default_us: int | None, bare_unit: str) -> str:
    """Help text of a duration option: what it is, its default with its unit, and the
    deprecated bare-number form."""
    default = "none" if default_us is None else format_duration(default_us)
    return (f"{what} (a duration: 300us, 250ms, 2s, 1m; default {default}; "
            f"a bare number is in {bare_unit}, deprecated)")


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
