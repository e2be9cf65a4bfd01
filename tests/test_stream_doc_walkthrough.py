"""docs/stream.md's walk-through prints what the doc shows.

The walk-through splits the bundled atmostonce example into 5 files of 10 lines and
runs ``timebound stream atmostonce`` over them one file per micro-batch, then adds a
sixth file and runs it again. This test takes the command's options from the doc's
own block, runs the same query on the shared session (``stream_atmostonce``, what the
command calls, with the command's summary line; a CLI process would cost a JVM
start), and compares every line it prints with the doc's expected block, line for
line. The state store's memory varies from run to run (RocksDB's allocations): the
doc writes it ``~N KiB``, marked as varying, and the run's figure must be a size
between 1 KiB and 16 MiB; the rest of the line is compared exactly. (The rerun over a
sixth file is tests/test_stream_atmostonce.py's restart.)
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import pytest

from tests.test_stream_atmostonce import SHUFFLE, options
from timebound.examples_cli import example_path
from timebound.stream import stream_atmostonce
from timebound.stream.cli import _finish

DOC = Path(__file__).resolve().parent.parent / "docs" / "stream.md"
#: The store's memory as a run prints it, and as the doc shows it (varying: ``~``).
MEMORY = re.compile(r"store memory ([\d.]+) ([KMG]?i?B)")
DOC_MEMORY = re.compile(r"store memory ~\d+ [KM]iB")
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def _walkthrough() -> tuple[list[str], list[str]]:
    """The stream command's options and its expected lines."""
    text = DOC.read_text(encoding="utf-8")
    part = text[text.index("## Walk-through on the bundled examples"):]
    blocks = re.findall(r"```(?:sh)?\n(.*?)```", part, re.S)
    command = blocks[0].replace("\\\n", " ")
    match = re.search(r"timebound stream atmostonce (.*)", command)
    assert match, blocks[0]
    words = match.group(1).split()
    args = []
    skip = {"--source", "--checkpoint", "--sink", "--max-files-per-trigger"}
    iterator = iter(words)
    for word in iterator:
        if word in skip:
            next(iterator)
        else:
            args.append(word)
    expected = [line for line in blocks[1].splitlines() if line.strip()]
    return args, expected


def _masked(lines: list[str]) -> list[str]:
    """The run's lines with the store's memory checked (a plausible size) and masked."""
    for line in lines:
        for value, unit in MEMORY.findall(line):
            assert 1 << 10 <= float(value) * UNITS[unit] <= 16 << 20, line
    return [MEMORY.sub("store memory ~", line) for line in lines]


def _doc_masked(lines: list[str]) -> list[str]:
    """The doc's lines: every memory figure is written as varying, then masked."""
    assert all(DOC_MEMORY.search(line) for line in lines if "store memory" in line), lines
    return [DOC_MEMORY.sub("store memory ~", line) for line in lines]


@pytest.mark.spark
def test_the_walkthrough_prints_what_the_doc_shows(spark: Any, tmp_path: Path) -> None:
    args, expected = _walkthrough()
    source = tmp_path / "in"
    source.mkdir()
    lines = Path(example_path("atmostonce")).read_text(encoding="utf-8").splitlines(keepends=True)
    for index in range(0, len(lines), 10):  # split -l 10 -d -a 3 --additional-suffix=.jsonl
        (source / f"part-{index // 10:03d}.jsonl").write_text("".join(lines[index:index + 10]))
    out = io.StringIO()
    result = stream_atmostonce(str(source), str(tmp_path / "ck"), str(tmp_path / "out"),
                               options(args), max_files=1, spark=spark, conf=SHUFFLE,
                               out=out)
    with contextlib.redirect_stdout(out):
        assert _finish(result) == 0  # the command's summary line
    assert _masked(out.getvalue().splitlines()) == _doc_masked(expected)
