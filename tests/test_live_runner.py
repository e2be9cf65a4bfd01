"""``python -m timebound.net.live``: a bad argument is one line and exit 2; SIGTERM in
the middle of a check ends it with one line and exit 143, its server processes and
temporary files gone."""

from __future__ import annotations

import contextlib
import glob
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


def _live(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "timebound.net.live", *args],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("args", "line"), [
    (["nope"], "timebound: error: argument kind: invalid choice: 'nope' (choose from "
               "'channel', 'group', 'pubsub', 'rpc')"),
    (["rpc", "--seed", "0"], "timebound: error: --seed: expected an integer >= 1, got 0"),
])
def test_a_bad_argument_is_one_line_and_exit_2(args: list[str], line: str) -> None:
    done = _live(*args)
    assert (done.returncode, done.stderr, done.stdout) == (2, line + "\n", "")


def test_sigterm_halfway_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    # its temporary folder of its own, where no other test's run (another worker's) writes
    pattern = f"{tmp_path}/timebound-live-rpc-*"
    before = set(glob.glob(pattern))
    proc = subprocess.Popen([sys.executable, "-m", "timebound.net.live", "rpc", "--quick"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, TMPDIR=str(tmp_path)))
    try:
        deadline = time.monotonic() + 30
        while not _servers(proc.pid):  # its server processes are up: it is running
            assert proc.poll() is None and time.monotonic() < deadline, "no server seen"
            time.sleep(0.02)
        assert set(glob.glob(pattern)) != before  # and their folder exists
        time.sleep(0.5)  # calls under way
        servers = _servers(proc.pid)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (proc.returncode, err, out) == (143, "timebound: terminated\n", "")
    assert set(glob.glob(pattern)) == before
    time.sleep(0.2)
    assert servers and [pid for pid in servers if _alive(int(pid))] == []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _servers(parent: int) -> list[str]:
    """The ``rpc serve`` processes ``parent`` started and that are still alive."""
    found = subprocess.run(["pgrep", "-P", str(parent), "-f", "rpc serve"],
                           capture_output=True, text=True).stdout
    return found.split()


def test_sigterm_inside_an_asyncio_callback_ends_the_loop() -> None:
    """The live checks run asyncio: SIGTERM that lands inside a timer callback must end
    ``asyncio.run`` (asyncio logs and swallows any exception from a callback except
    ``SystemExit`` and ``KeyboardInterrupt``)."""
    import asyncio

    from timebound._safety import Terminated, sigterm_raises

    async def wait_for_the_signal() -> None:
        loop = asyncio.get_running_loop()
        loop.call_soon(os.kill, os.getpid(), signal.SIGTERM)  # the handler runs in a callback
        await asyncio.sleep(5)

    start = time.monotonic()
    with pytest.raises(Terminated), sigterm_raises():
        asyncio.run(wait_for_the_signal())
    assert time.monotonic() - start < 4


@pytest.mark.parametrize("use_uvloop", [False, True])
def test_sigterm_under_the_loop_runner_cancels_main_at_its_next_await(
        use_uvloop: bool) -> None:
    """``timebound.net._loop.run`` (every live check and service): SIGTERM does not
    interrupt a task's step midway (that can lose the wakeup another task waits for, and
    the loop's close then waits forever); the step finishes, ``main`` is cancelled at
    its next await, its cleanup awaits inside the loop, then ``Terminated`` is raised and
    the handler from before is back."""
    import asyncio

    from timebound._safety import Terminated
    from timebound.net._loop import install_uvloop, run

    if use_uvloop and not install_uvloop():
        pytest.skip("uvloop is not installed")
    steps: list[str] = []

    async def main() -> None:
        try:
            os.kill(os.getpid(), signal.SIGTERM)  # the handler runs inside this step
            steps.append("step finished")
            await asyncio.sleep(5)
            steps.append("slept")
        except asyncio.CancelledError:
            await asyncio.sleep(0)
            steps.append("cleanup awaited")
            raise

    before = signal.getsignal(signal.SIGTERM)
    start = time.monotonic()
    with pytest.raises(Terminated):
        run(main(), use_uvloop=use_uvloop)
    assert time.monotonic() - start < 4
    assert steps == ["step finished", "cleanup awaited"]
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_second_sigterm_under_the_loop_runner_raises_at_once() -> None:
    """A cleanup that would run long is cut by a second SIGTERM; a ``main`` that
    swallows the cancel still ends in ``Terminated``."""
    import asyncio

    from timebound._safety import Terminated
    from timebound.net._loop import run

    async def stubborn(second: bool) -> str:
        os.kill(os.getpid(), signal.SIGTERM)
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            if second:
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(3):  # a cleanup that swallows cancels: 6 s
                    with contextlib.suppress(asyncio.CancelledError):
                        await asyncio.sleep(2)
        return "done"

    for second in (False, True):
        start = time.monotonic()
        with pytest.raises(Terminated):
            run(stubborn(second), use_uvloop=False)
        assert time.monotonic() - start < 4


def test_on_signals_gives_back_the_handlers_from_before() -> None:
    """A service's ``on_signals`` block ends before its cleanup does: SIGTERM must then
    reach the runner's handler again, not the default that kills the process."""
    from timebound.net._endpoint import on_signals
    from timebound.net._loop import run

    async def main() -> tuple[object, object]:
        before = signal.getsignal(signal.SIGTERM)
        with on_signals(lambda: None):
            pass
        return before, signal.getsignal(signal.SIGTERM)

    before, after = run(main(), use_uvloop=False)
    assert after is before and callable(before)
