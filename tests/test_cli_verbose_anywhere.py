"""``--verbose`` is accepted after every command and subcommand, with
the meaning of the top-level flag."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from timebound.cli import build_parser, main, subparsers


def every_parser(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
                 ) -> list[tuple[str, ...]]:
    found = [path]
    for sub in subparsers(parser):
        found += every_parser(sub, (*path, sub.prog.split()[-1]))
    return found


def parser_at(parser: argparse.ArgumentParser, path: tuple[str, ...]
              ) -> argparse.ArgumentParser:
    for name in path:
        parser = next(s for s in subparsers(parser) if s.prog.split()[-1] == name)
    return parser


def test_every_subcommand_takes_verbose() -> None:
    parser = build_parser()
    paths = every_parser(parser)
    assert len(paths) > 30 and ("rpc", "serve") in paths  # the walk sees the tree
    missing = [" ".join(p) for p in paths
               if "--verbose" not in parser_at(parser, p)._option_string_actions]
    assert missing == []


def test_verbose_after_a_subcommand_sets_the_flag() -> None:
    parser = build_parser()
    args = parser.parse_args(["replay", "slotted", "-i", "a.jsonl", "-o", "b.jsonl",
                              "--verbose"])
    assert args.verbose is True
    args = parser.parse_args(["replay", "slotted", "-i", "a.jsonl", "-o", "b.jsonl"])
    assert args.verbose is False


def test_verbose_after_the_command_shows_the_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.jsonl").write_text('{"type": "send", "id": "m1", "kind": "X"}\n')
    code = main(["replay", "slotted", "-i", str(tmp_path / "bad.jsonl"),
                 "-o", str(tmp_path / "out.jsonl"), "--verbose"])
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" in err and err.rstrip().splitlines()[-1].startswith("timebound: error:")
