"""Storage that cannot be rolled back by accident (Deliver item 4).

- A deleted storage file (or a restart without one) never lets a captured call, or a
  captured channel opening, run again: the new file (memory) holds ``latest = the
  start's clock``, so every call stamped before the start is refused; the creation
  is said in one line on stderr (``net/_stores.py``).
- A bad storage file (types, ranges, far future, not a regular file, too big, too
  deeply nested) stops ``rpc serve`` and ``channel recv`` with one line and exit 2,
  fast, and leaves the file as it was (``storage.FileStorage.read``).
- A failing disk is said once, counted, and its recovery said once
  (``net/_latest.LatestWriter``).
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.test_net_support import TIMEBOUND, start_server, stop
from timebound.core.atmostonce import (
    MemoryStorage,
    Receiver,
    ReceiverConfig,
    StableLatest,
    StableRecord,
)
from timebound.core.atmostonce._estimators import Fixed
from timebound.core.channel import ChannelSender
from timebound.core.rpc import Answered, Policy, Reason, Rejected, RpcCaller, split_incarnation
from timebound.core.rpc._live_messages import REFUSE_TYPE, decode_refusal
from timebound.core.slotted import Kind
from timebound.core.wire import FrameCodec
from timebound.errors import StorageError
from timebound.net import CallRejected, RpcClient, RpcServer
from timebound.net._channel import Channel, ChannelListener
from timebound.net._clock import Clock, seconds
from timebound.net._latest import LatestWriter
from timebound.net._stores import HORIZON, class_storages, open_storages
from timebound.storage import MAX_BYTES, TMP_SUFFIX, FileStorage

MS = 1000  # ticks (µs) per millisecond


def _config() -> ReceiverConfig:
    return ReceiverConfig("fixed", rho=2000 * MS, gc_every=50 * MS, resilient=True,
                          beta=400 * MS, latest_every=20 * MS)


# -- a captured CALL, sent from a raw socket ----------------------------------------


class Spy:
    """A raw UDP caller built from the core: its CALL datagrams can be replayed."""

    def __init__(self, address: tuple[str, int], name: str) -> None:
        self.address = address
        self.clock = Clock()
        self.caller = RpcCaller(name, Policy(interval=seconds(0.02),
                                             give_up_after=seconds(10)), FrameCodec(None))
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.settimeout(0.2)

    def call(self, proc: str, args: bytes, conn: str) -> tuple[bytes, Answered | Rejected]:
        """Send one CALL until an outcome comes back: the CALL frame and the outcome."""
        _, frames = self.caller.call(proc, args, now=self.clock.now(), conn=conn)
        return frames[0], self.exchange(frames)

    def exchange(self, frames: tuple[bytes, ...]) -> Answered | Rejected:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for frame in frames:
                self.sock.sendto(frame, self.address)
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue  # retransmit (a duplicate is harmless)
            out = self.caller.receive(data, now=self.clock.now())
            for outcome in out.outcomes:
                assert isinstance(outcome, (Answered, Rejected)), outcome
                return outcome
            if out.datagrams:  # e.g. an address-validation round trip
                frames = out.datagrams
        raise AssertionError("no outcome in 10 s")

    def close(self) -> None:
        self.sock.close()


def replay(frame: bytes, address: tuple[str, int]) -> tuple[str, int, Reason]:
    """Send a captured CALL from a new socket: the server's REFUSE, decoded."""
    codec = FrameCodec(None)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(0.2)
        for _ in range(50):
            sock.sendto(frame, address)
            try:
                data = sock.recv(65536)
            except TimeoutError:
                continue
            opened = codec.open(data, now=1)
            assert opened is not None
            message = split_incarnation(opened[1])[0]
            assert message[:1] == bytes((REFUSE_TYPE,)), message  # not a REPLY
            return decode_refusal(message)
    raise AssertionError("no answer to the replayed CALL in 10 s")


def stats_of(address: tuple[str, int]) -> dict[str, int]:
    spy = Spy(address, "stats")
    try:
        _, outcome = spy.call("timebound.stats", b"", "stats.1")
    finally:
        spy.close()
    assert isinstance(outcome, Answered), outcome
    counters: dict[str, int] = json.loads(outcome.data)
    return counters


