"""Stdin for the network commands: read as bytes, decoded per line, so a line that is
not UTF-8 ends the command with one line ``timebound: error: stdin:N: not valid UTF-8
...`` and exit 2 (``group join`` included: it used to lose its reader thread there and
never exit)."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Iterable, Iterator

from timebound.errors import UsageError
from timebound.net.cli.common import (
    utf8,
)


class StdinLines:
    """Lines of stdin, read by a daemon thread ('' at end of input), so that the loop
    keeps retransmitting while input is slow and exit never waits for stdin.

    The thread hands each line over with ``call_soon_threadsafe`` (no coroutine is
    created in the thread, so a loop that stops first leaves nothing un-awaited), and
    a semaphore keeps at most ``room`` lines read ahead of the consumer.

    Stdin is read as bytes and each line decoded with surrogateescape: a byte that is
    not UTF-8 reaches the consumer as a surrogate (``text_line`` turns it into a
    one-line error naming ``stdin:N``) instead of killing the thread, which left the
    consumer waiting for ever. A read error ends the input."""

    def __init__(self, loop: asyncio.AbstractEventLoop, room: int = 1024,
                 source: Iterable[str | bytes] | None = None) -> None:
        import threading

        self._loop = loop
        self._source: Iterable[str | bytes] = _stdin_bytes() if source is None else source
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._room = threading.Semaphore(room)
        self.thread = threading.Thread(target=self._read, name="stdin", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            for line in self._source:
                if isinstance(line, bytes):
                    line = line.decode("utf-8", "surrogateescape")
                self._room.acquire()
                if not self._post(line):
                    return
        except (OSError, ValueError):  # stdin closed or unreadable: the input ends
            pass
        self._post("")

    def _post(self, line: str) -> bool:
        try:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, line)
        except RuntimeError:  # the loop is closed: the command is ending
            return False
        return True

    async def get(self) -> str:
        line = await self._queue.get()
        self._room.release()
        return line

    async def numbered(self) -> AsyncIterator[tuple[int, str]]:
        """``(N, line)`` for each line, numbered from 1, until the input ends."""
        number = 0
        while True:
            line = await self.get()
            if not line:
                return
            number += 1
            yield number, line

    def stop(self) -> None:
        """End the input here (SIGTERM, SIGINT): the next ``get`` returns ''."""
        self._queue.put_nowait("")


def _stdin_bytes() -> Iterable[bytes]:
    """Stdin's bytes, line by line (nothing when there is no stdin), read from its
    file descriptor: a daemon thread blocked in ``sys.stdin.buffer`` holds the
    buffer's lock, and the interpreter aborts (SIGABRT) when it exits meanwhile (a
    bad line ends ``group join`` while stdin is still open)."""
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):
        return ()
    return _fd_lines(fd)


def _fd_lines(fd: int) -> Iterator[bytes]:
    pending = bytearray()
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        start = len(pending)
        pending += chunk
        end = pending.find(b"\n", start)
        while end >= 0:
            yield bytes(pending[:end + 1])
            del pending[:end + 1]
            end = pending.find(b"\n")
    if pending:
        yield bytes(pending)


def stdin_lines(loop: asyncio.AbstractEventLoop) -> StdinLines:
    return StdinLines(loop)


def text_line(line: str, number: int) -> bytes:
    """Stdin line ``number`` without its line end, as UTF-8 (one line naming
    ``stdin:N`` when it is not UTF-8)."""
    return utf8(line.rstrip("\n").rstrip("\r"), f"stdin:{number}")


def stopped_at(error: UsageError, number: int, done: str) -> UsageError:
    """``error``, raised for stdin line ``number``, ends the input there: the same
    one line, saying what became of the lines before it (``done``) and where to
    go on from."""
    if number <= 1:
        return error
    return UsageError(error.option, f"{error.reason} (the lines before it were {done}: "
                                    f"fix it and go on from line {number})")
