"""Assemble the report: sections per (scenario, protocol), figures, claims, tables."""

from __future__ import annotations

import html
import json
import os
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from timebound.errors import UsageError
from timebound.report import _figures as fig

PROTOCOL_TITLES = {
    "atmostonce": "At-most-once messages (SCMP; adaptive lifetime estimation)",
    "causal": "Causal logical timestamps",
    "merge": "Causal deterministic merge",
    "slotted": "Slotted FIFO channels",
    "stability": "Message stability by timestamp acknowledgments",
}
#: which paper's claims go with which protocol (matched on the claim's "paper").
PAPER_WORDS = {"atmostonce": ("scmp", "adaptive", "at-most-once"),
               "causal": ("causal",), "merge": ("merge", "causal"),
               "slotted": ("slotted",), "stability": ("stability", "timestamp ack")}


def find_outputs(folder: str) -> list[str]:
    """Pipeline outputs in ``folder``: itself, or its subfolders holding ``metrics/``."""
    if os.path.isdir(os.path.join(folder, "metrics")):
        return [folder]
    if not os.path.isdir(folder):
        raise UsageError("DIR", f"'{folder}' is not a folder")
    found = sorted(os.path.join(folder, name) for name in os.listdir(folder)
                   if os.path.isdir(os.path.join(folder, name, "metrics")))
    if not found:
        raise UsageError("DIR", f"'{folder}' holds no pipeline output (no metrics/ folder)")
    return found


