"""Every exit status means one thing in every command, and docs/errors.md lists them.

0 done, 1 a bug in timebound, 2 your input; 3 to 7 what the network did (a timeout, a
refusal that proves the call did not run, a refusal that does not, a remote error, a
failed channel). Each network status is run for real: ``timebound rpc serve`` and
``rpc call``, ``rpc stats`` and ``channel send`` processes on loopback.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_net_support import TIMEBOUND, start_server, stop
from timebound import exitcodes
from timebound.cli import main
from timebound.net._channel import ChannelFailed
from timebound.net._errors import CallRejected, CallTimeout, RemoteError

ROOT = Path(__file__).resolve().parents[1]

#: A server app whose one sync handler holds the only worker until a file is gone.
HELD_APP = '''
import os
import time


def hold(payload: bytes) -> bytes:
    flag = payload.decode()
    open(flag + ".entered", "w").close()
    deadline = time.monotonic() + 30
    while os.path.exists(flag) and time.monotonic() < deadline:
        time.sleep(0.02)
    return b"released"


def echo(payload: bytes) -> bytes:
    return payload


app = {"hold": hold, "echo": echo}
'''


def status_table() -> dict[int, str]:
    """The first table of docs/errors.md: status -> the rest of its row."""
    text = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    table = text.split("\n\n| status |", 1)[1].split("\n\n", 1)[0]
    return {int(m.group(1)): m.group(2)
            for m in re.finditer(r"^\| (\d+) \|(.*)$", table, re.M)}


def test_the_errors_page_lists_exactly_the_statuses_the_code_defines() -> None:
    rows = status_table()
    assert sorted(rows) == sorted(exitcodes.STATUSES)
    for status, name in exitcodes.STATUSES.items():
        assert name in rows[status].lower(), (status, name, rows[status])
    # the constants are the table's statuses, each once
    named = {value for key, value in vars(exitcodes).items() if key.startswith("EXIT_")}
    assert named == set(exitcodes.STATUSES)


def test_network_statuses_stay_clear_of_the_shells() -> None:
    network = {exitcodes.EXIT_TIMEOUT, exitcodes.EXIT_REFUSED,
               exitcodes.EXIT_REFUSED_UNKNOWN, exitcodes.EXIT_REMOTE_ERROR,
               exitcodes.EXIT_CHANNEL_FAILED}
    assert len(network) == 5 and not network & {0, 1, 2, 126, 127, 128, 130, 143}


@pytest.fixture
def silent() -> Iterator[str]:
    """A loopback UDP port that is bound and never answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{sock.getsockname()[1]}"


def run(argv: list[str], stdin: bytes = b"", cwd: Path | None = None
        ) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(TIMEBOUND + argv, input=stdin, capture_output=True, timeout=90,
                          cwd=cwd)


def one_line(done: subprocess.CompletedProcess[bytes]) -> str:
    err = done.stderr.decode()
    assert err.count("\n") == 1, err
    return err


def test_a_timeout_is_3(silent: str) -> None:
    call = run(["rpc", "call", silent, "echo", "x", "--timeout", "300ms"])
    assert call.returncode == exitcodes.EXIT_TIMEOUT == 3, call.stderr
    assert one_line(call).startswith("timebound: timeout: no reply from")
    stats = run(["rpc", "stats", silent, "--timeout", "300ms"])
    assert stats.returncode == 3, stats.stderr


def test_a_channel_that_fails_is_7(silent: str) -> None:
    done = run(["channel", "send", silent, "--timeout", "1s"], stdin=b"R one\nR two\n")
    assert done.returncode == exitcodes.EXIT_CHANNEL_FAILED == 7, done.stderr
    assert one_line(done).startswith("timebound: channel failed:")


