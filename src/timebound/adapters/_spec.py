"""One protocol's row adapter and its typed options, as a pair drivers look up."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from timebound.adapters._options import Values
from timebound.adapters._rows import RowAdapter
from timebound.contract import OPTIONS, TABLES

OptionsT = TypeVar("OptionsT")
A = TypeVar("A", bound=RowAdapter)


@dataclass(frozen=True)
class AdapterSpec(Generic[OptionsT, A]):
    """``options(values)`` validates option values (argparse dests -> values: a command
    line, a dataset row's option columns) into the protocol's typed options;
    ``adapter(options)`` builds a fresh row adapter."""

    protocol: str
    options: Callable[[Values], OptionsT]
    adapter: Callable[[OptionsT], A]

    @property
    def table(self) -> str:
        """The dataset table this protocol reads."""
        return TABLES[self.protocol]

    @property
    def option_columns(self) -> tuple[str, ...]:
        """The option columns (argparse dests) of this protocol, from the contract."""
        return tuple(option.name for option in OPTIONS[self.protocol])

    def build(self, values: Values) -> A:
        return self.adapter(self.options(values))
