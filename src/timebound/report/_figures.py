"""Matplotlib figures (Agg, PNG, base64) for each protocol's section.

Every figure: constrained layout (axis labels never cut off), legends outside the axes
(right of them, or below for two y axes), and no colour used twice within a figure
(``palette``: 10 colours, 20 for more series; more than 20 series are cut to 20 and
the legend says so). ``recording()`` collects each drawn figure's ``Layout`` (bounding
boxes and line colours), which the report's tests check.
"""

from __future__ import annotations

import base64
import contextlib
import io
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

FIGSIZE = (7.2, 3.6)
#: the most series one figure draws (the larger palette's size)
MAX_SERIES = 20

Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in display pixels


@dataclass
class Layout:
    """What a drawn figure looks like: the boxes of its parts and its series' colours."""

    title: str
    figure: Box
    axes: list[Box]
    legends: list[Box]
    labels: list[Box]  # axis labels and tick labels of every axes
    colours: list[str] = field(default_factory=list)  # one per labelled line
    #: each labelled line: its legend label and its x values
    lines: list[tuple[str, list[float]]] = field(default_factory=list)
    #: each line drawn, labelled or not: its points, and whether a line joins them
    joined: list[tuple[int, bool]] = field(default_factory=list)


_RECORDS: list[list[Layout]] = []


@contextlib.contextmanager
def recording() -> Iterator[list[Layout]]:
    """Collect the ``Layout`` of every figure drawn inside the block."""
    found: list[Layout] = []
    _RECORDS.append(found)
    try:
        yield found
    finally:
        _RECORDS.remove(found)


def palette(n: int) -> list[str]:
    """``n`` distinct colours (n <= MAX_SERIES): tab10, or tab20 beyond 10."""
    name = "tab10" if n <= 10 else "tab20"
    colours = plt.get_cmap(name).colors  # type: ignore[attr-defined]
    return [matplotlib.colors.to_hex(c) for c in colours][:max(n, 0)]


def natural(text: Any) -> tuple[Any, ...]:
    """Sort key: numbers inside names compare as numbers (delta=5 before delta=10)."""
    return tuple(int(part) if part.isdigit() else part
                 for part in re.split(r"(\d+)", str(text)))


def png(draw: Callable[[Any], None]) -> str:
    """Run ``draw(ax)`` on a fresh figure; the PNG as base64 text."""
    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=90, layout="constrained")
    try:
        draw(ax)
        ax.grid(alpha=0.3)
        buf = io.BytesIO()
        fig.savefig(buf, format="png")  # draws: the boxes below are final
        if _RECORDS:
            _RECORDS[-1].append(_layout(fig, ax))
    finally:
        plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _box(artist: Any, renderer: Any) -> Box:
    b = artist.get_window_extent(renderer)
    return (float(b.x0), float(b.y0), float(b.x1), float(b.y1))


def _layout(fig: Any, ax: Any) -> Layout:
    renderer = fig.canvas.get_renderer()
    axes = list(fig.axes)
    legends = [a.get_legend() for a in axes if a.get_legend() is not None] + list(
        fig.legends)
    labels = []  # each axis with its drawn tick labels and its label
    for a in axes:
        for axis in (a.xaxis, a.yaxis):
            box = axis.get_tightbbox(renderer)
            if box is not None and box.width > 0:
                labels.append((float(box.x0), float(box.y0), float(box.x1), float(box.y1)))
    drawn = [line for a in axes for line in a.get_lines()
             if not str(line.get_label()).startswith("_")]
    return Layout(str(ax.get_title()), _box(fig, renderer),
                  [_box(a, renderer) for a in axes],
                  [_box(legend, renderer) for legend in legends], labels,
                  [matplotlib.colors.to_hex(line.get_color()) for line in drawn],
                  [(str(line.get_label()), [float(v) for v in line.get_xdata()])
                   for line in drawn],
                  [(len(line.get_xdata()), line.get_linestyle() not in ("None", "", " "))
                   for a in axes for line in a.get_lines()])


