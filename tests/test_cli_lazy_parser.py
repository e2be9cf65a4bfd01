"""``timebound COMMAND ...`` builds only COMMAND's parser in full (``build_parser(name)``):
the same parser as in the whole tree, and none of the other commands' imports (a
network command does not load the simulator, pyarrow or numpy). Likewise the stream's
file source, which each of a stream's data-source Python workers imports (several per
query start): it loads neither pandas nor the processors (0.9 -> 0.45 s of CPU each)."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from tests.test_cli_verbose_anywhere import every_parser, parser_at
from timebound.cli import COMMANDS, build_parser, command_of, subparsers


def _names(parser) -> list[str]:  # type: ignore[no-untyped-def]
    return [sub.prog.split()[-1] for sub in subparsers(parser)]


def test_the_whole_tree_lists_every_command_once() -> None:
    assert _names(build_parser()) == list(COMMANDS)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_command_alone_is_built_as_in_the_whole_tree(command: str) -> None:
    whole, alone = build_parser(), build_parser(command)
    assert sorted(_names(alone)) == sorted(_names(whole))  # argparse's choices
    paths = [p for p in every_parser(whole) if p[:1] == (command,)]
    assert paths == [p for p in every_parser(alone) if p[:1] == (command,)]
    for path in paths:
        assert parser_at(alone, path).format_help() == parser_at(whole, path).format_help()


@pytest.mark.parametrize(("argv", "command"), [
    ([], None), (["--help"], None), (["--verbose", "--quiet", "rpc", "serve", "x"], "rpc"),
    (["replay", "atmostonce", "-i", "a"], "replay"), (["nosuch"], "nosuch")])
def test_the_command_is_the_first_word_that_is_not_an_option(
        argv: list[str], command: str | None) -> None:
    assert command_of(argv) == command


def test_an_unknown_command_builds_the_whole_tree() -> None:
    whole, unknown = build_parser(), build_parser("nosuch")
    assert unknown.format_help() == whole.format_help()  # every command's help line
    assert [parser_at(unknown, (name,)).format_help() for name in COMMANDS] == \
        [parser_at(whole, (name,)).format_help() for name in COMMANDS]


def _loaded(statement: str, modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` a fresh Python process has loaded after ``statement``."""
    probe = f"import sys; {statement}; print(sorted(m for m in {modules!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60, check=True)
    return list(ast.literal_eval(done.stdout.strip()))


def test_a_network_command_imports_neither_the_simulator_nor_pyarrow() -> None:
    assert _loaded("import timebound.cli as cli; cli.build_parser('rpc')",
                   ("timebound.sim", "timebound.replay", "pyarrow", "numpy")) == []


def test_the_stream_source_imports_neither_pandas_nor_the_processors() -> None:
    assert _loaded("import timebound.stream._source",
                   ("pandas", "timebound.spark", "timebound.spark.traces")) == []
