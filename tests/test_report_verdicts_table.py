"""The report states each row's verdict as the table's code computes it for the runs the
report was built from, and says how those runs differ from the committed table's.

One small dataset per scenario (seed 1, sizes far below the table's), one page over
the five: every row of the table is on the page once, and its verdict (and measured
text) is what ``timebound.sim._reproduce.rows_of`` -- the function that writes
docs/reproduction.md -- computes from the same datasets' scalar metrics; each
section's line names the seed, the settings that differ from the table's job (the
slotted transport among them) and the table's jobs these runs cannot answer."""

from __future__ import annotations

import html
import pathlib
import re
from typing import Any

import pytest

from timebound.claims import CLAIMS
from timebound.cli import main
from timebound.report import REPO_ROOT, write_report
from timebound.sim import _reproduce

SEED = 1

#: small runs of each scenario (the table's job of the same label, at a smaller scale)
SIZES: dict[str, dict[str, str]] = {
    "scmp": {"clients": "20", "calls": "3", "many_calls": "20",
             "rhos": "50000,200000,800000,3200000"},
    "adaptive": {"messages": "1500"},
    "slotted": {"duration": "1000000", "slots": "5000,20000"},
    "stability": {"sizes": "2,4", "duration": "100000"},
    "merge": {"duration": "1500"},
}

_ROW = re.compile(r"<tr class='claim'>(.*?)</tr>", re.S)
_CELL = re.compile(r"<td[^>]*>(.*?)</td>", re.S)


def _text(cell: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", cell))


@pytest.fixture(scope="module")
def built(tmp_path_factory: Any) -> tuple[str, dict[str, Any]]:
    """The page over the five datasets, and the table's rows computed on them."""
    root = tmp_path_factory.mktemp("data")
    jobs, results = [], []
    for scenario, sets in SIZES.items():
        out = root / scenario
        args = [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]
        assert main(["simulate", scenario, "--out", str(out), "--seed", str(SEED),
                     "--quiet", *args]) == 0
        jobs.append(_reproduce.Job(scenario, scenario, tuple(sorted(sets.items())), SEED))
        results.append(_reproduce.scalars(str(out)))
    page = pathlib.Path(write_report(str(root), out=str(root / "page.html"))).read_text()
    table_root = _reproduce.root_of(str(pathlib.Path(REPO_ROOT) / "docs" / "reproduction.md"))
    rows = _reproduce.rows_of(jobs, results, (SEED,), root=table_root)
    return page, {row.claim: row for row in rows}


def test_every_row_states_the_tables_verdict_on_the_same_runs(
        built: tuple[str, dict[str, Any]]) -> None:
    page, table = built
    shown: dict[str, list[str]] = {}
    for row in _ROW.findall(page):
        cells = [_text(c) for c in _CELL.findall(row)]
        assert cells[1] not in shown, f"row shown twice: {cells[1]}"
        shown[cells[1]] = cells
    assert sorted(shown) == sorted(c.claim for c in CLAIMS)
    words = set()
    for claim, cells in shown.items():
        row = table[claim]
        verdict, live_verdict = cells[5], cells[7]
        assert verdict.split(" (")[0] == row.verdict.split(" (")[0], claim
        assert (cells[3], verdict, live_verdict) == (row.measured, row.verdict,
                                                     row.live_verdict), claim
        words.add(verdict.split(" (")[0].split(":")[0])
    # the runs give verdicts of more than one kind (a check that can tell them apart)
    assert {"agrees", "not measured here"} <= words, words


def test_each_section_says_how_its_runs_differ_from_the_table(
        built: tuple[str, dict[str, Any]]) -> None:
    page, _ = built
    lines = [html.unescape(x) for x in re.findall(r"<p class='note against'>(.*?)</p>", page)]
    assert len(lines) == len(SIZES), lines
    assert all(f"seed {SEED} here (the table: seeds 1, 2, 3)" in line for line in lines)
    slotted = next(line for line in lines if "transport=" in line)
    assert "transport=race here (the table: paper)" in slotted
    assert "duration=1000000 here (the table: 100000000)" in slotted
    assert "live-channel" in slotted
    scmp = next(line for line in lines if "calls=3 here" in line)
    assert "scmp-restart" in scmp and "live-rpc" in scmp
