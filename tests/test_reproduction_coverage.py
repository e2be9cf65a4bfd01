"""docs/reproduction-coverage.md, the inventory of the five papers' claims, cannot go
stale silently.

The doc has one table per paper (and one for the rows beyond the papers). Each entry's
last column is either ``row:`` followed by the claim texts of rows of
``docs/reproduction.md`` in backticks, or ``not measured:`` followed by the reason.
Checked here: every row named (after ``row:``, or after ``row`` inside a reason) is a
claim of ``timebound.claims.CLAIMS``; every claim of ``CLAIMS`` is named in its own
paper's section; every entry is one of the two kinds, with a reason when not
measured; and every theorem, lemma, definition and figure the papers number is listed
(the papers' numbered items, below, taken from the papers' text).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from timebound.claims import CLAIMS

DOC = Path(__file__).resolve().parent.parent / "docs" / "reproduction-coverage.md"

#: A claim's ``paper`` -> the doc's section for it.
SECTIONS = {"SCMP": "SCMP", "adaptive": "Adaptive timeouts", "slotted": "Slotted FIFO",
            "stability": "Timestamp acknowledgments", "merge": "Causal deterministic merge",
            "ours (beyond the papers)": "Beyond the papers (ours)"}

#: Every numbered theorem, lemma, definition, observation, assumption, condition and
#: figure of each paper (the inventory must list each one).
NUMBERED = {
    "SCMP": ["Fig. 2-1", "Fig. 2-2", "Fig. 3-1", "Fig. 3-2", "Fig. 3-3"],
    "Adaptive timeouts": [
        *(f"Assumption {i}" for i in range(1, 6)), *(f"Condition {i}" for i in range(1, 4)),
        "Fig. 1", "Fig. 2", "Fig. 3", "Lemma 1", "Theorem 2", "Lemma 3", "Theorem 4",
        "Lemma 5", "Theorem 6", "Lemma 7", "Theorem 8", "Lemma 9", "Theorem 10",
        "Theorem 11"],
    "Slotted FIFO": [*(f"Fig. {i}" for i in range(1, 8)), "Definition 4.1",
                     "Definition 4.2"],
    "Timestamp acknowledgments": ["Fig. 1", "Fig. 2", "Fig. 3", "Fig. 4", "Theorem 1",
                                  "Theorem 2"],
    "Causal deterministic merge": [
        "Fig. 1", "Fig. 2", "Fig. 3", "Fig. 4", "Lemma 3.1", "Lemma 3.2", "Lemma 3.3",
        "Lemma 3.4", "Observation 3.5", "Theorem 3.6", "Theorem 3.7", "Theorem 3.8",
        "Lemma 4.1", "Lemma 4.2", "Theorem 4.3", "Theorem 4.4", "Theorem 4.5",
        "Theorem 4.6"],
}

#: Claims that once had no row: each must be in the inventory.
ONCE_WITHOUT_A_ROW = {
    "Timestamp acknowledgments": ["Theorem 1 (a)", "Theorem 1 (b)", "Theorem 2 (a), (b)",
                                  "3 and 4, ack loss and reordering"],
    "Adaptive timeouts": ["Theorem 11"],
    "Causal deterministic merge": ["Theorem 3.6", "Theorem 4.3, Fig. 2"],
    "SCMP": ["Fig. 3-1"],
    "Slotted FIFO": ["Definition 4.2"],
}

_KIND = r"(Fig\.|Theorems?|Lemmas?|Definition|Observation|Assumptions?|Conditions?)"
_NUM = r"\d+(?:[.-]\d+)?"
_ROWS = re.compile(r"\brows?:?\s*((?:`[^`]+`\s*)+)")


def parse(text: str) -> dict[str, list[tuple[str, str]]]:
    """section -> [(item, last column)] of the doc's tables."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
            sections[current] = []
        elif current and line.startswith("|") and not set(line) <= set("|- "):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells[0] == "item":
                continue
            assert len(cells) == 3, line
            sections[current].append((cells[0], cells[2]))
    return sections


def named_rows(cell: str) -> list[str]:
    """The claim texts a cell names (backticked right after ``row:`` or ``row``)."""
    return [name for run in _ROWS.findall(cell) for name in re.findall(r"`([^`]+)`", run)]


def numbered(item: str) -> set[str]:
    """``Theorem 4.3, Fig. 2`` -> {"Theorem 4.3", "Fig. 2"}; plurals list several."""
    out = set()
    for kind, nums in re.findall(rf"{_KIND}\s+((?:{_NUM}(?:,\s*|\s+and\s+)?)+)", item):
        singular = kind[:-1] if kind.endswith("s") else kind
        out |= {f"{singular} {n}" for n in re.findall(_NUM, nums)}
    return out


@pytest.fixture(scope="module")
def doc() -> dict[str, list[tuple[str, str]]]:
    return parse(DOC.read_text(encoding="utf-8"))


def test_the_doc_has_a_section_per_paper(doc: dict[str, list[tuple[str, str]]]) -> None:
    assert set(SECTIONS.values()) <= set(doc), sorted(doc)
    for section in SECTIONS.values():
        assert doc[section], section


def test_every_entry_names_rows_or_says_why_not(
        doc: dict[str, list[tuple[str, str]]]) -> None:
    for section, entries in doc.items():
        for item, cell in entries:
            if cell.startswith("row:"):
                assert named_rows(cell), (section, item)
            else:
                assert cell.startswith("not measured: "), (section, item, cell)
                assert len(cell.split()) >= 5, (section, item)  # a reason, not a word


def test_every_named_row_is_a_claim(doc: dict[str, list[tuple[str, str]]]) -> None:
    claims = {c.claim for c in CLAIMS}
    stale = [(section, item, name) for section, entries in doc.items()
             for item, cell in entries for name in named_rows(cell) if name not in claims]
    assert not stale, f"rows named in {DOC.name} that are not in CLAIMS: {stale}"


def test_every_claim_is_in_its_papers_section(
        doc: dict[str, list[tuple[str, str]]]) -> None:
    missing = []
    for claim in CLAIMS:
        section = SECTIONS[claim.paper]
        if not any(claim.claim in named_rows(cell) for _, cell in doc.get(section, [])):
            missing.append((section, claim.claim))
    assert not missing, f"rows of the table missing from {DOC.name}: {missing}"


def test_every_numbered_item_of_the_papers_is_listed(
        doc: dict[str, list[tuple[str, str]]]) -> None:
    for section, names in NUMBERED.items():
        listed = set().union(*(numbered(item) for item, _ in doc[section]))
        assert set(names) <= listed, (section, sorted(set(names) - listed))


def test_the_items_once_without_a_row_are_listed(
        doc: dict[str, list[tuple[str, str]]]) -> None:
    for section, items in ONCE_WITHOUT_A_ROW.items():
        listed = {item for item, _ in doc[section]}
        assert set(items) <= listed, (section, sorted(set(items) - listed))


def test_the_parser_sees_what_it_checks() -> None:
    # The checks above rest on these readings of the doc's syntax.
    assert named_rows("row: `a b` `c` (the `scmp` job)") == ["a b", "c"]
    assert named_rows("not measured: see the row `x`; `y` is a name") == ["x"]
    assert numbered("Theorem 4.3, Fig. 2") == {"Theorem 4.3", "Fig. 2"}
    assert numbered("Lemmas 3.1, 3.2, 3.4") == {"Lemma 3.1", "Lemma 3.2", "Lemma 3.4"}
    assert numbered("Fig. 2-1") == {"Fig. 2-1"}
    assert numbered("Fig. 5, (a) and (d)") == {"Fig. 5"}
