"""uvloop when installed (the optional ``uvloop`` extra), asyncio's loop otherwise;
``run``, the one way a driver runs its event loop (SIGTERM cancels it cleanly)."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Coroutine
from types import FrameType
from typing import Any, TypeVar

from timebound._safety import Terminated
from timebound.errors import MissingExtra

T = TypeVar("T")


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


def run(main: Coroutine[Any, Any, T], use_uvloop: bool | None = None) -> T:
    """``asyncio.run(main)`` on ``new_event_loop(use_uvloop)``; in the main thread,
    SIGTERM does to it what Ctrl-C does to ``asyncio.run``: it cancels ``main``, every
    task's cleanup runs inside the loop, and ``Terminated`` is raised once the loop has
    closed. (A SIGTERM handler that raises, ``sigterm_raises``, lands at any point of
    the loop's own machinery: tasks then end unretrieved, with their tracebacks on
    stderr, or a cleanup waits for a callback that never runs.) A second SIGTERM
    raises at once."""
    runner = asyncio.Runner(loop_factory=lambda: new_event_loop(use_uvloop))
    if threading.current_thread() is not threading.main_thread():
        with runner:
            return runner.run(main)
    terminated: list[int] = []
    task: asyncio.Task[T] | None = None

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        if terminated:
            raise Terminated()
        terminated.append(signum)
        if task is not None and not task.done():
            task.cancel()
            task.get_loop().call_soon_threadsafe(_nothing)  # wake it from its select

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        with runner:
            task = runner.get_loop().create_task(main)
            if terminated:  # SIGTERM before the task existed: it never starts
                task.cancel()
            try:
                return runner.run(_awaited(task))
            except asyncio.CancelledError:
                if not terminated:
                    raise
    finally:
        signal.signal(signal.SIGTERM, previous)
        if terminated:
            raise Terminated()
    raise AssertionError("unreachable")  # pragma: no cover


async def _awaited(task: asyncio.Task[T]) -> T:
    return await task


def _nothing() -> None:
    pass


def running_loop() -> Any:
    """The running loop, typed ``Any`` for the drivers compiled with mypyc
    (``RpcClient``, ``RpcServer``: ``timebound._compiled``). Compiled code checks what
    a call returns against its annotation, and uvloop's loop differs from asyncio's
    there: its ``remove_reader`` returns None and its ``call_at`` its own handle."""
    return asyncio.get_running_loop()
