"""Every runnable example of README.md and docs/*.md runs as written and prints what
the doc shows.

A runnable example is a fenced block whose info string is ``console runnable``::

    ```console runnable
    $ timebound examples slotted
    .../timebound/examples/slotted.jsonl
    ```

Lines starting with ``$ `` are commands (a line ending in ``\\`` continues on the
next); the lines after a command, up to the next command, are what it prints, stdout
and stderr together. In the expected output a line that is only ``...`` stands for any
number of lines (none included), and ``...`` inside a line for any text on that line
(times, paths, ids). Trailing spaces and trailing empty lines are ignored. Each block
runs in a new empty temporary folder (never the repository), its commands one after
the other through ``bash -c`` in that folder, with the venv's ``bin`` first on PATH,
as a user who followed the README's set-up runs them. ``TIMEBOUND_DOCS_BIN`` names
another folder to put before it (a ``timebound`` installed elsewhere).
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = "```console runnable"
PLACEHOLDER = "..."
COMMAND_TIMEOUT_S = 120  # a hung command fails its example, never the whole run
WORKERS = 2  # examples run side by side (the suite runs on 2 cores)


@dataclass(frozen=True)
class Step:
    command: str
    expected: tuple[str, ...]


@dataclass(frozen=True)
class Example:
    doc: str  # path relative to the repository
    line: int  # 1-based line of the opening fence
    steps: tuple[Step, ...]

    @property
    def name(self) -> str:
        return f"{self.doc}:{self.line}"


def parse_examples(text: str, doc: str) -> list[Example]:
    """The runnable examples of one Markdown text."""
    examples: list[Example] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        if lines[index].strip() != FENCE:
            index += 1
            continue
        start = index + 1
        body: list[str] = []
        index += 1
        while index < len(lines) and lines[index].strip() != "```":
            body.append(lines[index])
            index += 1
        if index == len(lines):
            raise AssertionError(f"{doc}:{start}: runnable example without a closing fence")
        index += 1
        examples.append(Example(doc, start, _steps(body, f"{doc}:{start}")))
    return examples


def _steps(body: list[str], where: str) -> tuple[Step, ...]:
    steps: list[Step] = []
    command: list[str] | None = None
    expected: list[str] = []
    lines = iter(body)
    for line in lines:
        if line.startswith("$ "):
            if command is not None:
                steps.append(Step("\n".join(command), tuple(expected)))
            command, expected = [line[2:]], []
            while command[-1].endswith("\\"):
                command.append(next(lines, ""))
        elif command is None:
            raise AssertionError(f"{where}: output before the first '$ ' command: {line!r}")
        else:
            expected.append(line)
    if command is None:
        raise AssertionError(f"{where}: runnable example without a '$ ' command")
    steps.append(Step("\n".join(command), tuple(expected)))
    return tuple(steps)


def _trimmed(lines: list[str] | tuple[str, ...]) -> list[str]:
    out = [line.rstrip() for line in lines]
    while out and not out[-1]:
        out.pop()
    return out


def _line_matches(expected: str, actual: str) -> bool:
    if PLACEHOLDER not in expected:
        return expected == actual
    pattern = ".*".join(re.escape(part) for part in expected.split(PLACEHOLDER))
    return re.fullmatch(pattern, actual) is not None


def output_matches(expected: tuple[str, ...] | list[str], actual: str) -> bool:
    """Whether ``actual`` (a command's output) is what the doc shows, placeholders
    included."""
    want, got = _trimmed(expected), _trimmed(actual.splitlines())
    memo: dict[tuple[int, int], bool] = {}

    def match(i: int, j: int) -> bool:
        if (i, j) not in memo:
            if i == len(want):
                result = j == len(got)
            elif want[i].strip() == PLACEHOLDER:  # any number of lines
                result = match(i + 1, j) or (j < len(got) and match(i, j + 1))
            else:
                result = j < len(got) and _line_matches(want[i], got[j]) and match(i + 1, j + 1)
            memo[i, j] = result
        return memo[i, j]

    return match(0, 0)


def _all_examples() -> list[Example]:
    examples: list[Example] = []
    for path in DOCS:
        examples += parse_examples(path.read_text(encoding="utf-8"),
                                   str(path.relative_to(REPO)))
    return examples


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    folders = [str(Path(sys.executable).parent)]  # the venv's bin: timebound, python
    extra = env.get("TIMEBOUND_DOCS_BIN")
    if extra:
        folders.insert(0, extra)
    env["PATH"] = os.pathsep.join([*folders, env.get("PATH", "")])
    env.pop("PYTHONPATH", None)  # the installed package, as a user has it
    return env


EXAMPLES = _all_examples()


def test_the_docs_have_runnable_examples() -> None:
    """The marker is in use where the docs promise it: the README and the replay docs."""
    docs = {example.doc for example in EXAMPLES}
    assert "README.md" in docs
    assert {"docs/replay-atmostonce.md", "docs/replay-slotted.md"} <= docs
    assert len(EXAMPLES) >= 8, [example.name for example in EXAMPLES]


def test_the_matcher_tells_output_apart() -> None:
    assert output_matches(["a 1", "b 2"], "a 1\nb 2  \n\n")
    assert not output_matches(["a 1", "b 2"], "a 1\nb 3\n")
    assert not output_matches(["a 1"], "a 1\nb 2\n")  # no output left unchecked
    assert output_matches(["a ...", "...", "z"], "a 123\nb\nc\nz\n")
    assert output_matches(["...", "z"], "z\n")  # '...' may stand for no line
    assert not output_matches(["a ...", "z"], "b 123\nz\n")
    assert not output_matches(["...", "z"], "z\ny\n")


def _run(example: Example) -> list[tuple[Step, int, str]]:
    """Run ``example``'s commands in a new empty folder: (step, exit status, output)."""
    env = _environment()
    with tempfile.TemporaryDirectory(prefix="timebound-doc-") as folder:
        done = []
        for step in example.steps:
            result = subprocess.run(["bash", "-c", step.command], cwd=folder, env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, timeout=COMMAND_TIMEOUT_S,
                                    stdin=subprocess.DEVNULL)
            done.append((step, result.returncode, result.stdout))
        return done


@pytest.fixture(scope="module")
def outputs(request: pytest.FixtureRequest) -> dict[str, list[tuple[Step, int, str]]]:
    """The output of every selected runnable example, the examples run side by side
    (each command is mostly the interpreter's start-up: a few in parallel keep the
    test short)."""
    selected = {params["example"].name for params in
                (getattr(getattr(item, "callspec", None), "params", {})
                 for item in request.session.items) if "example" in params}
    todo = [example for example in EXAMPLES if example.name in selected]
    with concurrent.futures.ThreadPoolExecutor(max_workers=WORKERS) as pool:
        return dict(zip((example.name for example in todo), pool.map(_run, todo),
                        strict=True))


@pytest.mark.parametrize("example", EXAMPLES, ids=[example.name for example in EXAMPLES])
def test_doc_example_runs_as_written(example: Example,
                                     outputs: dict[str, list[tuple[Step, int, str]]]) -> None:
    for step, status, printed in outputs[example.name]:
        assert output_matches(step.expected, printed), (
            f"{example.name}: '$ {step.command}' printed (exit {status}):\n"
            f"{printed}\n--- the doc shows:\n" + "\n".join(step.expected))


# -- timebound examples (src/timebound/examples_cli.py) ----------------------------------


def _examples_cli(argv: list[str]) -> int:
    """``timebound examples ARGV`` through the command's entry point."""
    from timebound.cli import main

    return main(["examples", *argv])


def test_examples_name_prints_a_path_that_reads_from_any_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from timebound.replay import load_commands

    monkeypatch.chdir(tmp_path)
    for command in load_commands():
        for name in (command.name, command.example_file):
            assert _examples_cli([name]) == 0
            path = Path(capsys.readouterr().out.strip())
            assert path.is_absolute() and path.name == command.example_file
            assert path.read_text(encoding="utf-8").count("\n") >= 20
    assert _examples_cli([]) == 0
    listing = capsys.readouterr().out
    for command in load_commands():
        assert f"timebound replay {command.name}" in listing


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("timebound: error: "), captured.err
    return lines[0]


def test_examples_copy_refuses_to_overwrite_and_copies_nothing_then(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "traces"
    assert _examples_cli(["merge", "--copy", str(target)]) == 0
    assert sorted(p.name for p in target.iterdir()) == ["merge.jsonl"]
    (target / "merge.jsonl").write_text("mine\n", encoding="utf-8")
    capsys.readouterr()
    assert _examples_cli(["--copy", str(target)]) == 2
    assert "merge.jsonl' already exists" in _one_error_line(capsys)
    assert sorted(p.name for p in target.iterdir()) == ["merge.jsonl"]  # nothing copied
    assert (target / "merge.jsonl").read_text(encoding="utf-8") == "mine\n"
    assert _examples_cli(["nope"]) == 2
    assert "no bundled example 'nope'" in _one_error_line(capsys)
    assert _examples_cli(["--copy", str(tmp_path / "all")]) == 0
    copied = capsys.readouterr().out.split()
    assert len(copied) == 5 and all(Path(p).is_file() for p in copied)
    (tmp_path / "file").write_text("", encoding="utf-8")
    assert _examples_cli(["--copy", str(tmp_path / "file")]) == 2
    assert "is not a folder" in _one_error_line(capsys)