def series(df: pd.DataFrame, measure: str, title: str, ylabel: str,
           log: bool = False, tick_seconds: float = 1e-6) -> str | None:
    """One line per run of a time series measure; time in seconds from each run's
    first sample (so runs that start late do not squeeze the others)."""
    rows = df[(df.measure == measure) & df.t.notna()]
    if rows.empty:
        return None
    every = sorted(rows.run.unique(), key=natural)
    runs = every[:MAX_SERIES]

    def draw(ax: Any) -> None:
        for run, colour in zip(runs, palette(len(runs)), strict=True):
            part = rows[rows.run == run].sort_values("t")
            seconds = (part.t - part.t.min()) * tick_seconds
            ax.plot(seconds, part.value, label=str(run), linewidth=1, color=colour)
        ax.set_title(title)
        ax.set_xlabel("time since the run's first sample (s)")
        ax.set_ylabel(ylabel)
        if log:
            ax.set_yscale("symlog")
        _legend(ax, len(every))

    return png(draw)


def against(points: pd.DataFrame, x: str, y: str, group: str | None, title: str,
            xlabel: str, ylabel: str, logx: bool = False) -> str | None:
    """``y`` against numeric ``x``, one line per ``group`` value: markers at the
    points, joined by a line whenever there are two or more (two points make a line
    too: a reader looks for one)."""
    points = points.dropna(subset=[x, y])
    if points.empty:
        return None

    def draw(ax: Any) -> None:
        if group:
            names = sorted(points[group].unique(), key=natural)
            groups = [(name, points[points[group] == name]) for name in names]
        else:
            groups = [("", points)]
        shown = groups[:MAX_SERIES]
        for (name, part), colour in zip(shown, palette(len(shown)), strict=True):
            mean = part.groupby(x)[y].mean().sort_index()  # one point per x (seeds)
            ax.plot(mean.index, mean.values, "o-", color=colour,
                    label=str(name) if group else "_")
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if logx:
            ax.set_xscale("log")
        if group:
            _legend(ax, len(groups))

    return png(draw)


def spread(points: pd.DataFrame, x: str, y: str, group: str | None, title: str,
           xlabel: str, ylabel: str) -> str | None:
    """One line per ``group`` value (a setting the sweep did not sweep): the mean of
    ``y`` over seeds against the swept ``x``, with the min-max band across seeds."""
    points = points.dropna(subset=[x, y])
    if points.empty:
        return None

    def draw(ax: Any) -> None:
        if group:
            names = sorted(points[group].unique(), key=natural)
            groups = [(str(name), points[points[group] == name]) for name in names]
        else:
            groups = [("mean over seeds", points)]
        shown = groups[:MAX_SERIES]
        for (name, part), colour in zip(shown, palette(len(shown)), strict=True):
            stats = part.groupby(x)[y].agg(["mean", "min", "max"]).sort_index()
            ax.plot(stats.index, stats["mean"], "o-", label=name, color=colour)
            ax.fill_between(stats.index, stats["min"], stats["max"], alpha=0.2,
                            color=colour, linewidth=0)
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"{ylabel}\n(mean; band: min-max over seeds)", fontsize=9)
        _legend(ax, len(groups))

    return png(draw)


def reorder_window(points: pd.DataFrame) -> str | None:
    """The reorder-window runs (ours): refused-genuine rate (%) on the left
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
                  loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2)

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
    """The legend right of the axes, outside the data; ``n`` series in all (those past
    ``MAX_SERIES`` are not drawn, and the legend's title says so)."""
    title = f"first {MAX_SERIES} of {n}" if n > MAX_SERIES else None
    ax.legend(fontsize=7, ncol=2 if n > 12 else 1, loc="upper left",
              bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, title=title,
              title_fontsize=7)
