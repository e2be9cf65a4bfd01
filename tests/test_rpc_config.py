"""``rpc serve --config FILE`` (TOML), ``rpc call``'s payload from stdin and ``@FILE``
end to end, and the duration options of ``rpc serve|call|stats`` and ``net proxy``
."""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from tests.test_net_support import TIMEBOUND, start_server, stop
from timebound.cli import build_parser, main
from timebound.net.cli import SHOWN_RECEIVER_DEFAULTS

APP = "timebound.net.examples:app"
#: Bytes no UTF-8 argument could carry: NUL, 0xff, CR LF, a lone continuation byte.
PAYLOAD = b"\x00\xff\r\n\x80tail" + bytes(range(256))


def _parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def _serve_args(*argv: str) -> argparse.Namespace:
    """``rpc serve ARGV`` parsed and completed from its ``--config`` as ``run_serve``
    does, without serving."""
    args = _parse("rpc", "serve", APP, *argv)
    args.config_spec.apply(args, args.config)
    return args


def _one_line(capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("timebound: error: "), err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def test_config_file_sets_options_and_the_command_line_overrides_it(tmp_path: Path) -> None:
    config = tmp_path / "serve.toml"
    config.write_text('storage = "latest.json"\nrho = "10s"\ngc-every = "500ms"\n'
                      'workers = 0\nno_uvloop = true\nestimator = "fixed"\n'
                      'metrics-host = "::1"\n')
    args = _serve_args("--config", str(config), "--rho", "7s", "--workers", "3")
    assert (args.rho, args.workers) == (7_000_000, 3)  # the command line wins
    assert (args.storage, args.gc_every, args.no_uvloop, args.metrics_host) == (
        "latest.json", 500_000, True, "::1")  # the file, over the defaults
    assert (args.host, args.port, args.beta, args.kappa, args.insecure) == (
        "127.0.0.1", 0, None, 0, False)  # the defaults where neither says
    plain = _serve_args("--storage", "s.json")  # without --config: the defaults
    assert (plain.rho, plain.workers, plain.no_uvloop, plain.previous_key_grace) == (
        None, None, False, 3_600_000_000)


@pytest.mark.parametrize(("text", "key", "reason"), [
    ('bogus = 1', "bogus", "unknown key"),
    ('rho = 5', "rho", 'needs its unit: 5us, 5ms, 5s, 5m or 5h (a TOML string: "300s")'),
    ('rho = true', "rho", "expected a duration string"),
    ('rho = "5"', "rho", "needs its unit"),
    ('rho = "0s"', "rho", "must be between"),
    ('workers = "4"', "workers", "expected an integer"),
    ('no-uvloop = 1', "no-uvloop", "expected true or false"),
    ('estimator = "best"', "estimator", "expected one of"),
    ('port = 70000', "port", "must be in 0..65535"),  # checked after parsing
    ('workers = 5000', "workers", "must be in [0, 1024]"),
    ('beta = "1ms"', "beta", "must be >= --latest-every (1s), got 1ms"),
    ('gc-every = "1s"\ngc_every = "2s"', "gc_every", "given twice"),
])
def test_config_file_refuses_in_one_line_naming_file_and_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, key: str,
        reason: str) -> None:
    config = tmp_path / "bad.toml"
    storage = tmp_path / "latest.json"
    config.write_text(f'{text}\nstorage = "{storage}"\n')
    # A module that does not exist: every option is checked before the app is
    # imported, so a file wrongly accepted fails on the import, never serves.
    assert main(["rpc", "serve", "h6_no_such_module:app", "--config", str(config)]) == 2
    _one_line(capsys, f"{config}: {key}: ", reason)
    assert not storage.exists()  # refused before anything is made


