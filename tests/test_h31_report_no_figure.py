"""A report section whose runs give no figure says so under its Figures heading
(the report read at a glance): a sweep of one grid point and one seed used to
show the heading with nothing under it, which reads as an image that failed to load."""

from __future__ import annotations

import pathlib
import shutil
import tempfile

from timebound import sweep
from timebound.report import write_report
from timebound.report._build import NO_FIGURE


def _one_point_sweep(out: pathlib.Path) -> None:
    """``timebound sweep merge --grid deltas=5 --seeds 1`` built as the command builds
    it, its one run here instead of in a Spark task."""
    grid = sweep.parse_grid(["deltas=5", "duration=150"], "merge")
    staging = tempfile.mkdtemp(dir=out.parent)
    try:
        points = sweep.points("merge", grid, 1, staging)
        sweep.merge(str(out), "merge", points, [sweep.run_point(p) for p in points], grid, 1)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def test_a_section_without_figures_says_so(tmp_path: pathlib.Path) -> None:
    _one_point_sweep(tmp_path / "one")
    page = pathlib.Path(write_report(str(tmp_path / "one"),
                                     out=str(tmp_path / "one.html"))).read_text()
    figures = page.split("<h3>Figures</h3>")[1].split("<h3>")[0]
    assert "<img" not in figures
    assert figures == f"<p class='note'>{NO_FIGURE}</p>"
