"""Every Python example of README.md and docs/*.md runs as written, from any
folder.

The shell examples are run by tests/test_docs_examples.py and docs/spark.md's Python
by tests/test_spark_library.py (they need the Spark session); this runs the other
fenced ``python`` blocks, each in a new empty folder (they write files such as
``latest.json`` or a dataset where they run), and checks that they end without an
error (their own ``assert`` lines included). What they print is pinned elsewhere where it is exact
(tests/test_net_live.py::test_docs_python_example_runs for docs/net.md's first)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: docs/spark.md's examples need the shared Spark session: tests/test_spark_library.py
ELSEWHERE = {"docs/spark.md"}
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)


def _blocks() -> list[tuple[str, str]]:
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        doc = str(path.relative_to(ROOT))
        if doc in ELSEWHERE:
            continue
        text = path.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            found.append((f"{doc}:{text[:match.start()].count(chr(10)) + 1}", match.group(1)))
    return found


BLOCKS = _blocks()


def test_the_examples_are_found() -> None:
    docs = {name.rsplit(":", 1)[0] for name, _ in BLOCKS}
    assert {"README.md", "docs/net.md", "docs/simulate.md"} <= docs


@pytest.mark.parametrize(("name", "code"), BLOCKS, ids=[name for name, _ in BLOCKS])
def test_python_example_runs_as_written(name: str, code: str, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(code, name, "exec"), {"__name__": "docs"})  # raises if it fails
