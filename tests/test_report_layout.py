"""The report reads at a glance: a trend's verdict only from two or
more values; a sweep's header and plots show its grid (x = the swept key, one line per
setting not swept, the band over seeds); wide tables never wrap a number; no colour
twice within a figure; legends outside the data; axis labels inside the figure.

Checked on the figure objects (``report._figures.recording``), the HTML, and a
headless-Chromium rendering (layout measured in the browser; one screenshot each,
paths printed; skipped where Chromium is not installed)."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Any

import pytest
from PIL import Image

from timebound import sweep
from timebound.cli import main
from timebound.report import _figures as fig
from timebound.report import write_report
from timebound.report._build import WIDE

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(BROWSER is None, reason="Chromium is not installed")


def _sweep(out: pathlib.Path, scenario: str, items: list[str], seeds: int) -> None:
    """A sweep dataset built as ``timebound sweep`` builds it (its grid, its run of one
    point, its merge), the points run here one after the other instead of as Spark
    tasks."""
    grid = sweep.parse_grid(items, scenario)
    staging = tempfile.mkdtemp(dir=out.parent)
    try:
        pts = sweep.points(scenario, grid, seeds, staging)
        results = [sweep.run_point(p) for p in pts]
        sweep.merge(str(out), scenario, pts, results, grid, seeds)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _report(folder: pathlib.Path) -> tuple[str, list[fig.Layout]]:
    with fig.recording() as layouts:
        path = write_report(str(folder))
    return pathlib.Path(path).read_text(), layouts


@pytest.fixture(scope="module")
def demo(tmp_path_factory: Any) -> tuple[pathlib.Path, str, list[fig.Layout]]:
    """The demo's SCMP section at a small size: 12 runs, ~40 parameters."""
    root = tmp_path_factory.mktemp("demo")
    assert main(["simulate", "scmp", "--out", str(root / "scmp"), "--seed", "1", "--quiet",
                 "--set", "clients=20", "--set", "calls=3", "--set", "many_calls=20",
                 "--set", "rhos=50000,200000,800000,3200000"]) == 0
    page, layouts = _report(root)
    return root / "report.html", page, layouts


@pytest.fixture(scope="module")
def swept(tmp_path_factory: Any) -> tuple[pathlib.Path, str, list[fig.Layout]]:
    """A merge sweep: deltas 5, 10, 20 x duration 150, 300, seeds 1-2."""
    root = tmp_path_factory.mktemp("sweep")
    _sweep(root / "merge", "merge", ["deltas=5,10,20", "duration=150,300"], 2)
    page, layouts = _report(root / "merge")
    return root / "merge" / "report.html", page, layouts


def _claims(page: str) -> dict[str, tuple[str, str]]:
    out = {}
    for row in re.findall(r"<tr class='claim'>(.*?)</tr>", page, re.S):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
        out[cells[1]] = (cells[3], cells[5])  # measured, verdict (the live ones follow)
    return out


def _overlap(a: fig.Box, b: fig.Box) -> bool:
    return a[0] < b[2] - 1 and b[0] < a[2] - 1 and a[1] < b[3] - 1 and b[1] < a[3] - 1


def _inside(inner: fig.Box, outer: fig.Box) -> bool:
    return (inner[0] >= outer[0] - 1 and inner[1] >= outer[1] - 1
            and inner[2] <= outer[2] + 1 and inner[3] <= outer[3] + 1)


def _check_figures(layouts: list[fig.Layout]) -> None:
    assert layouts
    for layout in layouts:
        assert len(set(layout.colours)) == len(layout.colours), (layout.title,
                                                                 layout.colours)
        for legend in layout.legends:
            assert _inside(legend, layout.figure), (layout.title, "legend cut off")
            for axes in layout.axes:
                assert not _overlap(legend, axes), (layout.title, "legend over the data")
        for label in layout.labels:
            assert _inside(label, layout.figure), (layout.title, "label cut off", label)


def test_demo_figures_distinct_colours_legends_outside(
        demo: tuple[pathlib.Path, str, list[fig.Layout]]) -> None:
    _, page, layouts = demo
    _check_figures(layouts)
    estimate = next(x for x in layouts if x.title == "estimate in force")
    # one colour per run (13 scmp runs: every run a line, more runs than a 10-colour cycle)
    assert len(estimate.colours) == 13 and len(estimate.legends) == 1


