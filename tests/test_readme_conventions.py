"""What a newcomer reads first: the README opens with what a person
does with timebound, gives the two commands with how long they take, says once how to
put the command on PATH, and every doc spells the command one way."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_readme_opens_with_what_a_person_does() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    opening = text.split("\n\n")[1]  # the paragraph after the title
    for use in ("deduplicate a\nstream on Spark", "run at most once", "reproduce the\npapers"):
        assert use.replace("\n", " ") in opening.replace("\n", " "), use


def test_the_two_commands_say_how_long_they_take() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    # the measured figure and its date (tests/test_readme_times.py holds it to the file)
    when = r"# \d+ min \d\d s on 2 idle cores \(\d{4}-\d\d-\d\d\)"
    assert re.search(r"^bash scripts/setup\.sh +" + when, text, re.M)
    assert re.search(r"^bash scripts/test\.sh +" + when, text, re.M)


def test_one_spelling_of_the_command_and_one_way_onto_path() -> None:
    spelled = {str(path.relative_to(ROOT)): path.read_text(encoding="utf-8").count(
        ".venv/bin/timebound") for path in DOCS}
    assert spelled.pop("README.md") == 1, "the README names it once, where it says PATH"
    assert not any(spelled.values()), spelled
    assert 'export PATH="$PWD/.venv/bin:$PATH"' in (ROOT / "README.md").read_text()