def _load(output: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    metrics = pq.read_table(os.path.join(output, "metrics")).to_pandas()
    manifest: dict[str, Any] = {}
    path = os.path.join(output, "manifest.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            manifest = json.load(handle)
    return metrics, manifest


def _run_params(manifest: dict[str, Any]) -> pd.DataFrame:
    rows = {}
    for run in manifest.get("runs", []):
        params = {**manifest.get("params", {}), **run.get("params", {})}
        rows[str(run.get("run"))] = params
    return pd.DataFrame.from_dict(rows, orient="index")


def _scalars(metrics: pd.DataFrame, protocol: str) -> pd.DataFrame:
    part = metrics[(metrics.protocol == protocol) & metrics.t.isna()]
    return part.pivot_table(index="run", columns="measure", values="value", aggfunc="first")


def _numeric(frame: pd.DataFrame, column: str) -> pd.Series | None:
    if column not in frame:
        return None
    values = pd.to_numeric(frame[column], errors="coerce")
    return values if values.notna().any() else None


def _with_params(table: pd.DataFrame, params: pd.DataFrame) -> pd.DataFrame:
    """Measures and run parameters side by side; parameters become ``p:<name>``."""
    if params.empty:
        return table.copy()
    return table.join(params.add_prefix("p:"), how="left")


def _label(joined: pd.DataFrame, names: tuple[str, ...]) -> str | None:
    """A ``_group`` column naming each run's variant by the parameters ``names``."""
    present = [f"p:{n}" for n in names if f"p:{n}" in joined
               and joined[f"p:{n}"].nunique(dropna=True) > 1]
    if not present:
        return None
    joined["_group"] = joined[present].astype(str).agg(" ".join, axis=1)
    return "_group"


def _rho_sweep(joined: pd.DataFrame) -> tuple[pd.DataFrame, str] | None:
    """The largest set of runs that differ only in rho (a sweep), and a caption:
    mixing runs that also differ in clocks or crashes makes a meaningless curve.
    Without such a set, every run with a rho; None under two distinct values."""
    rho = _numeric(joined, "p:rho")
    if rho is None or rho.nunique() < 2:
        return None
    joined = joined.assign(_rho=rho)
    others = [c for c in joined.columns if c.startswith("p:") and c != "p:rho"]
    key = (joined[others].astype(str).agg("|".join, axis=1) if others
           else pd.Series("", index=joined.index))
    best: pd.DataFrame | None = None
    for _, rows in joined.groupby(key):
        if rows["_rho"].nunique() > 1 and (best is None or len(rows) > len(best)):
            best = rows
    if best is None:
        return joined, "all runs"
    return best, "runs differing only in rho"


#: protocol -> (swept parameter, its axis label, caption suffix, columns that split the
#: curves, measures with their labels): the papers' "Y against X, per scheme" figures.
_AGAINST: dict[str, tuple[str, str, str, tuple[str, ...], tuple[tuple[str, str], ...]]] = {
    "slotted": ("slot", "slot length (ticks)", "slot length, per scheme", ("scheme",),
                (("delay_mean.FR", "FR delivery delay (rows)"),
                 ("delay_mean.R", "R delivery delay (rows)"),
                 ("buffer_p99", "receiver buffer, 99th percentile"),
                 ("buffer_max", "receiver buffer, max"))),
    "stability": ("n", "N (group size)", "N", ("acks", "clock", "skewed"),
                  (("latency_mean", "stability latency, mean (ticks)"),
                   ("ack_bytes_per_ack", "bytes per acknowledgment"),
                   ("ack_bytes", "acknowledgment bytes, total"))),
    "merge": ("delta", "delta (ticks)", "delta", ("level", "variant"),
              (("buffering_mean", "buffering, mean (ticks)"),
               ("buffering_max", "buffering, max (ticks)"),
               ("late_rate", "late fraction"))),
}


def _against_figures(joined: pd.DataFrame, param: str, axis: str, caption: str,
                     split: tuple[str, ...], measures: tuple[tuple[str, str], ...],
                     ) -> list[tuple[str, str | None]]:
    x = _numeric(joined, f"p:{param}")
    group = _label(joined, split)
    out: list[tuple[str, str | None]] = []
    for y, label in measures:
        if y not in joined:
            continue
        if x is not None:
            out.append((f"{label} against {caption}",
                        fig.against(joined.assign(_x=x), "_x", y, group, label, axis, label)))
        else:
            out.append((f"{label} per run", fig.bars(joined[y], label, label)))
    return out


def _figures(protocol: str, metrics: pd.DataFrame, table: pd.DataFrame,
             params: pd.DataFrame) -> list[tuple[str, str | None]]:
    mine = metrics[metrics.protocol == protocol]
    joined = _with_params(table, params)
    out: list[tuple[str, str | None]] = []
    if protocol == "atmostonce":
        out.append(("Lifetime estimate over time (per run)",
                    fig.series(mine, "estimate", "estimate in force", "ticks", log=True)))
        out.append(("Connection-table size over time (per run)",
                    fig.series(mine, "table_size", "table entries", "entries")))
        found = _rho_sweep(joined)
        if found is not None:
            sweep, scope = found
            for y, label in (("lost_rate", "lost rate"), ("table_mean", "mean table size")):
                if y in sweep:
                    out.append((f"{label} against rho ({scope})",
                                fig.against(sweep, "_rho", y, None, f"{label} vs rho",
                                            "rho (ticks)", label, logx=True)))
        for y, label in (("lost_per_accepted", "lost / accepted (L/A)"),
                         ("table_mean", "mean table size")):
            if y in table:
                out.append((f"{label} per run", fig.bars(table[y], label, label)))
    elif protocol in _AGAINST:
        out += _against_figures(joined, *_AGAINST[protocol])
    elif protocol == "causal":
        for y, label in (("c_max", "largest counter c"), ("c_mean", "mean counter c")):
            if y in table:
                out.append((f"{label} per run", fig.bars(table[y], label, label)))
    return [(title, image) for title, image in out if image is not None]


def _claims(protocol: str, manifest: dict[str, Any], table: pd.DataFrame) -> str:
    claims = manifest.get("claims", [])
    if not claims:
        return "<p class='note'>No claims in the manifest.</p>"
    words = PAPER_WORDS.get(protocol, ())
    related = [c for c in claims
               if any(w in str(c.get("paper", "")).lower() for w in words)] or claims
    rows = []
    for claim in related:
        measure = str(claim.get("measure", ""))
        if measure in table:
            values = table[measure].dropna()
            ours = ", ".join(f"{run}: {_fmt(v)}" for run, v in values.items())
        else:
            ours = "(not a pipeline measure; see the simulator's metrics)"
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(x))}</td>" for x in (
            claim.get("paper", ""), claim.get("claim", ""), measure,
            claim.get("expected", ""), ours)) + "</tr>")
    return ("<table><tr><th>paper</th><th>claim</th><th>measure</th><th>expected</th>"
            "<th>ours (per run)</th></tr>" + "".join(rows) + "</table>")


