"""``timebound examples [NAME] [--copy DIR]``: the example traces bundled with timebound.

Every replay command has one example trace, installed with the package
(``timebound/examples/<name>.jsonl``), so the docs' examples run from any folder, not
only from the repository root:

- ``timebound examples`` lists them: name, rows, and the replay options that fit it;
- ``timebound examples NAME`` prints the path of one (``atmostonce`` or
  ``atmostonce.jsonl``), for ``--input "$(timebound examples atmostonce)"``;
- ``timebound examples [NAME] --copy DIR`` copies them (or one) into DIR, creating it;
  a file already in DIR is never overwritten: the command refuses before copying any.

A bad name, or a DIR that cannot take the files, is one line and exit status 2.
"""

from __future__ import annotations

import argparse
import os
from importlib import resources
from importlib.abc import Traversable

from timebound.errors import UsageError
from timebound.replay import ReplayCommand, load_commands

EXAMPLES_PACKAGE = "timebound.examples"


def _examples() -> dict[str, tuple[ReplayCommand, Traversable]]:
    """Bundled example name (its replay command's name) -> (command, file)."""
    folder = resources.files(EXAMPLES_PACKAGE)
    return {command.name: (command, folder.joinpath(command.example_file))
            for command in load_commands()}


def _pick(name: str | None) -> dict[str, tuple[ReplayCommand, Traversable]]:
    examples = _examples()
    if name is None:
        return examples
    key = name.removesuffix(".jsonl")
    if key not in examples:
        raise UsageError("NAME", f"no bundled example '{name}' "
                                 f"(one of {', '.join(examples)})")
    return {key: examples[key]}


def _rows(file: Traversable) -> int:
    return sum(1 for line in file.read_text(encoding="utf-8").splitlines() if line.strip())


def format_listing() -> str:
    """One line per bundled example: file, rows, the replay command and options that
    fit it; then how to use one."""
    examples = _examples()
    width = max(len(command.example_file) for command, _ in examples.values())
    lines = []
    for name, (command, file) in examples.items():
        replay = " ".join(("timebound replay", name, *command.example_args))
        lines.append(f"{command.example_file:<{width}}  {_rows(file):>3} rows  {replay}")
    lines.append("")
    lines.append('path of one: timebound examples NAME (e.g. --input "$(timebound examples '
                 'slotted)"); copies: timebound examples --copy DIR')
    return "\n".join(lines)


def copy_examples(target: str, name: str | None = None) -> list[str]:
    """Copy the bundled examples (or the one ``name``) into ``target``; return the paths
    written. Refuses, before writing anything, a file already there."""
    chosen = _pick(name)
    if os.path.exists(target) and not os.path.isdir(target):
        raise UsageError("--copy", f"'{target}' exists and is not a folder")
    destinations = [(os.path.join(target, command.example_file), file)
                    for command, file in chosen.values()]
    for path, _ in destinations:
        if os.path.lexists(path):
            raise UsageError("--copy", f"'{path}' already exists (nothing was copied; "
                                       "remove it or choose another folder)")
    os.makedirs(target, exist_ok=True)
    written = []
    for path, file in destinations:
        with open(path, "xb") as out:  # never over a file that appeared meanwhile
            out.write(file.read_bytes())
        written.append(path)
    return written


def example_path(name: str) -> str:
    """The filesystem path of the bundled example ``name``."""
    ((_, file),) = _pick(name).values()
    if not isinstance(file, os.PathLike):  # installed inside an archive: no path
        raise UsageError("NAME", "the examples are not plain files in this installation; "
                                 "use 'timebound examples --copy DIR'")
    return str(os.fspath(file))


def _run(args: argparse.Namespace) -> int:
    if args.copy is not None:
        for path in copy_examples(args.copy, args.name):
            print(path)
    elif args.name is not None:
        print(example_path(args.name))
    else:
        print(format_listing())
    return 0


def add_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``timebound examples`` to the command's subparsers."""
    examples = commands.add_parser(
        "examples",
        help="the bundled example traces: list them, print one's path, copy them",
        description=(
            "The example trace of every replay command, installed with timebound, so "
            "that the docs' examples run from any folder. Without NAME: list them (file, "
            "rows, the replay options that fit). With NAME: print its path, e.g. "
            "timebound replay slotted --input \"$(timebound examples slotted)\" "
            "--output out.jsonl. With --copy DIR: copy them (or NAME) into DIR, never "
            "over an existing file."
        ),
    )
    examples.add_argument("name", nargs="?", default=None, metavar="NAME",
                          help="an example: atmostonce, slotted, stability, causal or "
                               "merge (with or without .jsonl)")
    examples.add_argument("--copy", default=None, metavar="DIR",
                          help="copy the examples (or NAME) into DIR, created if missing; "
                               "refuses if a file of that name is already there")
    examples.set_defaults(handler=_run)
