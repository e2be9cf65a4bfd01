"""The command line on a hostile network and for a careless operator:
``timebound key new``; every server command refuses a non-loopback address without a
key unless ``--insecure`` (then one warning line); ``--service`` reaches the frames;
every bad input (a host that is not a name or does not resolve, a byte that is not
UTF-8 on stdin or in argv) is one line and exit 2, ``group join`` included (it used to
hang); ``--port`` is optional everywhere; ``rpc call`` does not present an
unauthenticated refusal as certain. Processes run on loopback only (a server bound
to 0.0.0.0 receives nothing and sends only to 127.0.0.1), each bounded in time and
killed in ``finally``."""

from __future__ import annotations

import argparse
import os
import re
import select
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.ports import free_port
from tests.test_net_support import TIMEBOUND, stop
from timebound.cli import main
from timebound.errors import UsageError

EPS = ["--epsilon", "5ms", "--delta", "5ms"]
APP = "timebound.net.examples:app"
ERROR_LINE = re.compile(r"timebound: error: [^\n]+\n")


def run(args: list[str], stdin: bytes = b"", timeout: float = 30.0
        ) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(TIMEBOUND + args, input=stdin, capture_output=True,
                          timeout=timeout)


def one_error_line(done: subprocess.CompletedProcess[bytes], *needles: str) -> str:
    """Exit 2 with exactly one line ``timebound: error: ...`` (no traceback) that
    names every needle."""
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 2, (done.returncode, err)
    assert ERROR_LINE.fullmatch(err), err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


# -- timebound key new ----------------------------------------------------------------


def test_key_new_writes_a_0600_hex_key_and_says_how_to_use_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from timebound.net._keys import read_key

    old = os.umask(0)  # a permissive umask: the mode must still be 0600
    try:
        assert main(["key", "new", str(tmp_path / "a.key")]) == 0
        assert main(["key", "new", str(tmp_path / "b.key")]) == 0
    finally:
        os.umask(old)
    out = capsys.readouterr().out
    a = (tmp_path / "a.key").read_bytes()
    b = (tmp_path / "b.key").read_bytes()
    assert re.fullmatch(rb"[0-9a-f]{64}\n", a) and re.fullmatch(rb"[0-9a-f]{64}\n", b)
    assert a != b
    for name in ("a.key", "b.key"):
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o600
    assert read_key(str(tmp_path / "a.key")) == a.strip()
    for needle in ("--key-file", "rpc serve", "channel recv", "group join", "pubsub merge",
                   "rpc call", "channel send", "pubsub publish", "pubsub subscribe",
                   "secure channel"):
        assert needle in out, needle


