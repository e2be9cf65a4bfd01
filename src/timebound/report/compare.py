"""``timebound compare``'s page: one self-contained HTML page from the table
``timebound.spark.compare`` returns (a pandas DataFrame and its ``attrs``), in the
report's style (``_build.STYLE``, ``_figures``' PNG figures).

What it shows: one paragraph saying in numbers what the data needs (the ``rho`` that
loses the fewest genuine messages and its state; the watermark that lets no copy
through, or the fewest, with its state and losses; where the adaptive estimate ended),
copies let through, genuine messages lost and the state against the setting (rho or
watermark, in ticks) for ``at_most_once`` and both watermark placements, the adaptive
estimates over time beside the arrival delays (the adaptive paper's lifetime
estimation: the receiver learns how long to remember), and the table itself. Reads no
Spark and no protocol object: only the table.
"""

from __future__ import annotations

import html
import os
from typing import Any

import pandas as pd

from timebound.report import _figures
from timebound.report._build import STYLE

FIGURES = ("copies let through", "genuine messages lost", "state held at most",
           "adaptive estimate and arrival delays")


def _count(value: Any) -> str:
    return "-" if pd.isna(value) else f"{int(value):,}"


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _placement(method: str) -> str:
    return {"watermark_on_arrival": "on the arrival time",
            "watermark_on_send": "on the sender's time"}.get(method, method)


def summary(table: pd.DataFrame) -> str:
    """What this data needs, in numbers (one paragraph of plain text)."""
    messages = int(table.attrs.get("messages", 0))
    said: list[str] = []
    fixed = table[table["method"] == "at_most_once"]
    if not fixed.empty:
        best = fixed.sort_values(["genuine_lost", "state_max", "setting"]).iloc[0]
        said.append(
            f"at_most_once at rho {int(best['setting']):,} ticks (reorder window "
            f"{int(best['reorder_window'])}) lets {_count(best['copies_let_through'])} "
            f"copies through and loses {_count(best['genuine_lost'])} genuine messages "
            f"({_share(int(best['genuine_lost']), messages)}) holding at most "
            f"{_count(best['state_max'])} entries")
    marks = table[table["method"].str.startswith("watermark")]
    if not marks.empty:
        clean = marks[marks["copies_let_through"] == 0]
        pick = (clean if not clean.empty else marks).sort_values(
            ["copies_let_through", "genuine_lost", "state_max"]).iloc[0]
        which = "lets no copy through" if not clean.empty else (
            f"lets the fewest copies through ({_count(pick['copies_let_through'])})")
        said.append(
            f"the watermark that {which} is {int(pick['setting']):,} ticks "
            f"{_placement(str(pick['method']))}: it holds up to {_count(pick['state_max'])} "
            f"state rows and loses {_count(pick['genuine_lost'])} genuine messages "
            f"({_share(int(pick['genuine_lost']), messages)})")
    adaptive = table[table["method"].str.startswith("adaptive")]
    for _, row in adaptive.iterrows():
        said.append(f"the {str(row['method']).replace('adaptive_', '')}-horizon estimate "
                    f"ended at {_count(row['rho_final'])} ticks, losing "
                    f"{_count(row['genuine_lost'])} genuine messages with at most "
                    f"{_count(row['state_max'])} entries")
    if not said:
        return "No run to compare."
    return "On this data, " + "; ".join(said) + "."


def _points(table: pd.DataFrame) -> pd.DataFrame:
    """The rows with a setting, one line per method (and reorder window, when there
    are several)."""
    points = table[table["setting"].notna()].copy()
    windows = points["reorder_window"].dropna().unique()
    points["line"] = [
        m if pd.isna(w) or len(windows) < 2 else f"{m} (reorder window {int(w)})"
        for m, w in zip(points["method"], points["reorder_window"], strict=True)]
    for name in ("setting", "copies_let_through", "genuine_lost", "state_max"):
        points[name] = points[name].astype(float)
    return points


def _estimates(table: pd.DataFrame) -> str | None:
    delays = table.attrs.get("delays") or {}
    estimates = table.attrs.get("estimates") or {}
    if not delays.get("at"):
        return None

    def draw(ax: Any) -> None:
        colours = _figures.palette(1 + len(estimates))
        ax.plot(delays["at"], delays["delay"], ".", markersize=2, color=colours[0],
                label="arrival delay (at - ts)")
        for (method, series), colour in zip(sorted(estimates.items()), colours[1:],
                                            strict=True):
            ax.step(series["at"], series["rho"], where="post", color=colour,
                    label=f"{method} estimate")
        ax.set_title(FIGURES[3])
        ax.set_xlabel("arrival time at (ticks)")
        ax.set_ylabel("ticks")
        ax.set_yscale("symlog")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)

    return _figures.png(draw)


def _table_html(table: pd.DataFrame) -> str:
    shown = [c for c in table.columns if c != "seconds"] + ["seconds"]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in shown)
    rows = []
    for _, row in table.iterrows():
        cells = []
        for c in shown:
            value = row[c]
            text = ("-" if pd.isna(value) else f"{value:.1f}" if c == "seconds"
                    else html.escape(str(value)) if c == "method" else f"{int(value):,}")
            cells.append(f"<td>{text}</td>")
        rows.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def write_compare_report(table: pd.DataFrame, out: str, *, source: str = "") -> str:
    """Write the page for ``table`` to ``out`` (replaced whole); returns ``out``."""
    points = _points(table)
    figures = [
        _figures.against(points, "setting", "copies_let_through", "line", FIGURES[0],
                         "rho or watermark (ticks)", "copies let through", logx=True),
        _figures.against(points, "setting", "genuine_lost", "line", FIGURES[1],
                         "rho or watermark (ticks)", "genuine messages lost", logx=True),
        _figures.against(points, "setting", "state_max", "line", FIGURES[2],
                         "rho or watermark (ticks)", "entries or state rows", logx=True),
        _estimates(table),
    ]
    attrs = table.attrs
    facts = (f"{int(attrs.get('rows', 0)):,} arrivals, {int(attrs.get('messages', 0)):,} "
             f"messages, {int(attrs.get('copies', 0)):,} copies; the watermark replayed "
             f"in {int(attrs.get('micro_batches', 0))} micro-batches")
    images = "".join(f'<figure><img alt="{html.escape(title)}" '
                     f'src="data:image/png;base64,{data}"></figure>'
                     for title, data in zip(FIGURES, figures, strict=True) if data)
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>timebound "
            f"compare</title><style>{STYLE}</style></head><body><h1>timebound compare"
            f"</h1><p>{html.escape(source)}{': ' if source else ''}{facts}.</p>"
            f"<p class='summary'>{html.escape(summary(table))}</p>{images}"
            f"<h2>Every run</h2>{_table_html(table)}</body></html>")
    folder = os.path.dirname(os.path.abspath(out))
    partial = os.path.join(folder, f".{os.path.basename(out)}.partial")
    with open(partial, "w", encoding="utf-8") as handle:
        handle.write(page)
    os.replace(partial, out)
    return out
