"""uvloop when installed (the optional ``uvloop`` extra), asyncio's loop otherwise."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from timebound.errors import MissingExtra


def _uvloop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def install_uvloop() -> bool:
    """Whether uvloop is installed (then ``new_event_loop`` uses it)."""
    return _uvloop_factory() is not None


def new_event_loop(use_uvloop: bool | None = None) -> asyncio.AbstractEventLoop:
    """A new event loop: uvloop if installed (or if ``use_uvloop``), else asyncio's."""
    factory = _uvloop_factory() if use_uvloop is not False else None
    if use_uvloop and factory is None:
        raise MissingExtra("the uvloop event loop", "uvloop", "uvloop")
    return factory() if factory is not None else asyncio.new_event_loop()


def run(main: object, use_uvloop: bool | None = None) -> object:
    """``asyncio.run`` on ``new_event_loop(use_uvloop)``."""
    with asyncio.Runner(loop_factory=lambda: new_event_loop(use_uvloop)) as runner:
        return runner.run(main)  # type: ignore[arg-type]


def running_loop() -> Any:
    """The running loop, typed ``Any`` for the drivers compiled with mypyc
    (``RpcClient``, ``RpcServer``: ``timebound._compiled``). Compiled code checks what
    a call returns against its annotation, and uvloop's loop differs from asyncio's
    there: its ``remove_reader`` returns None and its ``call_at`` its own handle."""
    return asyncio.get_running_loop()