def test_config_file_unreadable_or_not_toml_and_storage_required(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rpc", "serve", APP, "--config", str(tmp_path / "none.toml")]) == 2
    _one_line(capsys, "--config: cannot read", "none.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[table\n")
    assert main(["rpc", "serve", APP, "--config", str(bad)]) == 2
    _one_line(capsys, f"--config: {bad}: not valid TOML")
    assert main(["rpc", "serve", APP]) == 2
    _one_line(capsys, "--storage", "required")
    # A value the command line gives is blamed on the command line, not on the file.
    good = tmp_path / "good.toml"
    good.write_text(f'storage = "{tmp_path / "l.json"}"\n')
    assert main(["rpc", "serve", APP, "--config", str(good), "--port", "70000"]) == 2
    _one_line(capsys, "--port: port must be in 0..65535")


def test_served_from_a_config_file_and_payload_from_stdin_and_a_file(tmp_path: Path) -> None:
    (tmp_path / "h6digest.py").write_text(
        "import hashlib\n"
        "def digest(payload: bytes) -> bytes:\n"
        "    return b'%d %s' % (len(payload), hashlib.sha256(payload).hexdigest().encode())\n"
        "app = {'digest': digest}\n")
    storage = tmp_path / "latest.json"
    config = tmp_path / "serve.toml"
    config.write_text(f'storage = "{storage}"\nrho = "30s"\nworkers = 0\nbeta = "1ms"\n')
    proc, (host, port) = start_server(["h6digest:app", "--config", str(config),
                                       "--beta", "3s"],  # overrides the file's 1ms
                                      env={"PYTHONPATH": str(tmp_path)})
    try:
        assert storage.exists()  # the file's --storage
        expected = b"%d %s\n" % (len(PAYLOAD), hashlib.sha256(PAYLOAD).hexdigest().encode())
        (tmp_path / "payload.bin").write_bytes(PAYLOAD)
        target = f"{host}:{port}"
        from_stdin = subprocess.run(TIMEBOUND + ["rpc", "call", target, "digest", "-"],
                                    input=PAYLOAD, capture_output=True, timeout=60)
        assert (from_stdin.returncode, from_stdin.stdout) == (0, expected), from_stdin.stderr
        from_file = subprocess.run(
            TIMEBOUND + ["rpc", "call", target, "digest", f"@{tmp_path / 'payload.bin'}"],
            capture_output=True, timeout=60)
        assert (from_file.returncode, from_file.stdout) == (0, expected), from_file.stderr
        stats = subprocess.run(TIMEBOUND + ["rpc", "stats", target, "--json"],
                               capture_output=True, timeout=60)
        assert json.loads(stats.stdout)["executions"] == 2
    finally:
        stop(proc)


def test_duration_options_take_their_unit() -> None:
    serve = _parse("rpc", "serve", APP, "--rho", "300s", "--beta", "2500ms",
                   "--gc-every", "250ms", "--latest-every", "1s", "--kappa", "5s",
                   "--recovery-grace", "0s", "--previous-key-grace", "2h")
    assert (serve.rho, serve.beta, serve.gc_every, serve.latest_every, serve.kappa,
            serve.recovery_grace, serve.previous_key_grace) == (
        300_000_000, 2_500_000, 250_000, 1_000_000, 5_000_000, 0, 7_200_000_000)
    for command in ("call", "stats"):
        extra = ["PROC"] if command == "call" else []
        assert _parse("rpc", command, "h:1", *extra, "--timeout", "500ms").timeout == 500_000
        assert _parse("rpc", command, "h:1", *extra, "--timeout", "1h").timeout == 3_600_000_000
        assert _parse("rpc", command, "h:1", *extra).timeout == 2_000_000
    proxy = _parse("net", "proxy", "--upstream", "h:1", "--delay", "20ms", "--jitter",
                   "1ms", "--reorder-delay", "300us")
    assert (proxy.delay, proxy.jitter, proxy.reorder_delay) == (20_000, 1_000, 300)
    assert _parse("net", "proxy", "--upstream", "h:1").reorder_delay == 5_000


@pytest.mark.parametrize("argv", [
    ["rpc", "call", "127.0.0.1:9", "x", "--timeout", "0s"],
    ["rpc", "call", "127.0.0.1:9", "x", "--timeout", "2h"],
    ["rpc", "stats", "127.0.0.1:9", "--timeout", "61m"],
    ["rpc", "serve", APP, "--storage", "s", "--rho", "0us"],
    ["rpc", "serve", APP, "--storage", "s", "--rho", "5 s"],
    ["net", "proxy", "--upstream", "127.0.0.1:9", "--delay", "61s"],
])
def test_bad_durations_are_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]
                                    ) -> None:
    assert main(argv) == 2
    _one_line(capsys, argv[-2])


def test_one_timeout_line_for_call_and_stats(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rpc", "call", "127.0.0.1:9", "x", "--timeout", "150ms"]) == 3
    call = capsys.readouterr().err
    assert main(["rpc", "stats", "127.0.0.1:9", "--timeout", "150ms"]) == 3
    stats = capsys.readouterr().err
    assert call == stats == ("timebound: timeout: no reply from 127.0.0.1:9 within 150ms "
                             "(the call ran at most once)\n")


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._subparsers._group_actions:  # type: ignore[union-attr]
        for name in ("rpc", "net"):
            sub = action.choices[name]  # type: ignore[index]
            for inner in sub._subparsers._group_actions:
                for command, leaf in inner.choices.items():
                    if f"{name} {command}" in ("rpc serve", "rpc call", "rpc stats",
                                               "net proxy"):
                        found[f"{name} {command}"] = leaf
    return found


def test_every_option_has_help_and_durations_say_unit_and_default() -> None:
    commands = _commands()
    assert set(commands) == {"rpc serve", "rpc call", "rpc stats", "net proxy"}
    for name, parser in commands.items():
        for action in parser._actions:
            if not action.option_strings:
                continue
            flag = max(action.option_strings, key=len)
            assert action.help and action.help != argparse.SUPPRESS, (name, flag)
            if getattr(action.type, "__name__", "") == "duration":
                assert "a duration with its unit: us, ms, s, m or h" in action.help, (
                    name, flag)
                assert "default " in action.help and ".." in action.help
                assert action.metavar == "DURATION", (name, flag)
    resilient = next(a for a in commands["rpc serve"]._actions if a.dest == "resilient")
    assert resilient.help is not None
    assert "crash rows" not in resilient.help and "simulated" not in resilient.help
    assert "--storage" in resilient.help


def test_shown_receiver_defaults_are_the_servers() -> None:
    from timebound.net import _server

    assert SHOWN_RECEIVER_DEFAULTS == {
        "rho": _server.DEFAULT_RHO, "gc_every": _server.DEFAULT_GC_EVERY,
        "beta": _server.DEFAULT_BETA, "latest_every": _server.DEFAULT_LATEST_EVERY}
