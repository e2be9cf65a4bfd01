"""The report's claim rows and docs/reproduction.md's rows come from one evaluation
(``timebound.claims.evaluate``), so on the same runs they never disagree: the same scenario on seeds 1-3, once as a ``timebound sweep`` dataset read by
``timebound report``, once as the reproduction's jobs; every row the page shows --
measured text and verdict included -- equals the table's row for that claim."""

from __future__ import annotations

import html
import json
import pathlib
import re
from typing import Any

import pytest

from timebound.cli import main
from timebound.report import REPO_ROOT, claim_rows
from timebound.sim import _reproduce

pytestmark = pytest.mark.spark

SEEDS = (1, 2, 3)

_ROW = re.compile(r"<tr class='claim'>((?:<td>.*?</td>){5})<td class='verdict \w+'>(.*?)</td>"
                  r"<td>(.*?)</td><td class='verdict \w+'>(.*?)</td></tr>")


def page_rows(page: str) -> list[tuple[str, ...]]:
    """(paper, claim, published, measured, where, verdict, live measured (and where),
    live verdict) of every claim row shown."""
    out = []
    for cells, verdict, live, live_verdict in _ROW.findall(page):
        shown = [_text(c) for c in re.findall(r"<td>(.*?)</td>", cells)]
        out.append((*shown, *(_text(x) for x in (verdict, live, live_verdict))))
    return out


def _text(cell: str) -> str:
    """A cell's text: a long one is folded in ``<details>`` (its summary, then the
    rest), which the page shows on a click."""
    return html.unescape(re.sub(r"<[^>]+>", "", cell))


def table_rows(scenario: str, params: dict[str, str],
               seeds: tuple[int, ...]) -> dict[str, Any]:
    """The table's way: one reproduction job per seed, its metrics through the table's
    evaluation, with the root the table of docs/reproduction.md uses."""
    jobs = [_reproduce.Job(scenario, scenario, tuple(sorted(params.items())), s)
            for s in seeds]
    results = _reproduce.run_local(jobs, 1, None)
    root = _reproduce.root_of(str(pathlib.Path(REPO_ROOT) / "docs" / "reproduction.md"))
    return {row.claim: row for row in _reproduce.rows_of(jobs, results, seeds, root=root)}


def assert_agree(shown: list[tuple[str, ...]], table: dict[str, Any], seeds: int) -> None:
    assert shown, "the page shows no claim row"
    for paper, claim, published, measured, where, verdict, live, live_verdict in shown:
        row = table[claim]
        assert (paper, published, where) == (row.paper, row.published, row.where)
        assert (measured, verdict) == (row.measured, row.verdict), claim
        assert live.startswith(row.live_measured) and live_verdict == row.live_verdict
    # rows measured on the scenario's own runs are among them, over every seed
    assert any(table[claim].seeds == seeds for _, claim, *_ in shown)


def _report(data: pathlib.Path, tmp_path: pathlib.Path) -> list[tuple[str, ...]]:
    page = tmp_path / "page.html"
    assert main(["report", str(data), "--out", str(page)]) == 0
    return page_rows(page.read_text())


def test_the_report_shows_the_tables_rows_over_three_seeds(
        spark: Any, tmp_path: pathlib.Path, capsys: Any) -> None:
    """A sweep over seeds 1-3 (a one-value grid): the page's merge rows are the table's
    rows on the same three runs, min-max ranges and verdicts included."""
    params = {"duration": "1500"}
    sweep = tmp_path / "sweep"
    assert main(["sweep", "merge", "--grid", "duration=1500", "--seeds", "3", "--out",
                 str(sweep), "--quiet"]) == 0
    manifest = json.loads((sweep / "manifest.json").read_text())
    assert manifest["sweep"]["seeds"] == list(SEEDS)
    shown = _report(sweep, tmp_path)
    capsys.readouterr()
    table = table_rows("merge", params, SEEDS)
    assert_agree(shown, table, len(SEEDS))
    found = claim_rows(str(sweep), manifest, "merge")
    assert found is not None and "seeds 1, 2, 3" in found[1]
    assert [r.claim for r in found[0]] == [claim for _, claim, *_ in shown]


def test_the_report_shows_the_tables_rows_bench_row_included(
        tmp_path: pathlib.Path, capsys: Any) -> None:
    """One ``simulate`` dataset (seed 1): the page's SCMP rows, the RPC row read from
    the same bench file as the table's among them, are the table's rows on that run."""
    params = {"experiments": "sweep,skew,crash", "clients": "100", "calls": "3"}
    data = tmp_path / "ds"
    sets = [a for k, v in params.items() for a in ("--set", f"{k}={v}")]
    assert main(["simulate", "scmp", "--out", str(data), "--seed", "1", *sets,
                 "--quiet"]) == 0
    shown = _report(data, tmp_path)
    capsys.readouterr()
    table = table_rows("scmp", params, (1,))
    assert_agree(shown, table, 1)
    rpc = next(row for row in shown if "at-most-once RPC" in row[1])
    bench = pathlib.Path(REPO_ROOT) / "benchmarks" / "rpc_bench.md"
    assert rpc[5].startswith("not yet measured") == (not bench.exists())
