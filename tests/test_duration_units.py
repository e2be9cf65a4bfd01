"""Every wall-clock duration option of every command takes its value with its unit.

One grammar (``us``, ``ms``, ``s``, ``m``, ``h``), one metavar (``DURATION``), the
grammar and the range in every ``--help``; a bare number is refused in one line that
shows it with each unit the option's range allows (an old ``-ms`` name alone takes a
bare number of milliseconds: its unit is in its name), on the command line and in
``rpc serve --config`` alike.
"""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

import pytest

from tests.test_cli_conventions import checked, options
from tests.test_net_support import TIMEBOUND
from timebound.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
#: A range as the help texts spell it: ``1us..1h``.
RANGE = re.compile(r"\b\d+(us|ms|s|m|h)\.\.\d+(us|ms|s|m|h)\b")
GRAMMAR = "a duration with its unit: us, ms, s, m or h"


def duration_actions() -> list[tuple[str, argparse.Action]]:
    """Every option whose value is a wall-clock duration, by command."""
    found = []
    for path, parser in checked():
        for action in options(parser):
            if getattr(action.type, "__name__", "") == "duration" \
                    or "--tick" in action.option_strings:
                found.append((" ".join(path), action))
    return found


def test_every_duration_option_has_one_metavar_the_grammar_and_its_range() -> None:
    seen, bad = set(), []
    for command, action in duration_actions():
        flag = action.option_strings[0]
        seen.add(f"{command} {flag}")
        help_text = " ".join((action.help or "").split())
        if flag.endswith("-ms"):  # an old name: its unit in its name
            if action.metavar != "MS" or "milliseconds" not in help_text:
                bad.append(f"{command} {flag}")
            continue
        if action.metavar != "DURATION" or GRAMMAR not in help_text \
                or not RANGE.search(help_text) \
                or not ("default" in help_text or "required" in help_text):
            bad.append(f"{command} {flag}: {action.metavar} {help_text}")
    assert bad == []
    for expected in ("rpc serve --rho", "rpc serve --gc-every", "rpc serve --beta",
                     "rpc serve --latest-every", "rpc serve --recovery-grace",
                     "rpc serve --kappa", "rpc serve --previous-key-grace",
                     "rpc call --timeout", "rpc stats --timeout", "net proxy --delay",
                     "net proxy --jitter", "net proxy --reorder-delay",
                     "channel recv --f-hold", "channel send --timeout",
                     "group join --ack-every", "group join --dead-after",
                     "group join --join-wait", "pubsub publish --epsilon",
                     "pubsub merge --delta", "pubsub subscribe --gap-wait",
                     "stream merge --tick", "simulate --max-time", "sweep --max-time"):
        assert expected in seen, expected


def test_every_duration_option_refuses_a_bare_number() -> None:
    taken = []
    for command, action in duration_actions():
        convert = action.type
        if not callable(convert) or action.option_strings[0].endswith("-ms"):
            continue
        try:
            convert("300")
        except argparse.ArgumentTypeError as exc:
            assert str(exc).startswith("a duration needs its unit"), (command, exc)
        else:
            taken.append(f"{command} {action.option_strings[0]}")
    assert taken == []


@pytest.mark.parametrize(("argv", "line"), [
    (["rpc", "serve", "timebound.net.examples:app", "--storage", "s.json", "--rho", "300"],
     "timebound: error: rpc serve: argument --rho: a duration needs its unit: 300us, "
     "300ms, 300s or 300m (see 'timebound rpc serve --help')"),
    (["rpc", "call", "127.0.0.1:9", "echo", "--timeout", "1"],
     "timebound: error: rpc call: argument --timeout: a duration needs its unit: 1us, "
     "1ms, 1s, 1m or 1h (see 'timebound rpc call --help')"),
    (["channel", "send", "127.0.0.1:9", "--timeout", "1.5"],
     "timebound: error: channel send: argument --timeout: a duration needs its unit: "
     "1500us, 1500ms, 90s or 90m (see 'timebound channel send --help')"),
    (["group", "join", "a", "--members", "a=127.0.0.1:1", "--ack-every", "20"],
     "timebound: error: group join: argument --ack-every: a duration needs its unit: "
     "20us, 20ms or 20s (see 'timebound group join --help')"),
    (["net", "proxy", "--upstream", "127.0.0.1:9", "--delay", "0"],
     "timebound: error: net proxy: argument --delay: a duration needs its unit: 0us, "
     "0ms, 0s, 0m or 0h (see 'timebound net proxy --help')"),
])
def test_a_bare_number_is_one_line_with_each_unit(argv: list[str], line: str,
                                                  tmp_path: Path) -> None:
    done = subprocess.run(TIMEBOUND + argv, capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, input="")
    assert (done.returncode, done.stderr) == (2, line + "\n")
    assert list(tmp_path.iterdir()) == []  # refused before anything is made


def test_an_hour_is_a_unit_where_the_range_allows_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    parser = build_parser()
    hour = 3_600_000_000
    assert parser.parse_args(["rpc", "call", "h:1", "p", "--timeout", "1h"]).timeout == hour
    assert parser.parse_args(["channel", "send", "h:1", "--timeout", "1h"]).timeout == hour
    assert parser.parse_args(["channel", "send", "h:1", "--timeout", "24h"]).timeout == \
        24 * hour
    assert main(["channel", "send", "h:1", "--timeout", "25h"]) == 2
    assert "must be between 1us and 24h, got 25h" in capsys.readouterr().err
    assert main(["rpc", "call", "h:1", "p", "--timeout", "2h"]) == 2
    assert "must be between 1us and 1h, got 2h" in capsys.readouterr().err


def test_old_ms_names_take_a_bare_number_of_milliseconds() -> None:
    parser = build_parser()
    assert parser.parse_args(["channel", "recv", "--f-hold-ms", "5"]).f_hold == 5_000
    assert parser.parse_args(["group", "join", "a", "--members", "a=127.0.0.1:1",
                              "--ack-every-ms", "10"]).ack_every == 10_000
    assert parser.parse_args(["pubsub", "subscribe", "h:1", "--gap-wait-ms",
                              "7"]).gap_wait == 7_000


@pytest.mark.parametrize(("text", "reason"), [
    ("rho = 300", 'rho: a duration needs its unit: 300us, 300ms, 300s or 300m (a TOML '
                  'string: "300s")'),
    ('rho = "300"', "rho: a duration needs its unit: 300us, 300ms, 300s or 300m"),
    ('rho = "2h"', "rho = "),  # accepted: the run stops later, at --storage
])
def test_a_config_file_refuses_a_bare_number_as_the_command_line_does(
        text: str, reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "serve.toml"
    config.write_text(text + "\n")
    args = build_parser().parse_args(["rpc", "serve", "timebound.net.examples:app",
                                      "--config", str(config)])
    from timebound.errors import UsageError
    from timebound.net.cli.rpc import completed

    if reason == "rho = ":
        completed(args)
        assert args.rho == 7_200_000_000
        return
    with pytest.raises(UsageError) as raised:
        completed(args)
    assert str(raised.value) == f"{config}: {reason}"


def test_no_page_says_a_bare_number_is_taken() -> None:
    for page in ("README.md", "docs/net.md", "docs/spark.md", "docs/stream.md"):
        text = " ".join((ROOT / page).read_text(encoding="utf-8").split())
        assert not re.search(r"bare number[^.]*(deprecated|still means|is in (us|ms|s))",
                             text), page
