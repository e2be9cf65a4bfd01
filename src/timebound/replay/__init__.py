"""Trace replay: trace rows in, protocol decisions out (JSON Lines or Parquet).

Each protocol's command lives in its own module and exposes ``COMMAND``, a
``ReplayCommand``; ``REGISTRY`` lists them in the order ``timebound replay --help``
shows them.
"""

from __future__ import annotations

import importlib

from timebound.adapters import Row
from timebound.replay._framework import ReplayCommand, replay_rows

#: protocol name -> module that defines ``COMMAND``.
REGISTRY: dict[str, str] = {
    "atmostonce": "timebound.replay.atmostonce",
    "slotted": "timebound.replay.slotted",
    "stability": "timebound.replay.stability",
    "causal": "timebound.replay.causal",
    "merge": "timebound.replay.merge",
}


def load_commands() -> list[ReplayCommand]:
    return [importlib.import_module(module).COMMAND for module in REGISTRY.values()]


__all__ = ["REGISTRY", "ReplayCommand", "Row", "load_commands", "replay_rows"]
