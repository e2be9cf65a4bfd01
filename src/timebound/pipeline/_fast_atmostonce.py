"""The column-wise decider under its former name (``timebound.columnar``)."""

from __future__ import annotations

from timebound.columnar import NAMES, Decided, decide_table, misrouted, path

__all__ = ["NAMES", "Decided", "decide_table", "misrouted", "path"]
