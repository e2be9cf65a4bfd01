"""The report answers every claim: a verdict beside each claim, in the HTML and in a
headless-Chromium rendering (skipped where Chromium is not installed)."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
from typing import Any

import pytest
from PIL import Image

from timebound.cli import main

VERDICT = re.compile(r"^(agrees|differs \(\d+ of \d+ seeds agree\): .+|computed|"
                     r"not yet measured.*|not measured here.*|not run live.*)$")


@pytest.fixture(scope="module")
def report(tmp_path_factory: Any) -> pathlib.Path:
    root = tmp_path_factory.mktemp("report")
    small = {"stability": ["sizes=2", "duration=100000", "fig2_duration=40"],
             "merge": ["duration=400", "deltas=5,10,20"],
             "slotted": ["duration=400000", "slots=20000,40000", "transport=paper"]}
    for name, sets in small.items():
        args = ["simulate", name, "--out", str(root / name), "--seed", "1", "--quiet"]
        for item in sets:
            args += ["--set", item]
        assert main(args) == 0
    assert main(["report", str(root)]) == 0
    return root / "report.html"


def _claim_rows(page: str) -> list[tuple[str, str]]:
    """(claim, verdict) and (claim, live verdict) of every claim row: a row is paper,
    claim, published, measured, where, verdict, live measured, live verdict."""
    rows = re.findall(r"<tr class=['\"]claim['\"]>(.*?)</tr>", page, re.S)
    out = []
    for row in rows:
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
        assert len(cells) == 8, cells
        out += [(cells[1], cells[5]), (cells[1], cells[7])]
    return out


def test_every_claim_has_a_verdict_in_the_html(report: pathlib.Path) -> None:
    page = report.read_text()
    rows = _claim_rows(page)
    assert len(rows) >= 30  # stability, merge and slotted claims, each with its live verdict
    for claim, verdict in rows:
        assert VERDICT.match(verdict.replace("&#x27;", "'")), (claim, verdict)
    assert not re.search(r"<td[^>]*>\s*nan\s*</td>", page, re.I)  # no "nan" cells
    assert "ticks, bucketed" not in page  # time axes are seconds from the run's start
    assert page.index("<th>delta=5</th>") < page.index("<th>delta=10</th>")  # numeric order
    assert "timestamp lamport False" not in page


@pytest.mark.skipif(shutil.which("chromium") is None and shutil.which("chromium-browser")
                    is None, reason="Chromium is not installed")
def test_screenshot_in_headless_chromium(report: pathlib.Path, tmp_path: pathlib.Path) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    assert browser is not None
    shot = tmp_path / "report.png"
    common = [browser, "--headless", "--no-sandbox", "--disable-gpu",
              "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'profile'}"]
    env = {**os.environ, "HOME": str(tmp_path)}
    subprocess.run([*common, f"--screenshot={shot}", "--window-size=1200,4000",
                    report.as_uri()], check=True, timeout=120, capture_output=True, env=env)
    image = Image.open(shot)
    assert image.size == (1200, 4000)
    low, high = image.convert("L").getextrema()
    assert low < high  # not blank
    dom = subprocess.run([*common, "--dump-dom", report.as_uri()], check=True, timeout=120,
                         capture_output=True, text=True, env=env).stdout
    rows = _claim_rows(dom)
    assert rows and all(VERDICT.match(v.replace("&#x27;", "'")) for _, v in rows)
    keep = os.environ.get("TIMEBOUND_SCREENSHOT")
    if keep:
        shutil.copyfile(shot, keep)
