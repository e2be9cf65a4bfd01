"""A ``ChannelListener`` with a storage file writes SCMP's ``latest`` off its event
loop (``net/_latest.py``), as ``RpcServer`` does: while channels exchange messages
every refresh runs in the writer thread, a clean stop (``async with`` or the
synchronous ``close()``) leaves the newest ``latest`` in the file and no writer
thread behind, and a failing disk is counted while the listener keeps serving.
Loopback only; each test is bounded (seconds) and closes what it opens."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from timebound.core.atmostonce import ReceiverConfig, StableRecord
from timebound.core.channel import Delivery
from timebound.net._channel import Channel, ChannelListener
from timebound.storage import FileStorage

MS = 1000  # ticks are microseconds
BETA = 400 * MS
EVERY = 20 * MS


def _config() -> ReceiverConfig:
    return ReceiverConfig("fixed", rho=2000 * MS, gc_every=50 * MS, resilient=True,
                          beta=BETA, latest_every=EVERY)


class Spy:
    """Wraps ``FileStorage.write``: records each write's thread, can slow the writes
    made in a worker thread (so that one is in flight when the listener closes) and
    can make them fail with ``OSError``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, slow: float = 0.0) -> None:
        self.loop_thread = threading.current_thread()  # asyncio.run runs the loop here
        self.serving = False
        self.failing = False
        self.slow = slow
        self.on_loop_while_serving: list[int] = []
        self.workers: list[threading.Thread] = []
        write = FileStorage.write

        def spy(storage: FileStorage, record: StableRecord) -> None:
            thread = threading.current_thread()
            if thread is self.loop_thread:
                if self.serving:
                    self.on_loop_while_serving.append(record.latest)
            else:
                self.workers.append(thread)
                time.sleep(self.slow)
            if self.failing:
                raise OSError(28, "No space left on device")
            write(storage, record)

        monkeypatch.setattr(FileStorage, "write", spy)


def _on_file(path: Path) -> int:
    latest: int = json.loads(path.read_text())["latest"]
    return latest


def _loop_errors() -> list[dict[str, Any]]:
    """Every exception the running loop reports (a callback that raised)."""
    errors: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: errors.append(ctx))
    return errors


async def _exchange(listener: ChannelListener, got: list[Delivery[Any]], *,
                    channels: int, messages: int) -> list[int]:
    """``channels`` channels in turn, each sending ``messages`` reliable messages
    over about 0.2 s; the timestamps of their openings (all accepted)."""
    opened = []
    for _ in range(channels):
        async with Channel(listener.address, min_rto=0.01, give_up=10) as channel:
            opened.append(channel.core.ts)
            for n in range(messages):
                await channel.send(b"%d" % n, "R")
                await asyncio.sleep(0.2 / messages)
    deadline = time.monotonic() + 5
    while len(got) < channels * messages and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert len(got) == channels * messages
    return opened


def _collecting(listener: ChannelListener, got: list[Delivery[Any]]) -> asyncio.Future[None]:
    """A task appending every delivery of ``listener`` to ``got`` until it closes."""
    async def collect() -> None:
        async for d in listener:
            got.append(d)
    return asyncio.ensure_future(collect())


def _check_stopped(spy: Spy, path: Path, opened: list[int], before_close: int) -> None:
    on_file = _on_file(path)
    assert on_file >= max(opened)
    # the refresh due at the close (or an earlier one) wanted at least this: the
    # newest latest was not left unwritten
    assert on_file >= (before_close // EVERY) * EVERY + BETA
    assert spy.workers, "no write ran in the writer thread"
    assert not [t for t in spy.workers if t.is_alive()], "a writer thread is left running"
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".timebound-tmp")]


def test_async_with_writes_latest_in_the_worker_and_leaves_the_newest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = Spy(monkeypatch, slow=0.03)
    path = tmp_path / "latest.json"
    listener = ChannelListener(storage=str(path), receiver=_config())

    async def main() -> tuple[list[int], int, dict[str, Any], list[dict[str, Any]]]:
        errors = _loop_errors()
        got: list[Delivery[Any]] = []
        async with listener:
            spy.serving = True
            reader = _collecting(listener, got)
            opened = await _exchange(listener, got, channels=3, messages=20)
            spy.serving = False
            before_close = listener.clock.now()
        await asyncio.wait_for(reader, 5)
        return opened, before_close, listener.statistics(), errors

    opened, before_close, stats, errors = asyncio.run(asyncio.wait_for(main(), 30))
    assert spy.on_loop_while_serving == [], "latest was written on the loop's thread"
    assert len(spy.workers) >= 5
    assert stats["opens"] == 3 and stats["storage_errors"] == 0
    assert errors == []
    _check_stopped(spy, path, opened, before_close)


def test_synchronous_close_leaves_the_newest_latest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = Spy(monkeypatch, slow=0.03)
    path = tmp_path / "latest.json"
    listener = ChannelListener(storage=str(path), receiver=_config())

    async def main() -> tuple[list[int], int, dict[str, Any], list[dict[str, Any]]]:
        errors = _loop_errors()
        got: list[Delivery[Any]] = []
        await listener.start()
        try:
            spy.serving = True
            reader = _collecting(listener, got)
            opened = await _exchange(listener, got, channels=2, messages=20)
            spy.serving = False
            before_close = listener.clock.now()
            listener.close()  # synchronous: on return the newest latest is on the file
            _check_stopped(spy, path, opened, before_close)
            await asyncio.wait_for(reader, 5)
            await listener.wait_closed()
            await asyncio.sleep(0.05)  # the writes' loop callbacks run: nothing raises
        finally:
            listener.close()
        return opened, before_close, listener.statistics(), errors

    opened, before_close, stats, errors = asyncio.run(asyncio.wait_for(main(), 30))
    assert spy.on_loop_while_serving == [], "latest was written on the loop's thread"
    assert stats["opens"] == 2 and stats["storage_errors"] == 0
    assert errors == []
    _check_stopped(spy, path, opened, before_close)


def test_a_failing_disk_is_counted_and_the_listener_keeps_serving(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = Spy(monkeypatch)
    path = tmp_path / "latest.json"
    listener = ChannelListener(storage=str(path), receiver=_config())

    async def main() -> tuple[int, int, int, dict[str, Any], list[dict[str, Any]]]:
        errors = _loop_errors()
        got: list[Delivery[Any]] = []
        async with listener:

            reader = _collecting(listener, got)
            async with Channel(listener.address, min_rto=0.01, give_up=10) as channel:
                await channel.send(b"before", "R")
                spy.failing = True
                for n in range(20):  # refreshes fail: the durable latest stands
                    await channel.send(b"%d" % n, "R")
                    await asyncio.sleep(0.01)
                failed = listener.statistics()["storage_errors"]
                spy.failing = False
                before = _on_file(path)
                await asyncio.sleep(0.2)  # refreshes land again
                after = _on_file(path)
                await channel.send(b"after", "R")
            # a new opening is accepted once writes land again
            async with Channel(listener.address, min_rto=0.01, give_up=10) as second:
                await second.send(b"second", "R")
            deadline = time.monotonic() + 5
            while len(got) < 23 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert len(got) == 23
            spy.failing = True  # the stop's writes fail too: counted, not raised
        await asyncio.wait_for(reader, 5)
        return failed, before, after, listener.statistics(), errors

    failed, before, after, stats, errors = asyncio.run(asyncio.wait_for(main(), 30))
    assert failed >= 1
    assert after > before
    assert stats["storage_errors"] >= failed
    assert stats["opens"] == 2
    assert errors == []
    assert not [t for t in spy.workers if t.is_alive()]