def test_demo_wide_parameter_table_is_split_and_transposed(
        demo: tuple[pathlib.Path, str, list[fig.Layout]]) -> None:
    _, page, _ = demo
    section = page.split("<h3>Runs and their parameters</h3>")[1].split("<h3>")[0]
    assert "the same on every run: beta=2000000" in section
    table = re.search(r"<div class='wide'><table class='([^']*)'>(.*?)</table>", section)
    assert table is not None
    header = re.findall(r"<th>(.*?)</th>", table.group(2).split("</tr>")[0])
    assert len(header) - 1 <= WIDE or table.group(1) == "data transposed"
    assert ".wide td,.wide th{white-space:nowrap" in page


def test_sweep_plots_the_grid(swept: tuple[pathlib.Path, str, list[fig.Layout]]) -> None:
    _, page, layouts = swept
    _check_figures(layouts)
    late = next(x for x in layouts if x.title == "late_pct vs deltas")
    # one line per setting not swept (duration), x = the swept key, not a dot per run
    assert sorted(label for label, _ in late.lines) == ["duration=150", "duration=300"]
    assert all(xs == [5.0, 10.0, 20.0] for _, xs in late.lines)
    by_duration = next(x for x in layouts if x.title == "late_pct vs duration")
    assert sorted(label for label, _ in by_duration.lines) == [
        "deltas=10", "deltas=20", "deltas=5"]


def test_sweep_header_names_the_grid(
        swept: tuple[pathlib.Path, str, list[fig.Layout]]) -> None:
    _, page, _ = swept
    assert "seed <b>None" not in page and "seed None" not in page
    assert ("a sweep: <span class='swept'>deltas = 5, 10, 20; duration = 150, 300</span>"
            " (6 grid point(s)) x seeds 1, 2: 12 run(s)") in page
    params = re.search(r"<p class='params'>parameters not swept: (.*?)</p>", page)
    assert params is not None
    assert "deltas=" not in params.group(1) and "duration=" not in params.group(1)


def test_a_trend_from_one_value_is_not_measured_here(tmp_path: pathlib.Path) -> None:
    """One delta: the trend claim cannot fail, so it has no verdict."""
    _sweep(tmp_path / "one", "merge", ["deltas=5", "duration=150"], 2)
    page, _ = _report(tmp_path / "one")
    measured, verdict = _claims(page)["larger delta, fewer late losses (4.1, 6)"]
    assert verdict == ("not measured here (a trend needs at least two distinct values; "
                       "this data has delta=5 only)"), (measured, verdict)


def test_a_trend_over_the_grid_has_a_verdict(
        swept: tuple[pathlib.Path, str, list[fig.Layout]]) -> None:
    """Three deltas over the grid points (their runs' names differ): a verdict."""
    _, page, _ = swept
    measured, verdict = _claims(page)["larger delta, fewer late losses (4.1, 6)"]
    assert "delta=5:" in measured and "delta=20:" in measured
    assert not verdict.startswith("not measured"), verdict
    assert "(grid points deltas=5, 10, 20 at duration=150, seeds 1, 2)" in page


# -- headless Chromium: layout measured in the browser, one screenshot each --------

#: The tallest a claims-table row may be in the 1200 px wide window (its claim and
#: measured figures wrapped; unfolded "how it is measured" texts made rows 600+ px).
CLAIM_ROW_MAX_PX = 240

#: appended to a copy of the report: for every cell of a scrolling table, how many
#: lines its text takes; for every image, whether it fits the page width.
PROBE = """<script>
const out = {wrapped: [], cells: 0, tables: 0, scrolls: 0};
for (const box of document.querySelectorAll('.wide')) {
  out.tables += 1;
  if (getComputedStyle(box).overflowX === 'auto') out.scrolls += 1;
  for (const cell of box.querySelectorAll('td,th')) {
    if (!cell.firstChild) continue;
    out.cells += 1;
    const range = document.createRange();
    range.selectNodeContents(cell);
    const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
    if (tops.size > 1) out.wrapped.push(cell.textContent);
  }
}
out.claimRows = [...document.querySelectorAll('tr.claim')].map(
  r => Math.round(r.getBoundingClientRect().height));
const pre = document.createElement('pre');
pre.id = 'probe';
pre.style.display = 'none';
pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>"""


