"""The report's claims table folds every long "scenario / run" text the same way (a
label of at most ``LABEL_MAX`` characters, the rest under a click), and a figure of
two points joins them with a line."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from timebound.report import _figures as fig
from timebound.report._build import LABEL_MAX, _run_label

ROOT = Path(__file__).resolve().parent.parent


def _where_cells() -> list[str]:
    """The "scenario / run" cell of every claim row of docs/reproduction.md."""
    text = (ROOT / "docs" / "reproduction.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| paper | claim |"))
    column = [c.strip() for c in lines[header].strip("|").split("|")].index("scenario / run")
    rows = []
    for line in lines[header + 2:]:
        if not line.startswith("| "):
            break
        rows.append([c.strip() for c in line.strip("|").split(" | ")][column])
    return rows


def test_every_claims_run_text_folds_after_a_short_label() -> None:
    cells = _where_cells()
    assert len(cells) >= 30
    for where in cells:
        label, rest = _run_label(where)
        assert label + rest == where
        assert len(label) <= LABEL_MAX + 1, label  # the head and its colon
        assert rest or len(where) <= LABEL_MAX


def test_a_long_text_without_a_short_head_is_cut_at_a_space() -> None:
    where = ("adaptive, runs */unlimited, and adaptive-step, step/unlimited and "
             "step-up/unlimited (lifetimes fall, or rise, at step_at). A finite run "
             "cannot show the limit; checked, Lemma 3: every lost message arrives ...")
    label, rest = _run_label(where)
    assert label + rest == where and len(label) <= LABEL_MAX and rest.startswith(" ")
    assert _run_label("scmp, every run: messages accepted twice") == (
        "scmp, every run:", " messages accepted twice")
    assert _run_label("short text") == ("short text", "")


def test_two_points_on_a_log_axis_are_joined_by_a_line() -> None:
    points = pd.DataFrame({"rho": [1_000.0, 100_000.0], "lost": [0.2, 0.01]})
    with fig.recording() as layouts:
        assert fig.against(points, "rho", "lost", None, "lost rate vs rho", "rho",
                           "lost rate", logx=True)
    assert layouts[0].joined == [(2, True)]
