"""``timebound demo`` end to end at a tiny scale on the shared local session."""

from __future__ import annotations

import os
import pathlib
from typing import Any

import pytest

from timebound.cli import main


@pytest.mark.spark
def test_demo_tiny(spark: Any, tmp_path: pathlib.Path, capsys: Any) -> None:
    from timebound.sim import SCENARIOS

    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--scale", "0.05"]) == 0
    printed = capsys.readouterr().out
    assert "== 1. bundled examples" in printed and "[5/5]" in printed
    assert f"report: {out / 'report.html'}" in printed
    page = (out / "report.html").read_text()
    for name in SCENARIOS:
        assert os.path.isdir(out / "pipeline" / name / "metrics")
        assert os.path.exists(out / "pipeline" / name / "manifest.json")
        assert f"<section id='{name}-" in page
    assert spark.sparkContext._jsc is not None  # the shared session is still running


def test_demo_without_simulator_fails_clearly(tmp_path: pathlib.Path, capsys: Any,
                                              monkeypatch: Any) -> None:
    import sys

    import timebound.sim.cli  # noqa: F401  the command line's parsers, built first
    # (whichever test ran before in this process); then the demo's own import fails
    monkeypatch.setitem(sys.modules, "timebound.sim", None)
    assert main(["demo", "--out", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert "the simulator (timebound.sim) is not available" in err


def test_demo_refuses_a_folder_of_the_users_files(tmp_path: pathlib.Path,
                                                  capsys: pytest.CaptureFixture[str]
                                                  ) -> None:
    (tmp_path / "mythesis.tex").write_text("my own work\n")
    assert main(["demo", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"timebound: error: --out: '{tmp_path}' holds files the demo did not write "
        "('mythesis.tex'); give a new or empty folder\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mythesis.tex"]


def test_demo_quiet_prints_only_its_closing_lines(spark: Any, tmp_path: pathlib.Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """``--quiet`` anywhere: no step headers, no progress lines; the report is still
    written and its path printed."""
    from timebound.sim import SCENARIOS

    out = tmp_path / "demo"
    first = next(iter(SCENARIOS))
    assert main(["demo", "--out", str(out), "--scale", "0.05", "--scenarios", first,
                 "--quiet"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 2, printed
    assert printed[0].startswith("demo finished in ")
    assert printed[1] == f"report: {out / 'report.html'}"
    assert (out / "report.html").is_file()