def test_deleted_storage_file_never_runs_a_captured_call_again(tmp_path: Path) -> None:
    """Finding "delete the storage file and restart: a captured pre-restart CALL runs
    a second time; the missing file is silently created"."""
    storage = tmp_path / "latest.json"
    ledger = tmp_path / "ledger"
    env = {"TIMEBOUND_LEDGER": str(ledger)}
    args = ["timebound.net.examples:app", "--storage", str(storage)]
    first, address = start_server(args, env=env)
    spy = Spy(address, "spy")
    try:
        captured, outcome = spy.call("record", b"once", "spy.1")
        assert isinstance(outcome, Answered) and outcome.data == b"once"
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=10) == 0
        assert first.stderr is not None
        said = first.stderr.read().decode()
        assert said.count("timebound: created storage file") == 1  # the first start
        stop(first)
        storage.unlink()  # the operator's "fix"

        second, address2 = start_server(args, env=env)
        try:
            conn, _, reason = replay(captured, address2)  # the captured CALL, again
            assert conn == "spy.1" and reason in (Reason.DOWN, Reason.STALE)
            # A fresh call from a new caller is served (no down window at a start).
            fresh = Spy(address2, "fresh")
            try:
                _, outcome2 = fresh.call("record", b"fresh", "fresh.1")
            finally:
                fresh.close()
            assert isinstance(outcome2, Answered) and outcome2.data == b"fresh"
            stats = stats_of(address2)
            assert stats["down"] + stats["stale"] >= 1 and stats["executions"] >= 1
            assert ledger.read_bytes() == b"once\nfresh\n"  # the old call did not run
            second.send_signal(signal.SIGTERM)
            assert second.wait(timeout=10) == 0
            assert second.stderr is not None
            lines = second.stderr.read().decode().splitlines()
            created = [line for line in lines if "created storage file" in line]
            assert len(created) == 1, lines
            assert created[0].startswith(f"timebound: created storage file {storage}: ")
            assert "are refused" in created[0]
        finally:
            stop(second)
        assert storage.exists()
        assert not [p for p in tmp_path.iterdir() if p.name.endswith(TMP_SUFFIX)]
    finally:
        spy.close()
        stop(first)


def test_restart_without_storage_never_runs_a_captured_call_again() -> None:
    """The same with memory storage: a restarted process that keeps no file."""
    ledger: list[bytes] = []

    def record(payload: bytes) -> bytes:
        ledger.append(payload)
        return payload

    async def one_life(captured: bytes | None) -> bytes:
        async with RpcServer({"record": record}) as server:
            loop = asyncio.get_running_loop()
            if captured is None:
                spy = Spy(server.address, "spy")
                try:
                    captured, outcome = await loop.run_in_executor(
                        None, spy.call, "record", b"once", "spy.1")
                finally:
                    spy.close()
                assert isinstance(outcome, Answered)
            else:
                _, _, reason = await loop.run_in_executor(None, replay, captured,
                                                          server.address)
                assert reason in (Reason.DOWN, Reason.STALE)
                async with RpcClient(server.address) as client:
                    assert await client.call("record", b"fresh", timeout=5) == b"fresh"
                stats = server.statistics()
                assert (stats["down"] or 0) + (stats["stale"] or 0) >= 1
        return captured

    captured = asyncio.run(one_life(None))
    asyncio.run(one_life(captured))
    assert ledger == [b"once", b"fresh"]


