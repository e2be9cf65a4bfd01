"""Matplotlib figures (Agg, PNG, base64) for each protocol's section."""

from __future__ import annotations

import base64
import io
import re
from collections.abc import Callable
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

FIGSIZE = (6.4, 3.6)


def natural(text: Any) -> tuple[Any, ...]:
    """Sort key: numbers inside names compare as numbers (delta=5 before delta=10)."""
    return tuple(int(part) if part.isdigit() else part
                 for part in re.split(r"(\d+)", str(text)))


def png(draw: Callable[[Any], None]) -> str:
    """Run ``draw(ax)`` on a fresh figure; the PNG as base64 text."""
    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=90)
    try:
        draw(ax)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
    finally:
        plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def series(df: pd.DataFrame, measure: str, title: str, ylabel: str,
           log: bool = False, tick_seconds: float = 1e-6) -> str | None:
    """One line per run of a time series measure; time in seconds from each run's
    first sample (so runs that start late do not squeeze the others)."""
    rows = df[(df.measure == measure) & df.t.notna()]
    if rows.empty:
        return None
    runs = sorted(rows.run.unique(), key=natural)

    def draw(ax: Any) -> None:
        for run in runs:
            part = rows[rows.run == run].sort_values("t")
            seconds = (part.t - part.t.min()) * tick_seconds
            ax.plot(seconds, part.value, label=str(run), linewidth=1)
        ax.set_title(title)
        ax.set_xlabel("time since the run's first sample (s)")
        ax.set_ylabel(ylabel)
        if log:
            ax.set_yscale("symlog")
        _legend(ax, len(runs))

    return png(draw)


def against(points: pd.DataFrame, x: str, y: str, group: str | None, title: str,
            xlabel: str, ylabel: str, logx: bool = False) -> str | None:
    """``y`` against numeric ``x``, one line per ``group`` value (markers only where a
    line would join just two points across a log axis)."""
    points = points.dropna(subset=[x, y])
    if points.empty:
        return None

    def draw(ax: Any) -> None:
        if group:
            names = sorted(points[group].unique(), key=natural)
            groups = [(name, points[points[group] == name]) for name in names]
        else:
            groups = [("", points)]
        for name, part in groups:
            part = part.sort_values(x)
            style = "o" if logx and part[x].nunique() <= 2 else "o-"
            ax.plot(part[x], part[y], style, label=str(name) if group else None)
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if logx:
            ax.set_xscale("log")
        if group:
            _legend(ax, points[group].nunique())

    return png(draw)


def spread(points: pd.DataFrame, x: str, y: str, group: str | None, title: str,
           xlabel: str, ylabel: str) -> str | None:
    """Mean of ``y`` over seeds against ``x``, with the min-max band across seeds."""
    points = points.dropna(subset=[x, y])
    if points.empty:
        return None

    def draw(ax: Any) -> None:
        if group:
            names = sorted(points[group].unique(), key=natural)[:8]
            groups = [(name, points[points[group] == name]) for name in names]
        else:
            groups = [("", points)]
        for name, part in groups:
            stats = part.groupby(x)[y].agg(["mean", "min", "max"]).sort_index()
            line = ax.plot(stats.index, stats["mean"], "o-" if len(stats) > 2 else "o",
                           label=str(name) if group else "mean over seeds")
            ax.fill_between(stats.index, stats["min"], stats["max"], alpha=0.2,
                            color=line[0].get_color())
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel + " (mean; band: min-max over seeds)")
        _legend(ax, len(groups))

    return png(draw)


def reorder_window(points: pd.DataFrame) -> str | None:
    """The reorder-window runs (issue 16, ours): refused-genuine rate (%) on the left
    axis and mean table bytes on the right, against the window W on a log2 axis.
    ``points`` has columns ``W``, ``refused_genuine_rate`` and ``table_bytes_mean``."""
    points = points.dropna(subset=["W", "refused_genuine_rate", "table_bytes_mean"])
    if points["W"].nunique() < 2:
        return None
    points = points.sort_values("W")

    def draw(ax: Any) -> None:
        rate = ax.plot(points["W"], 100 * points["refused_genuine_rate"], "o-",
                       color="#a33", label="genuine messages refused (%)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(points["W"]))
        ax.set_xticklabels([f"{w:g}" for w in points["W"]])
        ax.set_xlabel("reorder window W (messages)")
        ax.set_ylabel("genuine messages refused (%)")
        ax.set_ylim(bottom=0)
        right = ax.twinx()
        size = right.plot(points["W"], points["table_bytes_mean"], "s--", color="#4a7ab7",
                          label="connection table, mean bytes")
        right.set_ylabel("connection table, mean bytes")
        right.set_ylim(bottom=0)
        ax.set_title("Reorder window (ours): refused genuine messages vs table bytes")
        lines = rate + size
        ax.legend(lines, [str(line.get_label()) for line in lines], fontsize=7,
                  loc="center right")

    return png(draw)


def bars(values: pd.Series, title: str, ylabel: str) -> str | None:
    values = values.dropna()
    if values.empty:
        return None

    def draw(ax: Any) -> None:
        values_sorted = values.loc[sorted(values.index, key=natural)]
        ax.bar([str(i) for i in values_sorted.index], values_sorted.values, color="#4a7ab7")
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        ax.tick_params(axis="x", labelrotation=60, labelsize=7)

    return png(draw)


def _legend(ax: Any, n: int) -> None:
    if n <= 16:
        ax.legend(fontsize=7, ncol=2 if n > 6 else 1)