def test_key_new_never_overwrites_a_file_or_follows_a_link(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    existing = tmp_path / "k"
    existing.write_bytes(b"old key, in use by clients\n")
    target = tmp_path / "target"
    target.write_bytes(b"precious\n")
    link = tmp_path / "link"
    link.symlink_to(target)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    for path in (existing, link, dangling):
        assert main(["key", "new", str(path)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("timebound: error: FILE:"), err
    assert existing.read_bytes() == b"old key, in use by clients\n"
    assert target.read_bytes() == b"precious\n"
    assert not (tmp_path / "nowhere").exists()
    assert main(["key", "new", str(tmp_path / "no" / "dir")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_key_new_is_listed_in_the_help() -> None:
    top = run(["--help"])
    assert top.returncode == 0 and re.search(rb"\n\s+key\s+\S", top.stdout), top.stdout
    new = run(["key", "new", "--help"])
    assert new.returncode == 0
    text = b" ".join(new.stdout.split())
    assert b"0600" in text and b"--key-file" in text and b"never overwritten" in text


# -- bad input: one line, exit 2 --------------------------------------------------------


BAD_HOSTS = {
    "rpc call": ["rpc", "call", "bad..host:1", "incr"],
    "rpc call unresolved": ["rpc", "call", "nohost.invalid:1", "incr"],
    "rpc stats": ["rpc", "stats", "bad..host:1"],
    "rpc serve": ["rpc", "serve", APP, "--host", "bad..host", "--storage", "{tmp}/s.json"],
    "channel recv": ["channel", "recv", "--host", "bad..host"],
    "channel send": ["channel", "send", "bad..host:1"],
    "pubsub merge": ["pubsub", "merge", "m", "--host", "bad..host", *EPS],
    "pubsub merge upstream": ["pubsub", "merge", "m", "--upstream", "nohost.invalid:1", *EPS],
    "pubsub publish": ["pubsub", "publish", "p", "--mergers", "nohost.invalid:1", *EPS],
    "pubsub publish bad": ["pubsub", "publish", "p", "--mergers", "bad..host:1", *EPS],
    "pubsub subscribe": ["pubsub", "subscribe", "bad..host:1"],
    "net proxy": ["net", "proxy", "--host", "bad..host", "--upstream", "127.0.0.1:9"],
    "net proxy upstream": ["net", "proxy", "--upstream", "bad..host:9"],
    "group join": ["group", "join", "a", "--members", "a=127.0.0.1:0,b=bad..host:1"],
}


@pytest.mark.parametrize("case", sorted(BAD_HOSTS))
def test_a_bad_or_unresolvable_host_is_one_line(case: str, tmp_path: Path) -> None:
    args = [a.replace("{tmp}", str(tmp_path)) for a in BAD_HOSTS[case]]
    host = "nohost.invalid" if any("nohost" in a for a in args) else "bad..host"
    started = time.monotonic()
    done = run(args, stdin=b"line\n")
    one_error_line(done, host)
    assert time.monotonic() - started < 25
    assert not (tmp_path / "s.json").exists()  # refused before anything is created


@pytest.mark.parametrize("argv", [["incr", b"\xff41"], [b"in\xffcr", "41"]])
def test_rpc_call_with_an_argument_that_is_not_utf8_is_one_line(
        argv: list[str | bytes]) -> None:
    args = [os.fsencode(a) if isinstance(a, str) else a for a in argv]
    done = subprocess.run([os.fsencode(a) for a in TIMEBOUND]
                          + [b"rpc", b"call", b"127.0.0.1:9", *args],
                          capture_output=True, timeout=30)
    where = "PAYLOAD" if args[1].startswith(b"\xff") else "PROC"
    one_error_line(done, where, "not valid UTF-8", "0xff")


def start_ready(args: list[str], ready_on: str = "stderr", *,
                stdin: int | None = None, timeout: float = 20.0
                ) -> tuple[subprocess.Popen[bytes], tuple[str, int], list[str]]:
    """Start ``timebound ARGS`` and wait for its listening line; the stderr lines
    before it (the warning, when the listening line is on stderr too)."""
    proc = subprocess.Popen(TIMEBOUND + args, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=stdin)
    stream = proc.stderr if ready_on == "stderr" else proc.stdout
    assert stream is not None
    before: list[str] = []
    deadline = time.monotonic() + timeout
    line = b""
    while True:
        ready, _, _ = select.select([stream], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            stop(proc)
            raise AssertionError(f"{args[:2]} not ready in {timeout} s: {before}")
        chunk = os.read(stream.fileno(), 1)
        if not chunk:
            stop(proc)
            raise AssertionError(f"{args[:2]} exited before it was ready: {before} {line!r}")
        line += chunk
        if line.endswith(b"\n"):
            text = line.decode().strip()
            if text.startswith("listening on udp://"):
                break
            before.append(text)
            line = b""
    host, _, port = text.removeprefix("listening on udp://").rpartition(":")
    return proc, (host.strip("[]"), int(port)), before


def test_channel_send_ends_on_a_stdin_line_that_is_not_utf8() -> None:
    recv, addr, _ = start_ready(["channel", "recv", "--count", "1"])
    try:
        done = run(["channel", "send", f"{addr[0]}:{addr[1]}", "--timeout", "10s"],
                   stdin=b"R fine\nR bad \xff byte\nR never\n")
        one_error_line(done, "stdin:2", "not valid UTF-8", "0xff",
                       "(the lines before it were sent and acknowledged: fix it and go on "
                       "from line 2)")
        assert recv.wait(timeout=20) == 0
        assert recv.stdout is not None
        assert b'"data": "fine"' in recv.stdout.read()
    finally:
        stop(recv, signal.SIGTERM)


def test_pubsub_publish_ends_on_a_stdin_line_that_is_not_utf8() -> None:
    merger, addr, _ = start_ready(["pubsub", "merge", "m", *EPS, "--quiet"])
    try:
        done = run(["pubsub", "publish", "p", "--mergers", f"{addr[0]}:{addr[1]}", *EPS],
                   stdin=b"one\n\xfe\xfftwo\nthree\n")
        one_error_line(done, "stdin:2", "not valid UTF-8", "0xfe",
                       "(the lines before it were published: fix it and go on from line 2)")
        assert done.stdout.decode().count("\n") == 1  # "one" was published
    finally:
        stop(merger, signal.SIGTERM)


def test_pubsub_publish_resolves_a_merger_name() -> None:
    # asyncio's unconnected sendto takes no name: "localhost" used to fail at send.
    merger, addr, _ = start_ready(["pubsub", "merge", "m", *EPS])
    try:
        done = run(["pubsub", "publish", "p", "--mergers", f"localhost:{addr[1]}", *EPS],
                   stdin=b"hello\n")
        assert done.returncode == 0, done.stderr
        assert done.stdout.decode().count("\n") == 1
    finally:
        stop(merger, signal.SIGTERM)


@pytest.mark.parametrize("close_stdin", [False, True])
def test_group_join_ends_at_once_on_a_stdin_line_that_is_not_utf8(close_stdin: bool) -> None:
    # It used to drop the rest of stdin and run for ever; with stdin still open too.
    members = f"a=127.0.0.1:0,b=127.0.0.1:{free_port()}"
    proc, _, _ = start_ready(["group", "join", "a", "--members", members,
                              "--ack-every-ms", "50"], stdin=subprocess.PIPE)
    try:
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.write(b"hello\nbad \xc3\x28 line\nafter\n")
        proc.stdin.flush()
        if close_stdin:
            proc.stdin.close()
        assert proc.wait(timeout=15) == 2
        err = proc.stderr.read()
        done = subprocess.CompletedProcess(proc.args, 2, b"", err)
        one_error_line(done, "stdin:2", "not valid UTF-8", "0xc3",
                       "(the lines before it were sent: fix it and go on from line 2)")
        assert proc.stdout is not None
        out = proc.stdout.read().decode()
        assert '"data": "after"' not in out
    finally:
        stop(proc)


@pytest.mark.parametrize("args", [
    ["channel", "recv"],
    ["pubsub", "merge", "m", *EPS],
    ["net", "proxy", "--upstream", "127.0.0.1:9"],
    ["rpc", "serve", APP, "--storage", "{tmp}/s.json"],
    ["group", "join", "a", "--members", "a=127.0.0.1:0,b=127.0.0.1:9"],
])
def test_port_is_optional_and_announced_everywhere(args: list[str], tmp_path: Path) -> None:
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    on = "stdout" if args[0] in ("rpc", "net") else "stderr"
    proc, addr, _ = start_ready(args, on, stdin=subprocess.PIPE)
    try:
        assert addr[0] == "127.0.0.1" and 0 < addr[1] < 65536
    finally:
        stop(proc, signal.SIGTERM)


# -- secure by default: --insecure --------------------------------------------------------


SERVERS = {
    "rpc serve": (["rpc", "serve", APP, "--storage", "{tmp}/s.json", "--host", "0.0.0.0"],
                  "stdout"),
    "channel recv": (["channel", "recv", "--host", "0.0.0.0"], "stderr"),
    "pubsub merge": (["pubsub", "merge", "m", *EPS, "--host", "0.0.0.0"], "stderr"),
    "net proxy": (["net", "proxy", "--upstream", "127.0.0.1:9", "--host", "0.0.0.0"],
                  "stdout"),
    "group join": (["group", "join", "a", "--members", "a=0.0.0.0:0,b=127.0.0.1:9"],
                   "stderr"),
}


@pytest.mark.parametrize("name", sorted(SERVERS))
def test_a_public_address_without_a_key_needs_insecure(name: str, tmp_path: Path) -> None:
    args, on = SERVERS[name]
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    done = run(args, stdin=b"")
    one_error_line(done, "--host", "0.0.0.0", "--insecure", "--key-file")
    assert done.stdout == b""
    assert not (tmp_path / "s.json").exists()  # refused before the storage is made


@pytest.mark.parametrize("name", sorted(SERVERS))
def test_insecure_binds_it_with_one_warning_line(name: str, tmp_path: Path) -> None:
    args, on = SERVERS[name]
    args = [a.replace("{tmp}", str(tmp_path)) for a in args] + ["--insecure"]
    proc, addr, before = start_ready(args, on, stdin=subprocess.PIPE)
    try:
        assert addr[0] == "0.0.0.0"
        if on == "stdout":  # the warning is on stderr
            time.sleep(0.2)
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)
            assert proc.stderr is not None
            before = proc.stderr.read().decode().splitlines()
        assert not [line for line in before if "Traceback" in line], before
        err = [line for line in before if line.startswith("timebound: warning:")]
        assert len(err) == 1, before
        assert "0.0.0.0" in err[0] and "--insecure" in err[0], err
    finally:
        stop(proc, signal.SIGTERM)


def test_proxy_refuses_a_public_address_without_insecure(
        capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio

    from timebound.errors import UsageError
    from timebound.net._proxy import FaultProxy, Faults

    async def both() -> tuple[str, int]:
        proxy = FaultProxy(("127.0.0.1", 9), Faults(), host="0.0.0.0")
        with pytest.raises(UsageError, match="--insecure"):
            await proxy.start()
        assert proxy._listen is None
        insecure = FaultProxy(("127.0.0.1", 9), Faults(), host="0.0.0.0", insecure=True)
        async with insecure:
            return insecure.address

    assert asyncio.run(both())[0] == "0.0.0.0"
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("timebound: warning: net proxy"), err


def test_loopback_without_a_key_prints_no_warning(tmp_path: Path) -> None:
    proc, _, before = start_ready(["channel", "recv", "--host", "::1"], "stderr")
    stop(proc, signal.SIGTERM)
    assert before == []


# -- --service, --workers ------------------------------------------------------------


@pytest.mark.parametrize("args", [
    ["rpc", "call", "127.0.0.1:9", "incr", "--service", "a"],
    ["rpc", "serve", APP, "--storage", "{tmp}/s.json", "--service", "a"],
    ["channel", "recv", "--service", "a"],
    ["channel", "send", "127.0.0.1:9", "--service", "a"],
    ["group", "join", "a", "--members", "a=127.0.0.1:0", "--service", "a"],
    ["pubsub", "merge", "m", *EPS, "--service", "a"],
    ["pubsub", "publish", "p", "--mergers", "127.0.0.1:9", *EPS, "--service", "a"],
    ["pubsub", "subscribe", "127.0.0.1:9", "--service", "a"],
])
def test_service_without_a_key_is_refused(args: list[str], tmp_path: Path) -> None:
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    one_error_line(run(args), "--service", "--key-file")


def test_service_too_long_is_one_line(tmp_path: Path) -> None:
    assert main(["key", "new", str(tmp_path / "k")]) == 0
    done = run(["rpc", "call", "127.0.0.1:9", "incr", "--key-file", str(tmp_path / "k"),
                "--service", "x" * 65])
    one_error_line(done, "--service", "64")


def test_a_call_for_another_service_does_not_run(tmp_path: Path) -> None:
    key = str(tmp_path / "k")
    assert main(["key", "new", key]) == 0
    proc, addr, _ = start_ready(["rpc", "serve", APP, "--storage", str(tmp_path / "s.json"),
                                 "--key-file", key, "--service", "inventory"], "stdout")
    try:
        target = f"{addr[0]}:{addr[1]}"
        right = run(["rpc", "call", target, "incr", "41", "--key-file", key,
                     "--service", "inventory"])
        assert (right.returncode, right.stdout) == (0, b"42\n"), right.stderr
        wrong = run(["rpc", "call", target, "incr", "41", "--key-file", key,
                     "--service", "billing", "--timeout", "500ms"])
        assert wrong.returncode == 3 and b"timeout" in wrong.stderr, wrong.stderr
        bare = run(["rpc", "call", target, "incr", "41", "--key-file", key,
                    "--timeout", "500ms"])
        assert bare.returncode == 3 and b"timeout" in bare.stderr, bare.stderr
        stats = run(["rpc", "stats", target, "--json", "--key-file", key,
                     "--service", "inventory"])
        assert stats.returncode == 0 and b'"executions": 1' in stats.stdout, stats.stdout
    finally:
        stop(proc, signal.SIGTERM)


@pytest.mark.parametrize("workers", ["-1", "1025"])
def test_workers_out_of_range_is_one_line(workers: str, tmp_path: Path) -> None:
    done = run(["rpc", "serve", APP, "--storage", str(tmp_path / "s.json"),
                "--workers", workers])
    one_error_line(done, "--workers", "1024")


def test_workers_reach_the_server_and_the_help_shows_its_default(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import timebound.net._server as server_module
    from timebound.errors import UsageError
    from timebound.net.cli import rpc as cli

    help_text = b" ".join(run(["rpc", "serve", "--help"]).stdout.split())
    default = getattr(server_module, "DEFAULT_WORKERS", 8)
    assert f"default {default})".encode() in help_text, help_text
    assert cli.SHOWN_DEFAULT_WORKERS == default
    seen: list[int] = []

    def fake(*args: object, **kwargs: object) -> None:
        seen.append(int(kwargs["workers"]))  # type: ignore[call-overload]
        raise UsageError("fake", "stop here")

    monkeypatch.setattr(server_module, "RpcServer", fake)
    for given in (["--workers", "0"], [], ["--workers", "3"]):
        assert main(["rpc", "serve", APP, "--storage", str(tmp_path / "s.json"),
                     *given]) == 2
    assert seen == [0, default, 3]


# -- rpc call: what a refusal proves ---------------------------------------------------


@pytest.mark.parametrize("reason", ["early", "overloaded", "expired", "stale", "down"])
@pytest.mark.parametrize("authenticated", [True, False])
def test_rpc_call_says_when_a_refusal_could_be_forged(
        reason: str, authenticated: bool, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from timebound.net._errors import CallRejected
    from timebound.net.cli import rpc_client as cli

    def refused(args: argparse.Namespace, proc: str, payload: bytes) -> bytes:
        exc = CallRejected(reason)
        exc.authenticated = authenticated  # type: ignore[misc]
        raise exc

    monkeypatch.setattr(cli, "_client_call", refused)
    # 4 when the refusal proves the call did not run, 5 when its outcome is unknown
    status = 4 if authenticated and reason in ("early", "overloaded", "expired") else 5
    assert main(["rpc", "call", "127.0.0.1:9", "incr"]) == status
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"timebound: rejected: {reason} ("), err
    if authenticated:
        assert "unauthenticated" not in err[0] and "may have run" not in err[0] or \
            reason in ("stale", "down")
        if reason == "expired":
            assert "deadline had passed" in err[0]
        if reason in ("early", "overloaded"):
            assert "did not run" in err[0]
    else:
        assert "unauthenticated" in err[0] and "could be forged" in err[0]
        assert "the call may have run" in err[0] and "did not run" not in err[0]


@pytest.mark.parametrize("kind", ["fifo", "directory", "device", "large"])
def test_key_file_must_be_a_small_regular_file(kind: str, tmp_path: Path) -> None:
    # A FIFO used to hang the command, /dev/zero was read in part and used as a key.
    path = tmp_path / "key"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "large":
        path.write_bytes(b"k" * (1 << 17))
        path.chmod(0o600)  # private, so the size is what refuses it
    else:
        path = Path("/dev/zero")
    done = run(["rpc", "call", "127.0.0.1:9", "incr", "--key-file", str(path)],
               timeout=20)
    one_error_line(done, "--key-file", str(path))


def test_rpc_serve_refuses_beta_below_latest_every(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # latest = now + beta, written every latest_every: a shorter beta refuses calls early
    # between refreshes; the server does not start (and creates no storage file).
    storage = tmp_path / "latest.json"
    assert main(["rpc", "serve", "timebound.net.examples:app", "--storage", str(storage),
                 "--beta", "500ms", "--latest-every", "1s"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("timebound: error: --beta: must be >= "
                                               "--latest-every (1s), got 500ms"), err
    assert not storage.exists()


def test_rpc_call_payload_from_text_stdin_or_a_file(tmp_path: Path) -> None:
    from timebound.net.cli import MAX_PAYLOAD, call_payload

    (tmp_path / "p.bin").write_bytes(b"\x00\xffbytes")
    assert call_payload(f"@{tmp_path / 'p.bin'}") == b"\x00\xffbytes"  # bytes as they are
    assert call_payload("@@home") == b"@home" and call_payload("é") == "é".encode()
    (tmp_path / "big").write_bytes(b"x" * (MAX_PAYLOAD + 1))
    for bad, reason in ((f"@{tmp_path / 'big'}", "larger than"),
                        (f"@{tmp_path}", "not a regular file"),
                        (f"@{tmp_path / 'missing'}", "cannot read")):
        with pytest.raises(UsageError, match=reason) as caught:
            call_payload(bad)
        assert caught.value.option == "PAYLOAD"
    piped = subprocess.run(
        [sys.executable, "-c", "import sys; from timebound.net.cli import call_payload; "
         "sys.stdout.buffer.write(call_payload('-'))"],
        input=b"41\n\x00", capture_output=True, timeout=60)
    assert piped.returncode == 0 and piped.stdout == b"41\n\x00"
    too_big = subprocess.run([sys.executable, "-m", "timebound.cli", "rpc", "call",
                              "127.0.0.1:9", "incr", "-"],
                             input=b"x" * (MAX_PAYLOAD + 1), capture_output=True, timeout=60)
    assert too_big.returncode == 2
    assert too_big.stderr.decode().splitlines() == [
        f"timebound: error: PAYLOAD: stdin is larger than {MAX_PAYLOAD} bytes: a call's "
        "payload must fit one datagram"]
