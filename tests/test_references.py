"""Names that point somewhere: every repository path and test named in the code, the
tests and the docs exists, and nothing leans on a file outside the repository.

A reference is a path under one of the repository's folders (``docs/x.md``,
``tests/test_x.py``, ``benchmarks/x.py``, ``scripts/x.sh``, ``src/...``), optionally
with ``::test_name`` (that test, or the function or class of that name, is defined in
that file; ``::test_gc_*``: at least one whose name starts so), or a relative Markdown
link between docs pages. A glob (``docs/replay-*.md``)
must match at least one file. Names of files outside the repository are refused.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("docs", "tests", "benchmarks", "scripts", "src")
#: Where references are read from.
SOURCES = sorted({*ROOT.glob("src/**/*.py"), *ROOT.glob("tests/**/*.py"),
                  *ROOT.glob("docs/*.md"), *ROOT.glob("benchmarks/*.py"),
                  *ROOT.glob("benchmarks/*.md"), *ROOT.glob("scripts/*"),
                  ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / ".ci" / "run"})
PATH = re.compile(r"(?<![\w/.-])((?:" + "|".join(FOLDERS) + r")/[\w./*-]+?\.(?:md|py|sh|json|toml))"
                  r"(?:::(\w+\*?))?(?![\w/-])")
LINK = re.compile(r"\]\(([\w.-]+\.md)(?:#[\w-]+)?\)")
#: Files a project file must not name: they are not in the repository.
OUTSIDE = re.compile(r"\b(?:DESIGN\.md|TEAM\.md|STYLE\.md)|\.\./shared\b")


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, IsADirectoryError):
        return ""


def references(path: Path) -> list[tuple[str, str | None]]:
    """(path, test name or None) for every repository path ``path``'s text names."""
    text = _text(path)
    found = [(m.group(1), m.group(2)) for m in PATH.finditer(text)]
    if path.suffix == ".md" and path.parent.name == "docs":
        found += [(f"docs/{m.group(1)}", None) for m in LINK.finditer(text)]
    return found


def _defined(path: Path, name: str) -> bool:
    """``name`` (``prefix*``: a name starting so) is defined at the top of ``path``."""
    word = re.escape(name[:-1]) + r"\w*" if name.endswith("*") else re.escape(name) + r"\b"
    return re.search(rf"^\s*(?:async\s+)?(?:def|class)\s+{word}|^{word}\s*[:=]",
                     _text(path), re.M) is not None


def test_there_are_sources_and_references() -> None:
    assert len(SOURCES) > 100
    assert sum(len(references(p)) for p in SOURCES) > 100


@pytest.mark.parametrize("source", SOURCES, ids=[str(p.relative_to(ROOT)) for p in SOURCES])
def test_every_named_path_and_test_exists(source: Path) -> None:
    if source == Path(__file__).resolve():
        return  # its own examples
    missing = []
    for name, test in references(source):
        matches = sorted(ROOT.glob(name)) if "*" in name else [ROOT / name]
        if not matches or not all(m.exists() for m in matches):
            missing.append(name)
        elif test is not None and not any(_defined(m, test) for m in matches):
            missing.append(f"{name}::{test}")
    assert not missing, f"{source.relative_to(ROOT)} names what does not exist: {missing}"


@pytest.mark.parametrize("source", SOURCES, ids=[str(p.relative_to(ROOT)) for p in SOURCES])
def test_nothing_outside_the_repository_is_named(source: Path) -> None:
    if source == Path(__file__).resolve():
        return
    hits = [m.group(0) for m in OUTSIDE.finditer(_text(source))]
    assert not hits, f"{source.relative_to(ROOT)} names files outside the repository: {hits}"


def test_the_checks_see_a_missing_path_and_an_outside_name(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("see tests/test_no_such_file.py::test_x and docs/net.md, DESIGN.md",
                    encoding="utf-8")
    assert references(page) == [("tests/test_no_such_file.py", "test_x"), ("docs/net.md", None)]
    assert not (ROOT / "tests/test_no_such_file.py").exists()
    assert OUTSIDE.search(page.read_text(encoding="utf-8"))
    assert _defined(ROOT / "tests" / "test_references.py", "references")
    assert not _defined(ROOT / "tests" / "test_references.py", "no_such_function")
    assert _defined(ROOT / "tests" / "test_references.py", "test_every_named_*")
    assert not _defined(ROOT / "tests" / "test_references.py", "test_no_such_*")
