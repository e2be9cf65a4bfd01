"""One convention for every command, checked on the real parser.

The walk builds ``timebound.cli.build_parser()`` and visits every subcommand: every
option has help text (no RST markup); every wall-clock duration option (its type is a
``durations.duration_type`` parser, or its name says it is a duration) names its unit
and default; an option named ``-ms`` is only a deprecated alias of a unit-neutral name;
``--verbose`` and ``--quiet`` are taken after every command. Then a few real parses
and one live ``channel send --stats`` check the values and the printed units.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess

import pytest

from tests.test_net_channel_cli import start
from tests.test_net_support import TIMEBOUND, stop
from timebound.cli import build_parser, main, subparsers

#: Option names that are wall-clock durations (whatever their type).
DURATION_NAMES = {"--timeout", "--delay", "--jitter", "--reorder-delay", "--dead-after",
                  "--previous-key-grace", "--ack-every", "--f-hold", "--gap-wait",
                  "--tick", "--join-wait", "--kappa", "--max-time"}
#: A unit spelled in a help text.
UNIT = re.compile(r"\b(\d+(us|ms|s|m|h)|ticks?|us|µs|ms|seconds?|milliseconds?)\b")
#: RST markup that a terminal shows as is.
RST = re.compile(r"``|:\w+:`|\.\. \w+::|`[^`]+`_")


def every_parser(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
                 ) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    found = [(path, parser)]
    for sub in subparsers(parser):
        found += every_parser(sub, (*path, sub.prog.split()[-1]))
    return found


def checked() -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    return every_parser(build_parser())


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions
            if not isinstance(a, (argparse._SubParsersAction, argparse._HelpAction,
                                  argparse._VersionAction))]


def is_duration(action: argparse.Action) -> bool:
    kind = getattr(action.type, "__name__", "")
    names = set(action.option_strings)
    return (kind == "duration" or bool(names & DURATION_NAMES)
            or any(n.endswith("-ms") for n in names))


def test_the_walk_sees_every_command() -> None:
    seen = {path for path, _ in checked()}
    for path in [("replay", "atmostonce"), ("channel", "recv"), ("channel", "send"),
                 ("rpc", "serve"), ("rpc", "call"), ("rpc", "stats"), ("net", "proxy"),
                 ("simulate",), ("sweep",),
                 ("group", "join"), ("pubsub", "subscribe"), ("stream", "merge"),
                 ("bench", "pipeline"), ("pipeline",), ("demo",), ("key", "new")]:
        assert path in seen, path


def test_every_option_has_help_without_markup() -> None:
    missing, markup = [], []
    for path, parser in checked():
        for action in options(parser):
            name = " ".join(path) + " " + ("/".join(action.option_strings) or action.dest)
            text = action.help
            if not text or text == argparse.SUPPRESS:
                missing.append(name)
            elif RST.search(text):
                markup.append(name)
        for text in (parser.description or "", parser.epilog or ""):
            if RST.search(text):
                markup.append(" ".join(path) + " (description)")
    assert missing == [] and markup == []


def test_every_option_with_a_default_says_it() -> None:
    """An option that takes a value and has a default says which (flags, lists and
    options without a default aside)."""
    quiet = (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._CountAction,
             argparse._AppendAction, argparse._StoreConstAction)
    silent = []
    for path, parser in checked():
        for action in options(parser):
            default = action.default
            if (not action.option_strings or isinstance(action, quiet)
                    or default in (None, False, argparse.SUPPRESS)):
                continue
            text = (action.help or "").lower()
            if "default" not in text:
                silent.append(f"{' '.join(path)} {action.option_strings[0]}")
    assert silent == []


def test_trace_times_are_named_ticks() -> None:
    """The replay, pipeline and stream options that are trace times are ticks (plain
    integers), and their help says so: they are not wall-clock durations."""
    times = {"--rho", "--gc-every", "--beta", "--latest-every", "--recovery-grace",
             "--epsilon", "--delta"}
    seen, unnamed = 0, []
    for path, parser in checked():
        if path[:1] not in (("replay",), ("pipeline",), ("stream",)):
            continue
        for action in options(parser):
            if set(action.option_strings) & times:
                seen += 1
                if "tick" not in (action.help or "").lower():
                    unnamed.append(f"{' '.join(path)} {action.option_strings[0]}")
    assert seen >= 15 and unnamed == []


def test_every_help_renders() -> None:
    # a stray '%' or a bad '%(default)s' in a help text fails only when --help runs
    for path, parser in checked():
        text = parser.format_help()
        assert "--verbose" in text and "--quiet" in text, path


def test_every_duration_option_names_its_unit_and_default() -> None:
    found, bad = 0, []
    for path, parser in checked():
        for action in options(parser):
            if not is_duration(action):
                continue
            found += 1
            text = action.help or ""
            name = " ".join(path) + " " + "/".join(action.option_strings)
            if not (UNIT.search(text) and ("default" in text or "required" in text)):
                bad.append(name)
            # an old '-ms' name is only an alias, marked deprecated, of a neutral one
            ms = [n for n in action.option_strings if n.endswith("-ms")]
            neutral = ms[0].removesuffix("-ms") if ms else ""
            if ms and (neutral not in parser._option_string_actions
                       or "deprecated" not in text or neutral not in text):
                bad.append(name + " (-ms name without a neutral one)")
    assert found >= 8 and bad == []


def test_duration_options_take_units_and_only_ms_names_a_bare_number() -> None:
    parser = build_parser()
    join = ["group", "join", "a", "--members", "a=127.0.0.1:1"]
    assert parser.parse_args([*join, "--ack-every", "250ms"]).ack_every == 250_000
    assert parser.parse_args([*join, "--ack-every-ms", "10"]).ack_every == 10_000
    assert parser.parse_args([*join, "--dead-after", "2h"]).dead_after == 7_200_000_000
    assert parser.parse_args([*join]).ack_every == 20_000
    send = ["channel", "send", "127.0.0.1:1"]
    assert parser.parse_args([*send, "--timeout", "300us"]).timeout == 300
    assert parser.parse_args([*send, "--timeout", "1h"]).timeout == 3_600_000_000
    recv = ["channel", "recv"]
    assert parser.parse_args([*recv, "--f-hold", "2s"]).f_hold == 2_000_000
    assert parser.parse_args([*recv, "--f-hold-ms", "5"]).f_hold == 5_000
    assert parser.parse_args(recv).f_hold is None
    sub = ["pubsub", "subscribe", "127.0.0.1:1"]
    assert parser.parse_args([*sub, "--gap-wait", "1s"]).gap_wait == 1_000_000
    assert parser.parse_args([*sub, "--gap-wait-ms", "7", "--epsilon", "5ms",
                              "--delta", "1s"]).gap_wait == 7_000
    for argv in ([*join, "--dead-after", "2"], [*send, "--timeout", "1.5"],
                 [*recv, "--f-hold", "5"], [*sub, "--epsilon", "5"]):
        with pytest.raises(SystemExit):
            parser.parse_args(argv)


@pytest.mark.parametrize("argv", [
    ["group", "join", "a", "--members", "a=127.0.0.1:1", "--ack-every", "2x"],
    ["channel", "send", "127.0.0.1:1", "--timeout", "-1s"],
    ["pubsub", "merge", "m", "--epsilon", "1500us", "--delta", "5ms"],
])
def test_a_bad_duration_is_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]
                                    ) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("timebound: error:"), err


def test_verbose_and_quiet_are_taken_after_every_command() -> None:
    missing = []
    for path, parser in checked():
        for flag in ("--verbose", "--quiet"):
            action = parser._option_string_actions.get(flag)
            # below the top level the default is SUPPRESS: it never resets the top flag
            if action is None or (path and action.default != argparse.SUPPRESS):
                missing.append(" ".join(path) + " " + flag)
    assert missing == []


@pytest.mark.parametrize("argv", [
    ["group", "join", "a", "--members", "a=127.0.0.1:1"],
    ["channel", "recv"],
    ["pubsub", "merge", "m", "--epsilon", "5ms", "--delta", "5ms"],
    ["replay", "slotted", "-i", "a.jsonl", "-o", "b.jsonl"],
    ["pipeline", "data", "--out", "o"],
    ["demo"],
    ["simulate", "scmp"],  # its own --quiet no longer resets the top-level one
])
def test_quiet_and_verbose_parse_before_and_after(argv: list[str]) -> None:
    parser = build_parser()
    plain = parser.parse_args(argv)
    assert plain.quiet is False and plain.verbose is False
    for given in (["--quiet", "--verbose", *argv], [*argv, "--quiet", "--verbose"],
                  [argv[0], "--quiet", *argv[1:], "--verbose"]):
        args = parser.parse_args(given)
        assert args.quiet is True and args.verbose is True, given


def test_pipeline_takes_the_replay_names() -> None:
    args = build_parser().parse_args(["pipeline", "data", "--out", "o",
                                      "--reorder-window", "4", "--recovery-grace", "7"])
    assert (args.reorder_window, args.recovery_grace) == (4, 7)


def test_channel_send_stats_print_durations_with_their_unit() -> None:
    recv, addr = start(["channel", "recv", "--port", "0"])
    try:
        done = subprocess.run([*TIMEBOUND, "channel", "send", f"{addr[0]}:{addr[1]}",
                               "--timeout", "20s", "--stats"],
                              input=b"R one\nR two\n", capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr
        stats = json.loads(done.stderr.decode().strip().splitlines()[-1])
        for name in ("srtt", "rto"):
            assert re.fullmatch(r"\d+(\.\d+)?(us|ms|s)", stats[name]), stats
        assert stats["acks"] >= 1  # counts stay numbers
    finally:
        stop(recv)


def test_protocol_flags_are_the_contracts_options() -> None:
    """Every protocol option of the contract (``contract.OPTIONS``) is a flag of its
    replay command, of the pipeline and, for at-most-once and merge, of the stream
    command, with the contract's choices where it has some (the flags come
    from the one contract, not from lists typed again)."""
    from timebound.contract import OPTIONS

    commands = {path: parser for path, parser in checked()}
    where = {protocol: [("replay", protocol), ("pipeline",)] for protocol in OPTIONS}
    where["atmostonce"].append(("stream", "atmostonce"))
    where["merge"].append(("stream", "merge"))
    missing, wrong = [], []
    for protocol, columns in OPTIONS.items():
        for path in where[protocol]:
            flags = {flag: action for action in options(commands[path])
                     for flag in action.option_strings}
            for column in columns:
                action = flags.get(column.flag)
                if action is None:
                    missing.append(f"{' '.join(path)} {column.flag}")
                elif column.choices and tuple(action.choices or ()) != column.choices \
                        and action.metavar != "|".join(column.choices):
                    wrong.append(f"{' '.join(path)} {column.flag}: {action.choices}")
    assert missing == [] and wrong == []
