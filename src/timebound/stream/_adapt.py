"""Handing a restored core back to the shared row adapter, and taking it out again.

The streaming processors keep each key's core in the state store between
micro-batches; the row adapters of ``timebound.adapters`` create their cores
themselves on first use. These helpers install a restored core (and the clock the
adapter checks ``at`` against) and read them back after the batch. They use the
adapters' public hooks (``node``/``clock``/``adopt``, ``merger``/``drain``) when the
adapter has them, otherwise the adapter's own fields: this is the only module that
knows how an adapter stores its cores.
"""

from __future__ import annotations

from typing import Any

from timebound.core.atmostonce import ClassifiedReceiver


def atmostonce_node(adapter: Any, name: str) -> ClassifiedReceiver | None:
    if hasattr(adapter, "node"):
        node = adapter.node(name)
    else:
        node = adapter._nodes.get(name)
    assert node is None or isinstance(node, ClassifiedReceiver)
    return node


def atmostonce_clock(adapter: Any, name: str) -> int | None:
    if hasattr(adapter, "clock"):
        value = adapter.clock(name)
    else:
        value = adapter._last_at.get(name)
    return None if value is None else int(value)


def atmostonce_adopt(adapter: Any, name: str, node: ClassifiedReceiver, clock: int) -> None:
    if hasattr(adapter, "adopt"):
        adapter.adopt(name, node, clock)
    else:
        adapter._nodes[name] = node
        adapter._last_at[name] = clock
