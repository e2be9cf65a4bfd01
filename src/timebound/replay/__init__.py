"""Trace replay: trace rows in, protocol decisions out (JSON Lines or Parquet).

Each protocol's command lives in its own module and exposes ``COMMAND``, a
``ReplayCommand``; ``REGISTRY`` lists them in the order ``timebound replay --help``
shows them.
"""

from __future__ import annotations

import importlib

from timebound.adapters import Row
from timebound.protocols import PROTOCOLS
from timebound.replay._framework import ReplayCommand, replay_rows

#: protocol name -> module that defines ``COMMAND`` (the protocols' registry's order).
REGISTRY: dict[str, str] = {spec.name: spec.replay for spec in PROTOCOLS}


def load_commands() -> list[ReplayCommand]:
    return [importlib.import_module(module).COMMAND for module in REGISTRY.values()]


__all__ = ["REGISTRY", "ReplayCommand", "Row", "load_commands", "replay_rows"]
