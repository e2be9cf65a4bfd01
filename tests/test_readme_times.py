"""The times the README and the guides quote are the measured ones.

``scripts/measure_times.py`` times the README's two commands (setup, which ends with
the demo, and the suite), the demo alone, and the demo beside two CPU-bound processes,
on a fresh clone, and writes ``benchmarks/times.json``. Every page that quotes one of
those times quotes it as measured: the figure, spelled ``M min SS s``, and the date
of the measure; the loaded machine's effect is the measured ratio.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TIMES = ROOT / "benchmarks" / "times.json"
#: Each page and the figures it quotes.
QUOTES = {"README.md": ("setup_s", "demo_s", "suite_s"), "docs/pipeline.md": ("demo_s",),
          "CONTRIBUTING.md": ("suite_s",)}


def spelled(seconds: float) -> str:
    """``161.3`` -> ``2 min 41 s``: how the pages write a measured time."""
    whole = round(seconds)
    return f"{whole // 60} min {whole % 60:02d} s"


def measured() -> dict[str, object]:
    figures: dict[str, object] = json.loads(TIMES.read_text())
    return figures


def test_the_file_holds_every_step_measured_on_two_cores() -> None:
    figures = measured()
    for key in ("setup_s", "demo_s", "loaded_s", "suite_s"):
        value = figures[key]
        assert isinstance(value, (int, float)) and value > 0, (key, value)
    assert figures["cores"] == 2 and isinstance(figures["date"], str)


@pytest.mark.parametrize("page", sorted(QUOTES))
def test_each_page_quotes_the_measured_figures_and_their_date(page: str) -> None:
    figures = measured()
    text = (ROOT / page).read_text()
    for key in QUOTES[page]:
        value = figures[key]
        assert isinstance(value, (int, float))
        assert spelled(value) in text, (page, key, spelled(value))
    assert str(figures["date"]) in text, page


def test_the_readme_says_what_a_loaded_machine_does() -> None:
    figures = measured()
    loaded, demo = figures["loaded_s"], figures["demo_s"]
    assert isinstance(loaded, (int, float)) and isinstance(demo, (int, float))
    text = (ROOT / "README.md").read_text()
    assert f"{loaded / demo:.1f}x" in text and spelled(loaded) in text


def test_spelled() -> None:
    assert spelled(161.3) == "2 min 41 s" and spelled(59.6) == "1 min 00 s"