def test_deleted_storage_file_never_delivers_a_captured_channel_opening(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The channel listener's OPEN: the same rule (``open_store``)."""
    storage = tmp_path / "latest.json"
    frames: list[bytes] = []

    async def life(expect: list[bytes]) -> list[bytes]:
        got: list[bytes] = []
        listener = ChannelListener(storage=str(storage), receiver=_config())
        async with listener:
            if not frames:  # the first life: an opening stamped after its start
                clock = Clock()
                core = ChannelSender("old", clock.now(), FrameCodec())
                frames.extend(core.send(b"old %d" % n, Kind.R, now=clock.now())[1]
                              for n in range(3))
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                for frame in frames:
                    sock.sendto(frame, listener.address)
            finally:
                sock.close()
            async with Channel(listener.address, give_up=10) as channel:
                await channel.send(b"new", "R")
            async for delivery in listener:
                got.append(delivery.data)
                if delivery.data == b"new":
                    break
        assert got == expect
        return got

    asyncio.run(asyncio.wait_for(life([b"old 0", b"old 1", b"old 2", b"new"]), 30))
    storage.unlink()
    capsys.readouterr()
    asyncio.run(asyncio.wait_for(life([b"new"]), 30))  # the old opening is refused
    err = capsys.readouterr().err
    assert err.count(f"timebound: created storage file {storage}: ") == 1


def test_an_existing_file_is_announced_never_and_its_record_kept(tmp_path: Path) -> None:
    """Only a missing file is created (and said); an existing record is not raised
    to the start's clock (calls stamped between it and the start stay acceptable)."""
    path = tmp_path / "latest.json"
    said: list[str] = []
    now = 10_000_000
    files, stores = open_storages(str(path), 1, _config(), now=now, notice=said.append)
    assert len(said) == 1 and str(path) in said[0] and str(now) in said[0]
    assert files[0].read() == StableRecord(now, 2000 * MS, 1)
    assert stores == files
    files[0].write(StableRecord(5_000_000, 7, 1))  # an older record from a past life
    files, _ = open_storages(str(path), 1, _config(), now=now, notice=said.append)
    assert len(said) == 1
    assert files[0].read() == StableRecord(5_000_000, 7, 1)
    # No file at all: memory holding the start's record, nothing said.
    files, stores = open_storages(None, 3, _config(), now=now, notice=said.append)
    assert files == [] and len(said) == 1
    assert [s.read() for s in stores] == [StableRecord(now, 2000 * MS, 1)] * 3


def test_a_missing_class_file_starts_at_or_above_the_start_and_every_class(
        tmp_path: Path) -> None:
    path = str(tmp_path / "latest.json")
    said: list[str] = []
    files, _ = open_storages(path, 3, _config(), now=1_000, notice=said.append)
    assert [f.read() for f in files] == [StableRecord(1_000, 2000 * MS, 1)] * 3
    assert len(said) == 1 and "(and 2 class files)" in said[0]
    files[0].write(StableRecord(9_000, 7, 1))
    os.unlink(f"{path}.2")
    files, _ = open_storages(path, 3, _config(), now=2_000, notice=said.append)
    latests = [f.read().latest for f in files]  # type: ignore[union-attr]
    assert latests == [9_000, 9_000, 9_000]  # the surviving class's bound
    os.unlink(f"{path}.1")
    files, _ = open_storages(path, 3, _config(), now=20_000, notice=said.append)
    latests = [f.read().latest for f in files]  # type: ignore[union-attr]
    assert latests == [9_000, 20_000, 9_000]  # never below the start when missing
    assert len(said) == 3 and said[-1].count(f"{path}.1") == 1
    assert class_storages(path, 3)[1].read() == StableRecord(20_000, 7, 1)


def test_a_fresh_server_accepts_calls_stamped_after_its_start_at_once() -> None:
    """The start-time rule leaves no ``down`` window for a client whose clock is not
    behind the server's (the recovery writes latest = start + beta before serving)."""
    async def main() -> None:
        async with RpcServer({"echo": lambda p: p}) as server:
            async with RpcClient(server.address) as client:
                assert await client.call("echo", b"x", timeout=5) == b"x"
            stats = server.statistics()
            assert stats["down"] == 0 and stats["stale"] == 0 and stats["early"] == 0

    asyncio.run(main())


# -- bad storage files: one line, exit 2 -----------------------------------------


def _record(latest: object, estimate: object = 1, p: object = 1) -> str:
    return json.dumps({"latest": latest, "estimate": estimate, "p": p})


def _far_future() -> str:
    return _record(time.time_ns() // 1000 + HORIZON + seconds(86400))


def _make(kind: str, path: Path) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "symlink to a record":
        path.with_name("real.json").write_text(_record(5))
        path.symlink_to(path.with_name("real.json"))
    elif kind == "symlink to a fifo":
        os.mkfifo(path.with_name("fifo"))
        path.symlink_to(path.with_name("fifo"))
    elif kind == "large file":  # what a copy of /dev/full looks like: endless zeros
        with open(path, "wb") as handle:
            handle.truncate(1 << 33)  # 8 GiB, sparse
    elif kind == "nested 10^5":
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "nested 2000":
        path.write_text("[" * 2000 + "]" * 2000)  # under MAX_BYTES: the parser's limit
    else:
        path.write_text(BAD_RECORDS[kind]())


BAD_RECORDS: dict[str, Callable[[], str]] = {
    "true": lambda: _record(True),
    "-1": lambda: _record(-1),
    "0": lambda: _record(0),
    "2**63": lambda: _record(2**63),
    "float": lambda: _record(1.5),
    "string": lambda: _record("12"),
    "estimate 0": lambda: _record(5, 0),
    "p true": lambda: _record(5, 1, True),
    "no p": lambda: json.dumps({"latest": 5, "estimate": 1}),
    "a list": lambda: "[1, 2, 3]",
    "not json": lambda: "latest=5",
    "empty": lambda: "",
    "far future": _far_future,
}
KINDS = [*BAD_RECORDS, "fifo", "directory", "symlink to a fifo", "symlink to a record",
         "large file",
         "nested 10^5", "nested 2000"]
#: The hostile storage files, through the command line (each a process).
CLI_KINDS = ["true", "-1", "0", "2**63", "far future", "fifo", "directory",
             "symlink to a fifo", "large file", "nested 10^5", "nested 2000"]


#: What the message says for a kind (the rule that caught it, not a later symptom).
EXPECTED = {"true": "must be an integer", "p true": "must be an integer",
            "-1": "[1, 2**63)", "0": "[1, 2**63)", "2**63": "[1, 2**63)",
            "estimate 0": "[1, 2**63)", "far future": "more than a year ahead",
            "fifo": "not a regular file (a FIFO)",
            "directory": "not a regular file (a directory)",
            "symlink to a fifo": "symbolic link", "symlink to a record": "symbolic link",
            "large file": "8589934592 bytes", "nested 10^5": "200000 bytes",
            "nested 2000": "nested too deeply"}


@pytest.mark.parametrize("kind", KINDS)
def test_a_bad_record_is_a_storage_error_and_the_file_stays(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "latest.json"
    _make(kind, path)
    before = path.read_bytes() if path.is_file() and kind != "large file" else None
    storage = FileStorage(path, horizon=time.time_ns() // 1000 + HORIZON)
    with pytest.raises(StorageError) as caught:
        storage.read()
    message = str(caught.value)
    assert "\n" not in message and str(path) in message
    assert "remove" in message or "give the path" in message  # says what to do
    assert EXPECTED.get(kind, "") in message
    if before is not None:
        assert path.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(TMP_SUFFIX)]


def test_the_largest_record_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "latest.json"
    text = _record(2**63 - 1, 2**63 - 1, 2**63 - 1)
    path.write_text(text + " " * (MAX_BYTES - len(text)))
    assert FileStorage(path).read() == StableRecord(2**63 - 1, 2**63 - 1, 2**63 - 1)
    path.write_text(text + " " * (MAX_BYTES + 1 - len(text)))
    with pytest.raises(StorageError, match="bytes"):
        FileStorage(path).read()


COMMANDS = {
    "rpc serve": ["rpc", "serve", "timebound.net.examples:app", "--port", "0"],
    "channel recv": ["channel", "recv", "--port", "0"],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_bad_storage_file_stops_the_command_with_one_line(tmp_path: Path,
                                                             command: str) -> None:
    """Finding: a storage file whose latest is true, negative or >= 2^63 starts a
    server silently; a copy of /dev/full is read without end; a FIFO hangs; deeply
    nested JSON is an internal error (exit 1). Each is now one line and exit 2."""
    procs: dict[str, tuple[subprocess.Popen[bytes], Path, bytes | None]] = {}
    try:
        for n, kind in enumerate(CLI_KINDS):  # all at once: each start is an interpreter
            folder = tmp_path / str(n)
            folder.mkdir()
            path = folder / "latest.json"
            _make(kind, path)
            before = path.read_bytes() if path.is_file() and kind != "large file" else None
            proc = subprocess.Popen(TIMEBOUND + [*COMMANDS[command], "--storage", str(path)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    stdin=subprocess.DEVNULL)
            procs[kind] = (proc, path, before)
        for kind, (proc, path, before) in procs.items():
            out, err = proc.communicate(timeout=60)
            text = err.decode()
            assert proc.returncode == 2, (kind, text)
            assert text.count("\n") == 1 and text.startswith("timebound: error:"), (kind, text)
            assert str(path) in text and EXPECTED[kind] in text, (kind, text)
            assert out == b"", kind
            if before is not None:
                assert path.read_bytes() == before, kind
            assert not [p for p in path.parent.iterdir()
                        if p.name.endswith(TMP_SUFFIX)], kind
    finally:
        for proc, _, _ in procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()


# -- a failing disk ----------------------------------------------------------------


class FailingDisk(MemoryStorage):
    """Stable storage whose writes fail with ``error`` while ``failing``."""

    def __init__(self) -> None:
        super().__init__()
        self.failing = False
        self.error = errno.ENOSPC

    def write(self, record: StableRecord) -> None:
        if self.failing:
            raise OSError(self.error, os.strerror(self.error))
        super().write(record)


def test_a_failing_disk_is_said_once_counted_and_its_recovery_said_once() -> None:
    """Finding: "when the disk fills, nothing is logged"."""
    disk = FailingDisk()
    receiver = Receiver(Fixed(1000), gc_every=100, start=0,
                        resilience=StableLatest(disk, 50, 10, deferred=True))
    lines: list[str] = []
    writer = LatestWriter([receiver], [disk], log=lines.append)
    durable = receiver.latest
    assert durable == 50
    disk.failing = True
    for now in range(10, 60, 10):  # five refreshes, every one fails (written in place)
        receiver.handle_timer(now=now)
    assert writer.storage_errors == 5 and receiver.latest == durable
    assert lines == [f"timebound: warning: cannot write latest to FailingDisk: [Errno "
                     f"{errno.ENOSPC}] {os.strerror(errno.ENOSPC)}; calls above 50 are "
                     f"refused early until it succeeds"]
    disk.error = errno.EIO
    receiver.handle_timer(now=60)
    assert writer.storage_errors == 6 and len(lines) == 1
    disk.failing = False
    receiver.handle_timer(now=70)
    receiver.handle_timer(now=80)
    assert receiver.latest == 130
    assert lines[1:] == ["timebound: storage FailingDisk is written again: latest 120"]
    disk.failing = True
    receiver.handle_timer(now=90)
    assert len(lines) == 3 and "calls above 130" in lines[2]  # a new episode


def _disk_fills(monkeypatch: pytest.MonkeyPatch) -> dict[str, bool]:
    """Every ``FileStorage.write`` fails with ENOSPC while the switch it returns is
    on (``switch["on"] = True``)."""
    switch = {"on": False}
    write = FileStorage.write

    def full(self: FileStorage, record: StableRecord) -> None:
        if switch["on"]:
            raise OSError(errno.ENOSPC, "No space left on device")
        write(self, record)

    monkeypatch.setattr(FileStorage, "write", full)
    return switch


def test_a_failing_disk_under_a_live_server_is_said_once_on_stderr(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    failing = _disk_fills(monkeypatch)
    path = tmp_path / "latest.json"

    def latest() -> int:
        value: int = json.loads(path.read_text())["latest"]
        return value

    async def main() -> int | None:
        async with RpcServer({"echo": lambda p: p}, storage=str(path),
                             receiver=_config()) as server:
            async with RpcClient(server.address) as client:
                failing["on"] = True
                while (server.statistics()["storage_errors"] or 0) < 3:
                    await asyncio.sleep(0.02)  # refreshes fail, every 20 ms
                assert await client.call("echo", b"x", timeout=2.0) == b"x"
                errors = server.statistics()["storage_errors"]
                before = latest()
                failing["on"] = False
                while latest() == before:  # the next refresh lands
                    await asyncio.sleep(0.02)
                return errors

    capsys.readouterr()
    errors = asyncio.run(asyncio.wait_for(main(), 20))
    assert errors is not None and errors >= 3
    err = capsys.readouterr().err.splitlines()
    warnings = [line for line in err if "warning: cannot write latest" in line]
    assert len(warnings) == 1 and str(path) in warnings[0], err
    assert "No space left on device" in warnings[0]
    assert len([line for line in err if "is written again" in line]) == 1, err


def test_stats_answers_while_a_full_disk_refuses_every_call(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk stays full past ``latest``: every call is refused ``early`` (nothing
    above the durable ``latest`` is accepted), yet ``timebound.stats`` answers, with
    the failures counted ("callers see early and rpc stats is refused")."""
    failing = _disk_fills(monkeypatch)
    config = ReceiverConfig("fixed", rho=2000 * MS, gc_every=50 * MS, resilient=True,
                            beta=100 * MS, latest_every=20 * MS)

    async def main() -> dict[str, Any]:
        async with RpcServer({"echo": lambda p: p}, storage=str(tmp_path / "l.json"),
                             receiver=config) as server:
            async with RpcClient(server.address) as client:
                failing["on"] = True
                await asyncio.sleep(0.3)  # well past the last durable latest
                with pytest.raises(CallRejected) as caught:
                    await client.call("echo", b"x", timeout=1.0)
                assert caught.value.reason == "early"
                stats: dict[str, Any] = json.loads(
                    await client.call("timebound.stats", timeout=1.0))
                return stats

    stats = asyncio.run(asyncio.wait_for(main(), 20))
    assert stats["storage_errors"] >= 3 and stats["early"] >= 1