def _browse(report: pathlib.Path, tmp: pathlib.Path, name: str,
            height: int) -> dict[str, Any]:
    assert BROWSER is not None
    common = [BROWSER, "--headless", "--no-sandbox", "--disable-gpu",
              "--disable-dev-shm-usage", f"--user-data-dir={tmp / 'profile'}",
              f"--window-size=1200,{height}"]
    env = {**os.environ, "HOME": str(tmp)}
    shot = tmp / f"{name}.png"
    probed = tmp / f"{name}.html"  # the report, and the probe (hidden) at its end
    probed.write_text(report.read_text().replace("</body>", PROBE + "</body>"))
    dom = subprocess.run([*common, f"--screenshot={shot}", "--dump-dom", probed.as_uri()],
                         check=True, timeout=120, capture_output=True, text=True,
                         env=env).stdout
    image = Image.open(shot)
    extrema = image.convert("L").getextrema()
    assert image.size == (1200, height) and extrema[0] != extrema[1]  # not blank
    print(f"screenshot: {shot}")
    keep = os.environ.get("TIMEBOUND_SCREENSHOTS")
    if keep:
        os.makedirs(keep, exist_ok=True)
        shutil.copyfile(shot, os.path.join(keep, shot.name))
    found = re.search(r"<pre id=\"probe\"[^>]*>(.*?)</pre>", dom, re.S)
    assert found is not None, "the probe did not run"
    result: dict[str, Any] = json.loads(found.group(1).replace("&quot;", '"'))
    return result


@needs_chromium
def test_demo_report_in_chromium(demo: tuple[pathlib.Path, str, list[fig.Layout]],
                                 tmp_path: pathlib.Path) -> None:
    probe = _browse(demo[0], tmp_path, "demo-report", 6200)
    assert probe["cells"] > 100 and probe["tables"] == probe["scrolls"] >= 2
    assert probe["wrapped"] == []  # no number broken over lines


@needs_chromium
def test_sweep_report_in_chromium(swept: tuple[pathlib.Path, str, list[fig.Layout]],
                                  tmp_path: pathlib.Path) -> None:
    probe = _browse(swept[0], tmp_path, "sweep-report", 3000)
    assert probe["cells"] > 50 and probe["tables"] == probe["scrolls"] >= 2
    assert probe["wrapped"] == []
    # the claims table reads at a glance: the long "how it is measured" texts are
    # folded (a click shows them), so no row is taller than a few lines
    rows = probe["claimRows"]
    assert rows and max(rows) <= CLAIM_ROW_MAX_PX, rows


def test_a_run_without_chromium_says_so_in_one_line(tmp_path: pathlib.Path) -> None:
    """scripts/test.sh (pytest) ends with one line naming the skipped screenshot tests
    when Chromium is missing (here: a PATH without it)."""
    root = pathlib.Path(__file__).parent.parent
    bin_dir = pathlib.Path(sys.executable).parent
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/test_report_layout.py::test_sweep_report_in_chromium",
         "tests/test_report_layout.py::test_demo_report_in_chromium"],
        cwd=root, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PATH": str(bin_dir), "HOME": str(tmp_path)})
    assert run.returncode == 0, run.stdout + run.stderr
    lines = [x for x in run.stdout.splitlines() if x.startswith("screenshot tests:")]
    assert lines == ["screenshot tests: 2 skipped, Chromium is not installed "
                     "(scripts/setup.sh installs it with apt where it can; or apt-get "
                     "install chromium)"], run.stdout


def test_a_table_wider_than_it_is_long_is_transposed() -> None:
    import pandas as pd

    from timebound.report._build import _frame_html

    wide = pd.DataFrame([[i * 1000 + j for j in range(40)] for i in range(12)],
                        index=[f"r{i}" for i in range(12)],
                        columns=[f"p{j}" for j in range(40)])
    page = _frame_html(wide)
    assert "<table class='data transposed'>" in page
    assert page.count("<tr>") == 41 and "<tr><th>p39</th>" in page
    narrow = _frame_html(wide.iloc[:, :WIDE])
    assert "<table class='data'>" in narrow and narrow.count("<tr>") == 13
