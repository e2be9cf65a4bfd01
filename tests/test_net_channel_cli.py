"""``timebound channel recv|send`` as processes on loopback:
through ``timebound net proxy`` with loss, duplication and reordering; a receiver
killed with SIGKILL and restarted from its storage file refuses the replayed opening
of the old session; bad input exits 2 with one line. Every process is killed."""

from __future__ import annotations

import asyncio
import json
import os
import re
import select
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.test_net_channel_core import check_rules
from tests.test_net_support import TIMEBOUND, stop
from timebound.core.channel import ChannelSender
from timebound.core.slotted import Kind
from timebound.core.wire import FrameCodec
from timebound.net._channel import Channel
from timebound.net._clock import Clock

pytestmark = pytest.mark.waits


def start(args: list[str], *, stdin: int | None = None, ready_on: str = "stderr",
          timeout: float = 20.0) -> tuple[subprocess.Popen[bytes], tuple[str, int]]:
    """Start ``timebound ARGS``; wait for its ``listening on udp://`` line."""
    proc = subprocess.Popen(TIMEBOUND + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=stdin)
    stream = proc.stderr if ready_on == "stderr" else proc.stdout
    assert stream is not None
    deadline = time.monotonic() + timeout
    line = b""
    while not line.endswith(b"\n"):
        ready, _, _ = select.select([stream], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            stop(proc)
            raise AssertionError(f"{args[:2]} not ready in {timeout} s")
        chunk = os.read(stream.fileno(), 1)
        if not chunk:
            stop(proc)
            raise AssertionError(f"{args[:2]} exited before it was ready")
        line += chunk
        if line.endswith(b"\n") and line.startswith(b"timebound: ") and b"error" not in line:
            line = b""  # a notice before it (a storage file created, --insecure)
    text = line.decode().strip()
    assert text.startswith("listening on udp://"), text
    host, _, port = text.removeprefix("listening on udp://").rpartition(":")
    return proc, (host.strip("[]"), int(port))


class Lines:
    """Collects a process's stdout lines in a thread."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.lines: list[str] = []
        assert proc.stdout is not None
        self.stream = proc.stdout
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for raw in iter(self.stream.readline, b""):
            self.lines.append(raw.decode())

    def wait_for(self, n: int, timeout: float) -> list[dict[str, object]]:
        deadline = time.monotonic() + timeout
        while len(self.lines) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        return [json.loads(line) for line in list(self.lines)]


def test_cli_send_through_lossy_proxy_to_cli_recv() -> None:
    kinds = [["FR", "R", "F", "N"][(n * 7 + n // 3) % 4] for n in range(200)]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        recv, addr = start(["channel", "recv", "--port", "0"])
        procs.append(recv)
        lines = Lines(recv)
        proxy, paddr = start(["net", "proxy", "--upstream", f"{addr[0]}:{addr[1]}",
                              "--loss", "0.1", "--duplicate", "0.1", "--reorder", "0.1",
                              "--seed", "3"], ready_on="stdout")
        procs.append(proxy)
        text = "".join(f"{k} line {n}\n" for n, k in enumerate(kinds))
        sender = subprocess.run(TIMEBOUND + ["channel", "send", f"{paddr[0]}:{paddr[1]}",
                                             "--timeout", "20s"],
                                input=text.encode(), capture_output=True, timeout=60)
        assert sender.returncode == 0, sender.stderr
        reliable = sum(1 for k in kinds if k in ("FR", "R"))
        rows = lines.wait_for(reliable, 10)
        time.sleep(0.3)
        rows = lines.wait_for(len(kinds), 0.1)
        for row in rows:
            assert set(row) == {"kind", "slot", "id", "data"}
            assert row["data"] == f"line {row['id']}" and row["kind"] == kinds[row["id"]]

        class D:
            def __init__(self, row: dict[str, object]) -> None:
                self.id = int(str(row["id"]))
                self.kind = Kind(row["kind"])
                self.slot = int(str(row["slot"]))

        check_rules([Kind(k) for k in kinds], [D(r) for r in rows])  # type: ignore[misc]
    finally:
        for p in procs:
            stop(p, signal.SIGTERM)


def test_killed_receiver_restarted_from_storage_refuses_the_old_opening(tmp_path: Path) -> None:
    storage = str(tmp_path / "latest.json")
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        first, addr = start(["channel", "recv", "--port", "0", "--storage", storage])
        procs.append(first)
        lines = Lines(first)
        # Stamped after the receiver started: one that creates its storage file
        # refuses every opening stamped before its start.
        clock = Clock()
        core = ChannelSender("old", clock.now(), FrameCodec())
        frames = [core.send(b"old %d" % n, Kind.R, now=clock.now())[1] for n in range(5)]
        for f in frames:
            sock.sendto(f, addr)
        assert len(lines.wait_for(5, 10)) == 5
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        second, addr2 = start(["channel", "recv", "--port", str(addr[1]),
                               "--storage", storage])
        procs.append(second)
        lines2 = Lines(second)
        for f in frames:  # the old session's datagrams again: a replay
            sock.sendto(f, addr2)

        async def fresh() -> None:
            await asyncio.sleep(2.5)  # beyond restart + beta: new openings are accepted
            async with Channel(addr2, give_up=10) as channel:
                await channel.send(b"new", "R")

        asyncio.run(asyncio.wait_for(fresh(), 30))
        rows = lines2.wait_for(1, 10)
        time.sleep(0.2)
        rows = lines2.wait_for(1, 0)
        assert [r["data"] for r in rows] == ["new"]
    finally:
        sock.close()
        for p in procs:
            stop(p, signal.SIGTERM)


def test_bad_input_exits_2_with_one_line() -> None:
    bad = subprocess.run(TIMEBOUND + ["channel", "recv", "--port", "70000"],
                         capture_output=True, timeout=30)
    assert bad.returncode == 2
    assert bad.stderr.decode().count("\n") == 1 and "timebound: error:" in bad.stderr.decode()
    recv, addr = start(["channel", "recv", "--port", "0", "--count", "1"])
    try:
        send = subprocess.run(TIMEBOUND + ["channel", "send", f"{addr[0]}:{addr[1]}"],
                              input=b"R fine\nXX nope\n", capture_output=True, timeout=30)
        assert send.returncode == 2
        err = send.stderr.decode()
        assert err.count("\n") == 1 and "stdin:2" in err and "kind" in err
        assert recv.wait(timeout=20) == 0
        assert recv.stdout is not None
        assert json.loads(recv.stdout.read())["data"] == "fine"
    finally:
        stop(recv, signal.SIGTERM)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_halfway_ends_the_input_and_exits_cleanly(sig: int) -> None:
    # stdin still open, one line sent: SIGTERM or SIGINT ends the input there; what
    # was sent is delivered, the sender exits 0 at once, and prints no traceback.
    recv, addr = start(["channel", "recv", "--port", "0"])
    send = subprocess.Popen(TIMEBOUND + ["channel", "send", f"{addr[0]}:{addr[1]}"],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        got = Lines(recv)
        assert send.stdin is not None
        send.stdin.write(b"FR first\n")
        send.stdin.flush()
        assert [line["data"] for line in got.wait_for(1, 20)] == ["first"]
        send.send_signal(sig)
        assert send.wait(timeout=10) == 0
        assert send.stderr is not None and send.stderr.read() == b""
    finally:
        stop(send)
        stop(recv, signal.SIGTERM)


def test_stdin_lines_ending_after_the_loop_leaves_nothing_unawaited() -> None:
    # The reader thread may hand over its last line after the command's loop has
    # closed (a bad line ended the command): nothing may be left un-awaited, which
    # would print a RuntimeWarning on stderr, and the thread must end.
    import gc
    import warnings

    from timebound.net.cli import StdinLines

    gate = threading.Event()

    def source():  # type: ignore[no-untyped-def]
        yield "FR a\n"
        gate.wait(10)
        yield "FR b\n"

    async def main() -> StdinLines:
        lines = StdinLines(asyncio.get_running_loop(), source=source())
        assert await lines.get() == "FR a\n"
        return lines

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lines = asyncio.run(main())
        gate.set()
        lines.thread.join(10)
        gc.collect()
    assert not lines.thread.is_alive()
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], caught


def test_a_send_through_a_receiver_restart_says_how_to_resume(tmp_path: Path) -> None:
    """30 reliable lines, the receiver SIGKILLed after 10 and restarted on its storage:
    ``channel send`` ends at once (not after --timeout) with exit 7 and one line that
    says the receiver lost the channel, how many reliable lines were acknowledged and
    which were not, by line number."""
    storage = str(tmp_path / "latest.json")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        first, addr = start(["channel", "recv", "--port", "0", "--storage", storage])
        procs.append(first)
        lines = Lines(first)
        send = subprocess.Popen(TIMEBOUND + ["channel", "send", f"{addr[0]}:{addr[1]}",
                                             "--timeout", "20s"],
                                stdin=subprocess.PIPE, stderr=subprocess.PIPE)
        procs.append(send)
        assert send.stdin is not None
        send.stdin.write(b"".join(b"R line %d\n" % n for n in range(1, 11)))
        send.stdin.flush()
        assert len(lines.wait_for(10, 10)) == 10
        time.sleep(0.3)  # their ACKs are back
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        second, _ = start(["channel", "recv", "--port", str(addr[1]), "--storage", storage])
        procs.append(second)
        began = time.monotonic()
        send.stdin.write(b"".join(b"R line %d\n" % n for n in range(11, 31)))
        send.stdin.close()
        assert send.wait(timeout=15) == 7
        took = time.monotonic() - began
        assert send.stderr is not None
        err = send.stderr.read().decode()
        print(err.strip())
        assert err.count("\n") == 1, err
        assert err.startswith("timebound: channel failed: lost (the receiver answered that "
                              "it no longer knows this channel"), err
        match = re.search(r"; (\d+) of (\d+) reliable lines acknowledged; not acknowledged: "
                          r"lines 11-(\d+); the receiver last answered", err)
        assert match is not None, err
        acked, total, last = (int(g) for g in match.groups())
        assert acked == 10 and total == last and 11 < total <= 30, err
        assert ("lines after" in err) == (total < 30), err
        assert "send those lines again on a new channel" in err
        assert took < 5.0, took  # the receiver said so: no wait for --timeout
    finally:
        for p in procs:
            stop(p, signal.SIGTERM)
