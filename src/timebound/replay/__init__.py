"""Trace replay: trace rows in, protocol decisions out (JSON Lines or Parquet).

Each protocol's command lives in its own module and exposes ``COMMAND``, a
``ReplayCommand``; ``REGISTRY`` lists them in the order ``timebound replay --help``
shows them.
"""

from __future__ import annotations

import importlib

from timebound.replay._framework import ReplayCommand, Replayer, Row, replay_rows

# NOTE (in-progress session): everyone editing this tree now, read /work/main/CONTRIBUTING.md
# first: the house rules, the replay framework API, the test conventions, and: never run
# git commands that change anything (no commit/add/stash/checkout/reset).
#: protocol name -> module that defines ``COMMAND``.
REGISTRY: dict[str, str] = {
    "atmostonce": "timebound.replay.atmostonce",
    "causal": "timebound.replay.causal",
    "merge": "timebound.replay.merge",
    "slotted": "timebound.replay.slotted",
    "stability": "timebound.replay.stability",
}


def load_commands() -> list[ReplayCommand]:
    return [importlib.import_module(module).COMMAND for module in REGISTRY.values()]


__all__ = ["REGISTRY", "ReplayCommand", "Replayer", "Row", "load_commands", "replay_rows"]