def test_bad_input_is_2_and_a_bug_is_1(monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    done = run(["rpc", "call", "127.0.0.1:9", "echo", "--timeout", "1"])
    assert done.returncode == exitcodes.EXIT_USAGE == 2
    from timebound.net.cli import rpc

    def broken(args: object) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(rpc, "run_stats", broken)
    assert main(["rpc", "stats", "127.0.0.1:9"]) == exitcodes.EXIT_BUG == 1
    assert "internal error" in capsys.readouterr().err


def _serve_held(tmp_path: Path, keyed: bool) -> tuple[subprocess.Popen[bytes], str, list[str]]:
    """A real server with one worker and no queue, and the client's key options."""
    (tmp_path / "held_app.py").write_text(HELD_APP)
    key: list[str] = []
    if keyed:
        assert main(["key", "new", str(tmp_path / "k")]) == 0
        key = ["--key-file", str(tmp_path / "k")]
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)
    proc, (host, port) = start_server(["held_app:app", "--storage",
                                       str(tmp_path / "s.json"), "--workers", "1",
                                       "--queue", "0", *key],
                                      env={"PYTHONPATH": path}, timeout=60)
    return proc, f"{host}:{port}", key


def _refused_while_held(tmp_path: Path, target: str, key: list[str]
                        ) -> subprocess.CompletedProcess[bytes]:
    """``rpc call echo`` while ``hold`` holds the only worker: refused ``overloaded``."""
    flag = tmp_path / "held"
    flag.touch()
    holder = subprocess.Popen(TIMEBOUND + ["rpc", "call", target, "hold", str(flag),
                                           "--timeout", "60s", *key],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "held.entered").exists():
            assert time.monotonic() < deadline and holder.poll() is None, "hold not entered"
            time.sleep(0.05)
        return run(["rpc", "call", target, "echo", "x", "--timeout", "10s", *key])
    finally:
        flag.unlink()
        try:
            assert holder.wait(timeout=60) == 0
        finally:
            stop(holder)


def test_a_refusal_that_proves_the_call_did_not_run_is_4(tmp_path: Path) -> None:
    proc, target, key = _serve_held(tmp_path, keyed=True)
    try:
        refused = _refused_while_held(tmp_path, target, key)
        assert refused.returncode == exitcodes.EXIT_REFUSED == 4, refused.stderr
        assert one_line(refused) == ("timebound: rejected: overloaded (the call did not "
                                     "run)\n")
    finally:
        stop(proc)


def test_a_refusal_without_a_key_is_5_and_a_remote_error_6(tmp_path: Path) -> None:
    proc, target, key = _serve_held(tmp_path, keyed=False)
    try:
        refused = _refused_while_held(tmp_path, target, key)
        assert refused.returncode == exitcodes.EXIT_REFUSED_UNKNOWN == 5, refused.stderr
        assert one_line(refused).startswith("timebound: rejected: overloaded "
                                            "(unauthenticated")
        failed = run(["rpc", "call", target, "nosuchprocedure", "x", "--timeout", "10s"])
        assert failed.returncode == exitcodes.EXIT_REMOTE_ERROR == 6, failed.stderr
        assert one_line(failed).startswith("timebound: remote error:")
    finally:
        stop(proc)


def test_a_handler_that_raises_is_6(tmp_path: Path) -> None:
    proc, (host, port) = start_server(["timebound.net.examples:app", "--storage",
                                       str(tmp_path / "s.json")], timeout=60)
    try:
        failed = run(["rpc", "call", f"{host}:{port}", "fail", "why", "--timeout", "10s"])
        assert failed.returncode == 6, failed.stderr
        assert one_line(failed).startswith("timebound: remote error:")
        assert "why" in failed.stderr.decode()
    finally:
        stop(proc)


@pytest.mark.parametrize(("error", "status"), [
    (CallTimeout("no reply"), 3), (CallRejected("early"), 4), (CallRejected("down"), 5),
    (RemoteError("raised"), 6), (ChannelFailed("timeout"), 7),
])
def test_a_network_outcome_any_command_lets_through_keeps_its_status(
        error: Exception, status: int, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Not only the commands that end them: an outcome of the network that reaches
    the top level (a library call inside any command) has the same status."""
    from timebound.net.cli import rpc

    def fails(args: object) -> int:
        raise error

    monkeypatch.setattr(rpc, "run_stats", fails)
    assert main(["rpc", "stats", "127.0.0.1:9"]) == status
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error:" not in err, err
