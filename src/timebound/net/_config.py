"""``rpc serve --config FILE``: the server's options from a TOML file.

The file holds the same keys as the command's flags, without the dashes in front,
spelled with dashes or underscores (``gc-every`` or ``gc_every``): a flag is a boolean
(``no-uvloop = true``), a duration a string with its unit as on the command line
(``rho = "300s"``; a bare number, ``rho = 300`` or ``rho = "300"``, is refused as there,
showing it with each unit), a count an integer, a path or name a string. A flag given on
the command line overrides the file; the file overrides the defaults. An unknown key,
a value of the wrong type or out of range is one line naming the file and the key
(``timebound: error: serve.toml: beta: ...``), including the ranges checked after
parsing (``ConfigSpec.blame``).

How: ``ConfigSpec.of(parser)`` records every option's default and replaces it with
``argparse.SUPPRESS``, so the parsed namespace holds only the flags actually given;
``ConfigSpec.apply`` then adds the file's values and the defaults for the rest.
"""

from __future__ import annotations

import argparse
import tomllib
from dataclasses import dataclass
from typing import Any

from timebound.errors import UsageError

#: Options that are not server settings (never read from the file).
_NOT_KEYS = frozenset({"help", "config", "verbose", "quiet"})


@dataclass(frozen=True, slots=True)
class _Option:
    flag: str  # the long spelling, ``--gc-every``
    default: Any
    kind: str  # "flag", "duration", "int", "float" or "str"
    convert: Any  # the option's argparse type (a duration's parser), or None
    choices: tuple[Any, ...] | None


def _kind(action: argparse.Action) -> str:
    if action.nargs == 0:
        return "flag"
    if getattr(action.type, "__name__", "") == "duration":
        return "duration"
    if action.type is int:
        return "int"
    if action.type is float:
        return "float"
    return "str"


@dataclass(frozen=True, slots=True)
class ConfigSpec:
    """The options of one command that ``--config`` may set, by ``dest``."""

    options: dict[str, _Option]

    @classmethod
    def of(cls, parser: argparse.ArgumentParser) -> ConfigSpec:
        """The spec of ``parser``'s options (call once it has them all); their
        defaults become ``SUPPRESS`` (``apply`` restores them)."""
        options: dict[str, _Option] = {}
        for action in parser._actions:
            if not action.option_strings or action.dest in _NOT_KEYS:
                continue
            flag = max(action.option_strings, key=len)
            options[action.dest] = _Option(
                flag, action.default, _kind(action), action.type,
                tuple(action.choices) if action.choices is not None else None)
            action.default = argparse.SUPPRESS
        return cls(options)

    def apply(self, args: argparse.Namespace, path: str | None) -> dict[str, str]:
        """Complete ``args``: the command line's flags, else ``path``'s values (if
        given), else the defaults. Returns ``{flag: "FILE: key"}`` of the values the
        file set (``blame``)."""
        given = vars(args)
        from_file: dict[str, str] = {}
        if path is not None:
            for dest, (key, value) in self._read(path).items():
                if dest not in given:
                    given[dest] = value
                    from_file[self.options[dest].flag] = f"{path}: {key}"
        for dest, option in self.options.items():
            given.setdefault(dest, option.default)
        return from_file

    @staticmethod
    def blame(exc: UsageError, from_file: dict[str, str]) -> UsageError:
        """``exc`` renamed after the file's key when the file set its option."""
        where = from_file.get(exc.option)
        return exc if where is None else UsageError(where, exc.reason)

    def _read(self, path: str) -> dict[str, tuple[str, Any]]:
        try:
            with open(path, "rb") as handle:
                table = tomllib.load(handle)
        except OSError as exc:
            raise UsageError("--config", f"cannot read {path}: {exc.strerror or exc}") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise UsageError("--config", f"{path}: not valid TOML: {exc}") from None
        values: dict[str, tuple[str, Any]] = {}
        for key, value in table.items():
            dest = key.replace("-", "_")
            option = self.options.get(dest)
            if option is None:
                raise UsageError(f"{path}: {key}", "unknown key (the keys are the "
                                 "command's options without their dashes: "
                                 "'timebound rpc serve --help')")
            if dest in values:
                raise UsageError(f"{path}: {key}",
                                 f"given twice (as {values[dest][0]!r} too)")
            values[dest] = (key, self._value(option, value, f"{path}: {key}"))
        return values

    @staticmethod
    def _value(option: _Option, value: Any, where: str) -> Any:
        """``value`` of the file, checked against ``option``'s type."""
        kind = option.kind
        wanted = {"flag": "true or false", "duration": 'a duration string ("250ms", "2s")',
                  "int": "an integer", "float": "a number", "str": "a string"}[kind]
        if kind == "flag":
            ok = isinstance(value, bool)
        elif kind == "int":
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif kind == "float" or (kind == "duration" and not isinstance(value, str)):
            ok = isinstance(value, int | float) and not isinstance(value, bool)
        else:
            ok = isinstance(value, str)
        if not ok:
            raise UsageError(where, f"expected {wanted}, got {type(value).__name__} "
                                    f"{value!r}")
        if kind == "duration":
            try:  # a number is refused as a bare number is on the command line
                value = option.convert(value if isinstance(value, str) else str(value))
            except argparse.ArgumentTypeError as exc:
                quoted = "" if isinstance(value, str) else " (a TOML string: \"300s\")"
                raise UsageError(where, f"{exc}{quoted}") from None
        elif kind == "float":
            value = float(value)
        if option.choices is not None and value not in option.choices:
            raise UsageError(where, f"expected one of {', '.join(map(str, option.choices))}, "
                                    f"got {value!r}")
        return value
