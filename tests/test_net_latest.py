"""An ``RpcServer`` with a storage file writes ``latest`` off its event loop
(``net/_latest.py``): every refresh runs in the writer thread, calls keep being
served, a failing disk is counted and retried, and a clean stop leaves the newest
``latest`` on the file."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest

from timebound.core.atmostonce import ReceiverConfig, StableRecord
from timebound.net import RpcClient, RpcServer
from timebound.storage import FileStorage

MS = 1000  # ticks are microseconds


def _config() -> ReceiverConfig:
    return ReceiverConfig("fixed", rho=2000 * MS, gc_every=50 * MS, resilient=True,
                          beta=400 * MS, latest_every=20 * MS)


def test_refreshes_are_written_in_the_writer_thread(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[str] = []
    write = FileStorage.write

    def spy(self: FileStorage, record: StableRecord) -> None:
        threads.append(threading.current_thread().name)
        write(self, record)

    monkeypatch.setattr(FileStorage, "write", spy)
    path = tmp_path / "latest.json"
    server = RpcServer({"echo": lambda p: p}, storage=str(path), receiver=_config(),
                       classes=2)

    async def main() -> dict[str, int | None]:
        async with server:
            async with RpcClient(server.address) as client:
                for i in range(40):
                    assert await client.call("echo", b"%d" % i, timeout=2.0) == b"%d" % i
                    await asyncio.sleep(0.005)
            stats = server.statistics()
        return stats

    stats = asyncio.run(main())
    on_loop = [name for name in threads if not name.startswith("timebound-latest")]
    in_writer = [name for name in threads if name.startswith("timebound-latest")]
    # Only the start (one write per class, before serving) and the final drain at
    # close run on the loop's thread; every refresh while serving ran in the writer.
    assert len(in_writer) >= 10, threads
    assert len(on_loop) <= 2 + 2, threads
    assert stats["storage_errors"] == 0
    for store in (path, tmp_path / "latest.json.1"):
        record = json.loads(store.read_text())
        assert record["latest"] > 0
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".timebound-tmp")]


def test_a_failing_disk_is_counted_and_calls_go_on(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from timebound.errors import StorageError

    failing = {"on": False}
    write = FileStorage.write

    def flaky(self: FileStorage, record: StableRecord) -> None:
        if failing["on"]:
            raise StorageError("disk full")
        write(self, record)

    monkeypatch.setattr(FileStorage, "write", flaky)
    path = tmp_path / "latest.json"
    server = RpcServer({"echo": lambda p: p}, storage=str(path), receiver=_config())

    async def main() -> tuple[int | None, int]:
        async with server:
            async with RpcClient(server.address) as client:
                failing["on"] = True
                await asyncio.sleep(0.2)  # refreshes fail: the durable latest stands
                assert await client.call("echo", b"x", timeout=2.0) == b"x"
                errors = server.statistics()["storage_errors"]
                failing["on"] = False
                before = json.loads(path.read_text())["latest"]
                await asyncio.sleep(0.2)  # refreshes land again
                assert await client.call("echo", b"y", timeout=2.0) == b"y"
                return errors, before

    errors, before = asyncio.run(main())
    assert errors is not None and errors >= 1
    assert json.loads(path.read_text())["latest"] > before