def _fmt(value: Any) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    return str(int(number)) if number.is_integer() else f"{number:.4g}"


def _frame_html(frame: pd.DataFrame) -> str:
    if frame.empty:
        return "<p class='note'>(none)</p>"
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = "".join(
        f"<tr><th>{html.escape(str(index))}</th>" +
        "".join(f"<td>{html.escape(_fmt(v))}</td>" for v in row) + "</tr>"
        for index, row in zip(frame.index, frame.itertuples(index=False), strict=True))
    return f"<table><tr><th>run</th>{head}</tr>{body}</table>"


def _section(output: str, metrics: pd.DataFrame, manifest: dict[str, Any]) -> list[str]:
    scenario = manifest.get("scenario", os.path.basename(os.path.abspath(output)))
    params = _run_params(manifest)
    parts = []
    for protocol in sorted(metrics.protocol.unique()):
        table = _scalars(metrics, protocol)
        anchor = f"{scenario}-{protocol}"
        parts.append(f"<section id='{html.escape(anchor)}'>")
        parts.append(f"<h2>{html.escape(str(scenario))}: "
                     f"{html.escape(PROTOCOL_TITLES.get(protocol, protocol))}</h2>")
        parts.append(f"<p class='note'>scenario <b>{html.escape(str(scenario))}</b>, seed "
                     f"<b>{html.escape(str(manifest.get('seed', '?')))}</b>, "
                     f"{len(table)} run(s); output {html.escape(output)}</p>")
        if manifest.get("params"):
            shown = ", ".join(f"{k}={v}" for k, v in manifest["params"].items())
            parts.append(f"<p class='params'>parameters: {html.escape(shown)}</p>")
        parts.append("<h3>The paper's claims beside ours</h3>")
        parts.append(_claims(protocol, manifest, table))
        parts.append("<h3>Figures</h3>")
        for title, image in _figures(protocol, metrics, table, params):
            parts.append(f"<figure><img alt='{html.escape(title)}' "
                         f"src='data:image/png;base64,{image}'/>"
                         f"<figcaption>{html.escape(title)}</figcaption></figure>")
        if not params.empty:
            parts.append("<h3>Runs and their parameters</h3>")
            parts.append(_frame_html(params.loc[[i for i in params.index if i in table.index]
                                                or list(params.index)]))
        parts.append("<h3>Measures per run</h3>")
        parts.append(_frame_html(table))
        parts.append("</section>")
    return parts


STYLE = """body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;font-size:12px;margin:.5em 0}td,th{border:1px solid #ccc;
padding:2px 6px;text-align:left}figure{display:inline-block;margin:.5em}
figcaption{font-size:12px;color:#555}.note,.params{font-size:13px;color:#555}"""


def write_report(folder: str, *, source: str | None = None) -> str:
    """Write ``folder/report.html`` from the pipeline output(s) in ``source`` (default
    ``folder``); return its path."""
    outputs = find_outputs(source or folder)
    body: list[str] = []
    toc: list[str] = []
    for output in outputs:
        metrics, manifest = _load(output)
        section = _section(output, metrics, manifest)
        for line in section:
            if line.startswith("<section id='"):
                anchor = line[len("<section id='"):-2]
                toc.append(f"<li><a href='#{anchor}'>{anchor}</a></li>")
        body.extend(section)
    page = ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>timebound report"
            f"</title><style>{STYLE}</style></head><body><h1>timebound report</h1>"
            "<p>Decisions by the protocol cores driven by Spark over trace datasets; "
            "figures from the pipeline's metrics tables.</p>"
            f"<ul>{''.join(toc)}</ul>{''.join(body)}</body></html>")
    path = os.path.join(folder, "report.html")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(page)
    os.replace(tmp, path)
    return path
