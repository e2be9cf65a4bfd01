"""Scenario descriptions: named, documented, range-checked parameters.

A ``Scenario`` is a name, a one-line summary, a tuple of ``Param`` (name, doc, default
as the string a user would type after ``--set name=``, kind and allowed range, and
where the default comes from in the paper) and a ``run`` function. ``resolve`` turns
``--set`` strings into typed values, raising ``UsageError`` that names the parameter
and its allowed range (the CLI exits 2 with that one line).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sized
from dataclasses import dataclass, field
from typing import Any

from timebound.errors import UsageError
from timebound.sim._links import parse_delay

#: Signature of ``progress(label, done, total)``: called before each run (``done`` runs
#: finished of ``total``) and once at the end. A progress object may also have a method
#: ``within(done, total, unit)`` for the work inside the current run (``in_run``).
Progress = Callable[[str, int, int], None]


def in_run(progress: Progress | None, done: Callable[[int], int], total: int,
           unit: str) -> Callable[[int], None] | None:
    """The engine's ``tick(now)`` that reports the current run's work to ``progress``:
    ``done(now)`` units of ``total`` (calls, ticks, ...). ``None`` when ``progress``
    takes no such report (a plain function: the sweep's tasks, ``--reproduce``)."""
    within = getattr(progress, "within", None)
    if within is None:
        return None

    def tick(now: int) -> None:
        within(done(now), total, unit)
    return tick


def counted(items: Sized) -> Callable[[int], int]:
    """``done(now)`` for ``in_run``: how many ``items`` there are (calls made so far)."""
    return lambda _now: len(items)


def clocked(start: int, end: int) -> Callable[[int], int]:
    """``done(now)`` for ``in_run``: simulated ticks gone of ``[start, end)``."""
    return lambda now: min(max(now - start, 0), end - start)


@dataclass(frozen=True)
class Param:
    name: str
    doc: str
    default: str
    kind: str = "int"  # int | float | str | choice | bool | intlist | list | delay
    lo: float | None = None
    hi: float | None = None
    choices: tuple[str, ...] = ()
    #: A parameter of an experiment beyond the papers: recorded in ``manifest.json``
    #: only when the scenario's ``experiments`` name that experiment, so the manifests
    #: of the other datasets stay as they were.
    only_for: str | None = None

    def recorded(self, values: Mapping[str, Any]) -> bool:
        """This parameter belongs in the manifest of a dataset with these values."""
        return self.only_for is None or self.only_for in values.get("experiments", ())

    def range_text(self) -> str:
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        if self.kind == "list" and self.choices:
            return "comma list of " + ", ".join(self.choices)
        if self.kind == "bool":
            return "true or false"
        if self.kind == "delay":
            return "constant:D | exponential:MEAN[:MIN] | lognormal:MEDIAN:SIGMA[:MIN] | empirical:v1,..."
        # an int without an upper bound still has to fit the int64 columns of a dataset
        lo = ("-2^63" if self.kind in ("int", "intlist") else "-inf") if self.lo is None \
            else f"{self.lo:g}"
        hi = ("2^63-1" if self.kind in ("int", "intlist") else "inf") if self.hi is None \
            else f"{self.hi:g}"
        what = {"int": "an integer", "float": "a number", "intlist": "a comma list of integers",
                "str": "text"}.get(self.kind, self.kind)
        return f"{what} in [{lo}, {hi}]" if self.kind in ("int", "float", "intlist") else what

    def _bad(self, value: str) -> UsageError:
        return UsageError(f"--set {self.name}", f"must be {self.range_text()}, got {value!r}")

    def _number(self, text: str, value: str) -> float:
        try:
            number: float = int(text) if self.kind in ("int", "intlist") else float(text)
        except ValueError:
            raise self._bad(value) from None
        if not math.isfinite(number) or (self.lo is not None and number < self.lo) or (
                self.hi is not None and number > self.hi):
            raise self._bad(value)  # NaN and inf never pass (manifest.json stays JSON)
        if self.kind in ("int", "intlist") and not -(2**63) <= number < 2**63:
            raise self._bad(value)
        return number

    def parse(self, value: str) -> Any:
        text = value.strip()
        if self.kind in ("int", "float"):
            return self._number(text, value)
        if self.kind == "intlist":
            parts = [p for p in text.split(",") if p.strip()]
            if not parts:
                raise self._bad(value)
            return [int(self._number(p.strip(), value)) for p in parts]
        if self.kind == "choice":
            if text not in self.choices:
                raise self._bad(value)
            return text
        if self.kind == "list":
            parts = [p.strip() for p in text.split(",") if p.strip()]
            if not parts or (self.choices and any(p not in self.choices for p in parts)):
                raise self._bad(value)
            return parts
        if self.kind == "bool":
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise self._bad(value)
        if self.kind == "delay":
            parse_delay(text, f"--set {self.name}")
            return text
        return text


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    params: tuple[Param, ...]
    run: Callable[..., dict[str, Any]]
    #: where the defaults come from, for --list
    source: str = ""
    claims: tuple[dict[str, str], ...] = field(default_factory=tuple)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.params)
        raise UsageError("--set", f"scenario '{self.name}' has no parameter '{name}' "
                                  f"(parameters: {known})")

    def resolve(self, overrides: Mapping[str, str] | None) -> dict[str, Any]:
        values = {p.name: p.parse(p.default) for p in self.params}
        for name, value in (overrides or {}).items():
            values[name] = self.param(name).parse(str(value))
        return values

    def describe(self) -> str:
        lines = [f"{self.name}: {self.summary}"]
        if self.source:
            lines.append(f"  defaults from: {self.source}")
        for p in self.params:
            lines.append(f"  {p.name}={p.default}  ({p.range_text()})")
            lines.append(f"      {p.doc}")
        return "\n".join(lines)
