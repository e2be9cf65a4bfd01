"""Matplotlib figures (Agg, PNG, base64) for each protocol's section."""

from __future__ import annotations

import base64
import io
from collections.abc import Callable
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

FIGSIZE = (6.4, 3.6)


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
           log: bool = False) -> str | None:
    """One line per run of a time series measure."""
    rows = df[(df.measure == measure) & df.t.notna()]
    if rows.empty:
        return None

    def draw(ax: Any) -> None:
        for run, part in rows.groupby("run", sort=True):
            part = part.sort_values("t")
            ax.plot(part.t, part.value, label=str(run), linewidth=1)
        ax.set_title(title)
        ax.set_xlabel("time (ticks, bucketed)")
        ax.set_ylabel(ylabel)
        if log:
            ax.set_yscale("symlog")
        _legend(ax, rows.run.nunique())

    return png(draw)


def against(points: pd.DataFrame, x: str, y: str, group: str | None, title: str,
            xlabel: str, ylabel: str, logx: bool = False) -> str | None:
    """``y`` against numeric ``x``, one line per ``group`` value."""
    points = points.dropna(subset=[x, y])
    if points.empty:
        return None

    def draw(ax: Any) -> None:
        groups = points.groupby(group, sort=True) if group else [("", points)]
        for name, part in groups:
            part = part.sort_values(x)
            ax.plot(part[x], part[y], marker="o", label=str(name) if group else None)
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if logx:
            ax.set_xscale("log")
        if group:
            _legend(ax, points[group].nunique())

    return png(draw)


def bars(values: pd.Series, title: str, ylabel: str) -> str | None:
    values = values.dropna()
    if values.empty:
        return None

    def draw(ax: Any) -> None:
        ax.bar([str(i) for i in values.index], values.values, color="#4a7ab7")
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        ax.tick_params(axis="x", labelrotation=60, labelsize=7)

    return png(draw)


def _legend(ax: Any, n: int) -> None:
    if n <= 16:
        ax.legend(fontsize=7, ncol=2 if n > 6 else 1)
