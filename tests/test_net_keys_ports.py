"""Keys and ports (outside attack run on loopback, "keys, ports, docs").

- A key file must be private (no group or others bit, as ssh asks of a private key)
  and hold exactly what ``timebound key new`` writes, 64 lowercase hex characters
  (trailing whitespace aside); anything else is one line naming the option and the
  file, exit 2, for ``--key-file`` and ``--previous-key-file``. ``timebound key new``
  writes mode 0600 whatever the umask, and its file is accepted. Keys given to the
  Python API keep their rule (>= 16 bytes, any content).
- A port in use or a host that is not an address of this machine is one line naming
  ``--port`` or ``--host`` (``--members`` for ``group join``, ``--metrics-port`` for
  the metrics endpoint), exit 2, and creates no storage file: every listener
  (``rpc serve``, ``channel recv``, ``group join``, ``pubsub merge``, ``net proxy``).
"""

from __future__ import annotations

import asyncio
import errno
import os
import re
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from timebound.cli import main

APP = "timebound.net.examples:app"
EPS = ["--epsilon", "5ms", "--delta", "5ms"]
HEX = b"0123456789abcdef" * 4  # 64 lowercase hex characters
#: TEST-NET-1 (RFC 5737): never an address of this machine.
FOREIGN = "192.0.2.1"


def error_line(capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    """The one stderr line ``timebound: error: ...`` (and nothing else) naming every
    needle."""
    captured = capsys.readouterr()
    assert re.fullmatch(r"timebound: error: [^\n]+\n", captured.err), captured.err
    assert "listening on" not in captured.out, captured.out
    for needle in needles:
        assert needle in captured.err, (needle, captured.err)
    return captured.err


def key_file(path: Path, content: bytes = HEX + b"\n", mode: int = 0o600) -> str:
    path.write_bytes(content)
    path.chmod(mode)
    return str(path)


# -- key files: private --------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o620, 0o602, 0o610, 0o666])
def test_a_key_file_others_can_access_is_refused_in_one_line(
        mode: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = key_file(tmp_path / "k", mode=mode)
    assert main(["rpc", "call", "127.0.0.1:9", "incr", "--key-file", path]) == 2
    err = error_line(capsys, "--key-file", path, f"(mode {mode:04o})", f"chmod 600 {path}")
    if mode & 0o044:
        assert "readable by" in err


def test_the_previous_key_file_must_be_private_too(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    current = key_file(tmp_path / "current")
    previous = key_file(tmp_path / "previous", mode=0o644)
    storage = tmp_path / "s.json"
    assert main(["rpc", "serve", APP, "--storage", str(storage), "--key-file", current,
                 "--previous-key-file", previous]) == 2
    error_line(capsys, "--previous-key-file", previous, "readable by others", "mode 0644")
    assert not storage.exists()


@pytest.mark.parametrize("args", [
    ["channel", "recv", "--storage", "{tmp}/s.json"],
    ["channel", "send", "127.0.0.1:9"],
    ["group", "join", "a", "--members", "a=127.0.0.1:0,b=127.0.0.1:9"],
    ["pubsub", "merge", "m", *EPS],
    ["pubsub", "publish", "p", "--mergers", "127.0.0.1:9", *EPS],
    ["pubsub", "subscribe", "127.0.0.1:9"],
    ["rpc", "stats", "127.0.0.1:9"],
])
def test_every_command_taking_a_key_file_checks_it(
        args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = key_file(tmp_path / "k", mode=0o644)
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert main([*args, "--key-file", path]) == 2
    error_line(capsys, "--key-file", path, "chmod 600")
    assert not (tmp_path / "s.json").exists()


def test_key_new_writes_a_file_that_is_accepted_whatever_the_umask(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from timebound.net._keys import read_key

    old = os.umask(0)  # the most permissive umask: the mode must still be 0600
    try:
        assert main(["key", "new", str(tmp_path / "k")]) == 0
    finally:
        os.umask(old)
    capsys.readouterr()
    assert stat.S_IMODE(os.stat(tmp_path / "k").st_mode) == 0o600
    secret = read_key(str(tmp_path / "k"))
    assert re.fullmatch(rb"[0-9a-f]{64}", secret)
    # A command takes it: nothing listens on port 9, so the call times out (exit 3).
    assert main(["rpc", "call", "127.0.0.1:9", "incr", "--key-file", str(tmp_path / "k"),
                 "--timeout", "100ms"]) == 3
    assert "timeout" in capsys.readouterr().err


def test_key_new_refuses_a_file_system_that_keeps_it_readable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # A mount with a fixed mode (FAT, some network shares) ignores chmod 600: the new
    # file would be refused by every command, so it is not left there at all.
    real_fchmod = os.fchmod
    monkeypatch.setattr(os, "fchmod", lambda fd, mode: real_fchmod(fd, 0o644))
    assert main(["key", "new", str(tmp_path / "k")]) == 2
    error_line(capsys, "FILE", str(tmp_path / "k"), "mode 0644")
    assert not (tmp_path / "k").exists()


# -- key files: content ---------------------------------------------------------------


BAD_CONTENT = {
    "40 non-hex bytes": b"k" * 40,
    "40 non-hex bytes and a newline": b"k" * 40 + b"\n",
    "40 hex characters": HEX[:40] + b"\n",
    "63 hex characters": HEX[:63] + b"\n",
    "65 hex characters": HEX + b"a\n",
    "128 hex characters": HEX + HEX + b"\n",
    "uppercase hex": HEX.upper() + b"\n",
    "a space inside": HEX[:32] + b" " + HEX[33:] + b"\n",
    "leading whitespace": b" " + HEX + b"\n",
    "a second line": HEX + b"\n" + HEX + b"\n",
    "binary bytes": bytes(range(200, 232)) * 2,
    "empty": b"",
    "only a newline": b"\n",
    "a 0x prefix": b"0x" + HEX[:62] + b"\n",
}


@pytest.mark.parametrize("case", sorted(BAD_CONTENT))
@pytest.mark.parametrize("option", ["--key-file", "--previous-key-file"])
def test_a_key_file_must_hold_64_lowercase_hex_characters(
        case: str, option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = key_file(tmp_path / "k", BAD_CONTENT[case])
    storage = tmp_path / "s.json"
    if option == "--key-file":
        args = ["rpc", "call", "127.0.0.1:9", "incr", "--key-file", path]
    else:
        args = ["rpc", "serve", APP, "--storage", str(storage),
                "--key-file", key_file(tmp_path / "current"), "--previous-key-file", path]
    assert main(args) == 2
    err = error_line(capsys, option, path, "64 lowercase hex characters",
                     "timebound key new")
    assert "kkkk" not in err  # nothing of the file is shown: it may be a secret
    assert not storage.exists()


@pytest.mark.parametrize("ending", [b"\n", b"", b"\r\n", b"\n\n", b" \n"])
def test_a_hex_key_file_is_read_as_its_64_characters(ending: bytes, tmp_path: Path) -> None:
    from timebound.net._keys import read_key

    assert read_key(key_file(tmp_path / "k", HEX + ending)) == HEX


def test_python_keys_keep_their_rule() -> None:
    # docs/net.md: key= is any secret of at least 16 bytes (str: UTF-8); no hex rule.
    from timebound.errors import ProtocolUsageError
    from timebound.net._keys import keyring

    for key in (b"k" * 40, b"\x00" * 16, "sixteen chars!!!", HEX, HEX.decode()):
        ring = keyring(key)
        assert ring is not None
        assert ring.current.secret == (key if isinstance(key, bytes) else key.encode())
    with pytest.raises(ProtocolUsageError):
        keyring(b"k" * 15)


def test_a_key_file_and_its_text_in_python_are_one_key(tmp_path: Path) -> None:
    from timebound.net._keys import keyring, read_key

    from_file = keyring(read_key(key_file(tmp_path / "k")))
    from_text = keyring(HEX.decode())
    assert from_file is not None and from_text is not None
    assert from_file.current == from_text.current


# -- ports and hosts -------------------------------------------------------------------


@pytest.fixture
def held_port() -> Iterator[int]:
    """A UDP port on 127.0.0.1 that another socket holds."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as held:
        held.bind(("127.0.0.1", 0))
        yield int(held.getsockname()[1])


LISTENERS = {
    "rpc serve": (["rpc", "serve", APP, "--storage", "{tmp}/s.json"], "--port"),
    "channel recv": (["channel", "recv", "--storage", "{tmp}/s.json"], "--port"),
    "pubsub merge": (["pubsub", "merge", "m", *EPS], "--port"),
    "net proxy": (["net", "proxy", "--upstream", "127.0.0.1:9"], "--port"),
}


def _foreign_is_not_local() -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.bind((FOREIGN, 0))
        except OSError:
            return True
    return False


@pytest.mark.parametrize("name", sorted(LISTENERS))
def test_a_port_in_use_is_one_line_and_creates_nothing(
        name: str, held_port: int, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    args, option = LISTENERS[name]
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert main([*args, "--port", str(held_port)]) == 2
    error_line(capsys, f"timebound: error: {option}: ", f"127.0.0.1:{held_port}",
               "already in use")
    assert not (tmp_path / "s.json").exists()
    assert os.listdir(tmp_path) == []


def test_group_join_names_its_own_address_when_its_port_is_in_use(
        held_port: int, capsys: pytest.CaptureFixture[str]) -> None:
    members = f"a=127.0.0.1:{held_port},b=127.0.0.1:9"
    assert main(["group", "join", "a", "--members", members]) == 2
    error_line(capsys, "timebound: error: --members: ", f"a's address 127.0.0.1:{held_port}",
               "already in use")


@pytest.mark.skipif(not _foreign_is_not_local(), reason=f"{FOREIGN} is bound here")
@pytest.mark.parametrize("name", sorted(LISTENERS))
def test_a_host_not_of_this_machine_is_one_line_and_creates_nothing(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args, _ = LISTENERS[name]
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    # A key (or --insecure for the proxy, which has none) gets past the loopback rule,
    # so the bind itself is what fails.
    extra = (["--insecure"] if name == "net proxy"
             else ["--key-file", key_file(tmp_path.parent / f"{tmp_path.name}.key")])
    assert main([*args, "--host", FOREIGN, *extra]) == 2
    error_line(capsys, "timebound: error: --host: ", FOREIGN,
               "not an address of this machine")
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(not _foreign_is_not_local(), reason=f"{FOREIGN} is bound here")
def test_group_join_with_an_address_not_of_this_machine_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = key_file(tmp_path / "k")
    assert main(["group", "join", "a", "--members", f"a={FOREIGN}:0,b=127.0.0.1:9",
                 "--key-file", key]) == 2
    error_line(capsys, "timebound: error: --members: ", f"a's address {FOREIGN}:0",
               "not an address of this machine")


def test_a_metrics_port_in_use_is_one_line_and_creates_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("prometheus_client")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        assert main(["rpc", "serve", APP, "--storage", str(tmp_path / "s.json"),
                     "--metrics-port", str(port)]) == 2
    error_line(capsys, "timebound: error: --metrics-port: ", f"127.0.0.1:{port}",
               "already in use")
    assert os.listdir(tmp_path) == []


def test_bind_errno_finds_the_system_error_under_a_loop_s_own() -> None:
    # uvloop raises OSError("could not bind to local_addr ...") from the system's error.
    from timebound.net._endpoint import bind_errno

    try:
        try:
            raise OSError(errno.EADDRINUSE, "Address already in use")
        except OSError as inner:
            raise OSError("could not bind to local_addr ('127.0.0.1', 1)") from inner
    except OSError as outer:
        assert outer.errno is None and bind_errno(outer) == errno.EADDRINUSE
    assert bind_errno(ValueError("no errno")) is None


@pytest.mark.parametrize("use_uvloop", [False, None])
def test_open_datagram_keeps_the_errno_on_every_loop(use_uvloop: bool | None,
                                                     held_port: int) -> None:
    from timebound.net._channel import ChannelListener
    from timebound.net._loop import run

    async def start() -> None:
        listener = ChannelListener(host="127.0.0.1", port=held_port)
        await listener.start()

    with pytest.raises(OSError) as caught:
        run(start(), use_uvloop=use_uvloop)
    assert caught.value.errno == errno.EADDRINUSE


def test_servers_start_on_a_socket_bound_beforehand(tmp_path: Path) -> None:
    """``start(sock=...)``: what ``rpc serve`` and ``channel recv`` do so that a
    failed bind creates no storage file; the server serves on that socket."""
    from timebound.net._channel import Channel, ChannelListener
    from timebound.net._client import RpcClient
    from timebound.net._endpoint import bind_udp
    from timebound.net._server import RpcServer

    async def both() -> tuple[bytes, bytes]:
        sock = await bind_udp("127.0.0.1", 0)
        port = sock.getsockname()[1]
        server = RpcServer({"incr": lambda p: b"%d" % (int(p) + 1)}, port=port,
                           storage=str(tmp_path / "rpc.json"))
        await server.start(sock=sock)
        try:
            assert server.address == ("127.0.0.1", port)
            async with RpcClient(server.address) as client:
                reply = await client.call("incr", b"41", timeout=5.0)
        finally:
            await server.close()
        sock = await bind_udp("127.0.0.1", 0)
        listener = ChannelListener(port=sock.getsockname()[1],
                                   storage=str(tmp_path / "channel.json"))
        await listener.start(sock=sock)
        try:
            async with Channel(listener.address) as channel:
                await channel.send(b"hello", "R")
                delivered = await asyncio.wait_for(listener.get(), 5.0)
        finally:
            await listener.aclose()
        return reply, delivered.data

    assert asyncio.run(both()) == (b"42", b"hello")


@pytest.mark.parametrize("classes", [1, 3])
def test_a_python_server_on_a_port_in_use_leaves_no_file(
        classes: int, held_port: int, tmp_path: Path) -> None:
    """``RpcServer(storage=F)`` and ``ChannelListener(storage=F)`` create F when
    made; a ``start()`` that cannot bind removes what they created (nothing was
    served from it), and keeps a file that was there before."""
    from timebound.net._channel import ChannelListener
    from timebound.net._server import RpcServer

    kept = tmp_path / "kept.json"

    async def fail(make: object) -> None:
        server = make()  # type: ignore[operator]
        with pytest.raises(OSError) as caught:
            await server.start()
        assert caught.value.errno == errno.EADDRINUSE

    async def run() -> None:
        await fail(lambda: RpcServer({}, port=held_port, classes=classes,
                                     storage=str(tmp_path / "rpc.json")))
        await fail(lambda: ChannelListener(port=held_port,
                                           storage=str(tmp_path / "ch.json")))
        async with RpcServer({}, storage=str(kept)):  # a file that serves
            pass
        await fail(lambda: RpcServer({}, port=held_port, storage=str(kept)))

    asyncio.run(run())
    assert sorted(os.listdir(tmp_path)) == ["kept.json"]
