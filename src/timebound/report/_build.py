"""Assemble the report: sections per (scenario, protocol), figures, claims, tables."""

from __future__ import annotations

import html
import json
import os
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow.parquet as pq

from timebound._safety import atomic_write_text, check_writable
from timebound.contract import INPUT_TABLES, METRICS
from timebound.errors import UsageError
from timebound.protocols import PROTOCOLS
from timebound.report import _figures as fig
from timebound.report._committed import committed, differences

if TYPE_CHECKING:
    from timebound.claims import Row

PROTOCOL_TITLES = {spec.name: spec.title for spec in PROTOCOLS}


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
    table = os.path.join(output, "metrics")
    try:
        metrics = pq.read_table(table).to_pandas()
    except (OSError, ValueError) as exc:  # ArrowInvalid is a ValueError: truncated file
        raise UsageError("DIR", f"cannot read '{table}' as Parquet: {exc}") from None
    missing = [c.name for c in METRICS.columns if c.name not in metrics.columns]
    if missing or metrics.empty:
        what = f"no column {missing[0]!r}" if missing else "no rows"
        raise UsageError("DIR", f"'{table}' has {what}: not the metrics table of a "
                                f"timebound pipeline output")
    manifest: dict[str, Any] = {}
    path = os.path.join(output, "manifest.json")
    if os.path.exists(path):
        try:
            with open(path, encoding="utf-8") as handle:
                manifest = json.load(handle)
        except (OSError, ValueError) as exc:
            raise UsageError("DIR", f"cannot read '{path}' as JSON: {exc}") from None
    return metrics, manifest


def _run_params(manifest: dict[str, Any]) -> pd.DataFrame:
    rows = {}
    for run in manifest.get("runs", []):
        params = {**manifest.get("params", {}), **run.get("params", {})}
        rows[str(run.get("run"))] = params
    return pd.DataFrame.from_dict(rows, orient="index")


def _scalars(metrics: pd.DataFrame, protocol: str) -> pd.DataFrame:
    part = metrics[(metrics.protocol == protocol) & metrics.t.isna()]
    table = part.pivot_table(index="run", columns="measure", values="value", aggfunc="first")
    return table.loc[sorted(table.index, key=fig.natural)]


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
    joined["_group"] = joined[present].apply(
        lambda row: ", ".join(f"{name[2:]}={_word(v)}" for name, v in row.items()), axis=1)
    return "_group"


def _word(value: Any) -> str:
    if isinstance(value, bool) or str(value) in ("True", "False"):
        return "yes" if str(value) == "True" else "no"
    return _fmt(value)


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
    "slotted": ("slot", "slot length (µs)", "slot length, per scheme", ("scheme",),
                (("delay_mean.FR", "FR delivery delay (rows)"),
                 ("delay_mean.R", "R delivery delay (rows)"),
                 ("buffer_p99", "receiver buffer, 99th percentile"),
                 ("buffer_max", "receiver buffer, max"))),
    "stability": ("n", "N (senders = receivers)", "N", ("acks", "clock", "skewed", "uneven"),
                  (("latency_mean", "stability latency, mean (ticks)"),
                   ("ack_bytes_per_ack", "bytes per acknowledgment"),
                   ("ack_bytes", "acknowledgment bytes, total"))),
    "merge": ("delta", "delta (ms ticks)", "delta", ("level", "variant"),
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
                    fig.series(mine, "estimate", "estimate in force", "estimate (µs)", log=True)))
        out.append(("Connection-table size over time (per run)",
                    fig.series(mine, "table_size", "table entries", "entries")))
        found = _rho_sweep(joined)
        if found is not None:
            sweep, scope = found
            for y, label in (("lost_rate", "lost rate"), ("table_mean", "mean table size")):
                if y in sweep:
                    out.append((f"{label} against rho ({scope})",
                                fig.against(sweep, "_rho", y, None, f"{label} vs rho",
                                            "rho (µs)", label, logx=True)))
        for y, label in (("lost_per_accepted", "lost / accepted (L/A)"),
                         ("table_mean", "mean table size")):
            if y in table:
                out.append((f"{label} per run", fig.bars(table[y], label, label)))
        reorder = _reorder_points(table)
        if reorder is not None:
            out.append(("Reorder window W (ours, beyond the papers): genuine messages "
                        "refused and connection-table bytes, runs reorder W=*",
                        fig.reorder_window(reorder)))
    elif protocol in _AGAINST:
        out += _against_figures(joined, *_AGAINST[protocol])
    elif protocol == "causal":
        for y, label in (("c_max", "largest counter c"), ("c_mean", "mean counter c")):
            if y in table:
                out.append((f"{label} per run", fig.bars(table[y], label, label)))
    return [(title, image) for title, image in out if image is not None]


def _reorder_points(table: pd.DataFrame) -> pd.DataFrame | None:
    """W, refused-genuine rate and mean table bytes of the runs named ``reorder W=*``."""
    names = [str(r) for r in table.index if str(r).startswith("reorder W=")]
    if not names or not {"refused_genuine_rate", "table_bytes_mean"} <= set(table.columns):
        return None
    rows = table.loc[names, ["refused_genuine_rate", "table_bytes_mean"]].copy()
    rows["W"] = [float(n[len("reorder W="):]) if n[len("reorder W="):].isdigit()
                 else float("nan") for n in names]
    return rows


def _sim_metrics(output: str, manifest: dict[str, Any]) -> tuple[pd.DataFrame | None, str]:
    """The simulator's metrics behind ``output``: the dataset named in the pipeline's
    summary.json, or ``output`` itself when it is a dataset."""
    candidates = []
    summary = os.path.join(output, "summary.json")
    if os.path.exists(summary):
        try:
            with open(summary, encoding="utf-8") as handle:
                candidates.append(str(json.load(handle).get("dataset", "")))
        except (OSError, ValueError):
            pass
    if str(manifest.get("created_by", "")).startswith(("timebound simulate",
                                                        "timebound sweep")):
        candidates.append(output)
    for folder in candidates:
        path = os.path.join(folder, "metrics")
        if folder and os.path.isdir(path) and os.path.exists(
                os.path.join(folder, "manifest.json")):
            try:
                return pq.read_table(path).to_pandas(), folder
            except (OSError, ValueError):
                continue
    return None, ""


def _seed_sources(frame: pd.DataFrame, manifest: dict[str, Any],
                  scenario: str) -> tuple[list[dict[str, Any]], str]:
    """Per seed ``{scenario: {run: {measure: value}}}``. A sweep contributes, per seed,
    the runs of the grid points along one swept key (the other keys at their first
    value) when their names inside the scenario never repeat -- a sweep of ``deltas``
    gives runs delta=5, delta=10, ...: a trend over the grid; else its first grid
    point's runs only. The returned note names which."""
    scal = frame[frame.t.isna()]
    runs: dict[str, dict[str, float]] = {}
    for run, measure, value in zip(scal.run, scal.measure, scal.value, strict=True):
        runs.setdefault(str(run), {})[str(measure)] = float(value)
    sweep = manifest.get("sweep")
    if not sweep:
        return [{scenario: runs}], f"seed {manifest.get('seed', '?')}"
    seeds = sweep.get("seeds", [])
    grid: dict[str, list[Any]] = sweep.get("grid", {})

    def of(label: str) -> list[dict[str, dict[str, float]]]:
        return [{r[len(f"{label}/seed={seed}/"):]: v for r, v in runs.items()
                 if r.startswith(f"{label}/seed={seed}/")} for seed in seeds]

    seed_text = ", ".join(map(str, seeds))
    for key, values in grid.items():
        if len(values) < 2:
            continue
        line = {k: (values if k == key else vs[:1]) for k, vs in grid.items()}
        labels = _grid_points(line)
        per_point = [of(label) for label in labels]
        names = [name for point in per_point for name in (point or [{}])[0]]
        if len(names) == len(set(names)):
            fixed = ", ".join(f"{k}={vs[0]}" for k, vs in grid.items() if k != key)
            where = f"grid points {key}={', '.join(map(str, values))}" + (
                f" at {fixed}" if fixed else "")
            return ([{scenario: {k: v for point in per_point for k, v in point[i].items()}}
                     for i in range(len(seeds))], f"{where}, seeds {seed_text}")
    first = _grid_points(grid)[0]
    return ([{scenario: one} for one in of(first)],
            f"grid point {first} only, seeds {seed_text}")


def _grid_points(grid: dict[str, list[Any]]) -> list[str]:
    """The sweep's grid point labels, as in its run names (``k1=v1,k2=v2``)."""
    import itertools

    keys = list(grid)
    combos = list(itertools.product(*[grid[k] for k in keys])) if keys else [()]
    return [",".join(f"{k}={v}" for k, v in zip(keys, combo, strict=True)) or "default"
            for combo in combos]


#: The checkout this package runs from (``src/timebound/report/`` three folders up):
#: where ``timebound simulate --reproduce docs/reproduction.md`` reads the RPC bench file
#: (``benchmarks/rpc_bench.md``), so the report's RPC row is the table's. Installed
#: outside a checkout, there is no bench file there and both say "not yet measured".
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def claim_rows(output: str, manifest: dict[str, Any], scenario: str, *,
               root: str = REPO_ROOT) -> tuple[list[Row], str] | None:
    """The claims of the scenario's papers with their measurements and verdicts, and a
    note naming the data: ``timebound.claims.evaluate`` -- the evaluation that writes
    docs/reproduction.md -- on the simulator's metrics behind ``output``, one source per
    seed keyed by the scenario (the table's job label for the same scenario), and the
    table's root for the bench file. None: no paper claims for this scenario."""
    from timebound.claims import SCENARIO_PAPERS, evaluate

    papers = SCENARIO_PAPERS.get(scenario)
    if papers is None:
        return None
    frame, folder = _sim_metrics(output, manifest)
    if frame is None:
        seeds: list[dict[str, Any]] = [{}]
        note = "the simulator's metrics were not found (dataset moved?)"
    else:
        seeds, note = _seed_sources(frame, manifest, scenario)
        note = f"simulator metrics of {folder} ({note})"
    return evaluate(seeds, only=list(papers), root=root), note


def _verdicts(output: str, manifest: dict[str, Any], scenario: str) -> str:
    """The claims table of a section (``claim_rows``)."""
    found = claim_rows(output, manifest, scenario)
    if found is None:
        return "<p class='note'>No paper claims for this scenario.</p>"
    rows, note = found
    line = differences(committed(REPO_ROOT), scenario, manifest, [r.claim for r in rows])
    body = []
    for row in rows:
        cells = "".join(f"<td>{html.escape(x)}</td>" for x in (
            row.paper, row.claim, row.published, row.measured))
        live = html.escape(row.live_measured) + (
            f" {_folded('(live: how it runs)', row.live_where)}" if row.live_where else "")
        body.append(f"<tr class='claim'>{cells}<td>{_folded(*_run_label(row.where))}</td>"
                    f"{_verdict_cell(row.verdict)}"
                    f"<td>{live}</td>{_verdict_cell(row.live_verdict)}</tr>")
    cols = "".join(f"<col class='c{i}'/>" for i in range(1, 9))
    return (f"<p class='note'>Verdicts from timebound.claims (the same code as "
            f"docs/reproduction.md), on the {html.escape(note)}.</p>"
            f"<p class='note against'>{html.escape(line)}</p>"
            f"<table class='claims'>{cols}<tr><th>paper</th><th>claim</th><th>published</th>"
            "<th>measured</th><th>scenario / run</th><th>verdict</th><th>live: measured"
            "</th><th>live: verdict</th></tr>"
            + "".join(body) + "</table>")


#: Longest label a claim's "scenario / run" cell shows before its fold.
LABEL_MAX = 80


def _run_label(where: str) -> tuple[str, str]:
    """A claim's "scenario / run" text as (its label: the runs, up to the first ": ";
    the rest: what is checked and when it differs). A text without such a head of at
    most ``LABEL_MAX`` characters is cut at the last space before that length, so every
    row folds the same way; label + rest is the text."""
    head, sep, rest = where.partition(": ")
    if sep and len(head) < LABEL_MAX:
        return head + ":", " " + rest
    if len(where) <= LABEL_MAX:
        return where, ""
    cut = where.rfind(" ", 0, LABEL_MAX)
    cut = cut if cut > 0 else LABEL_MAX
    return where[:cut], where[cut:]


def _folded(shown: str, more: str) -> str:
    """``shown``, and ``more`` folded under it (a click shows it): the long texts of
    the claims table keep its rows a few lines high."""
    if not more:
        return html.escape(shown)
    return (f"<details><summary>{html.escape(shown)}</summary>{html.escape(more)}"
            "</details>")


def _verdict_cell(verdict: str) -> str:
    kind = ("agrees" if verdict == "agrees" else
            "differs" if verdict.startswith("differs") else "other")
    return f"<td class='verdict {kind}'>{html.escape(verdict)}</td>"


def sweep_lines(joined: pd.DataFrame, key: str, grid: list[str]) -> pd.Series | None:
    """Each run's line in a plot against the swept ``key``: the values of the settings
    the sweep did not sweep -- the parameters (other grid keys included) whose set of
    values is the same at every value of ``key`` and has more than one value (a
    parameter derived from ``key``, such as a run's delta under ``deltas``, is not
    one), less those the others determine (a run's delta under another grid key
    ``deltas``: the grid keys are kept). Runs still sharing a line, a grid point and a
    seed are told apart by their name inside the scenario with the key's value
    replaced by ``*``. None: one line."""
    x = joined[f"p:{key}"].astype(str)
    skip = {f"p:{key}", "p:seed", "p:base_run"}
    split = []
    for column in (c for c in joined.columns if c.startswith("p:") and c not in skip):
        values = joined[column].astype(str)
        sets = {frozenset(values[x == v]) for v in x.unique()}
        if len(sets) == 1 and len(next(iter(sets))) > 1:
            split.append(column)
    for column in sorted(split, key=lambda c: c[2:] in grid):  # grid keys last
        rest = [c for c in split if c != column]
        if rest and (joined.groupby(rest)[column].nunique(dropna=False) <= 1).all():
            split.remove(column)
    label = (joined[split].astype(str).apply(
        lambda row: ", ".join(f"{n[2:]}={_word(v)}" for n, v in row.items()), axis=1)
        if split else pd.Series("", index=joined.index))
    seed = joined["p:seed"].astype(str) if "p:seed" in joined else pd.Series(
        "", index=joined.index)
    if "p:base_run" in joined and (label + "|" + x + "|" + seed).duplicated().any():
        base = [str(b).replace(f"={v}", "=*") for b, v in zip(joined["p:base_run"], x,
                                                              strict=True)]
        label = label.str.cat(pd.Series(base, index=joined.index), sep=", ").str.strip(", ")
    return label if label.nunique() > 1 else None


def _sweep_figures(manifest: dict[str, Any], table: pd.DataFrame,
                   params: pd.DataFrame) -> list[tuple[str, str | None]]:
    """A sweep: each headline measure against each numeric swept key (x), one line per
    setting the sweep did not sweep, the band over seeds."""
    grid = (manifest.get("sweep") or {}).get("grid") or {}
    if not grid or table.empty or params.empty:
        return []
    joined = _with_params(table, params)
    out: list[tuple[str, str | None]] = []
    measures = [m for m in table.columns if table[m].notna().any()][:4]
    for key in grid:
        x = _numeric(joined, f"p:{key}")
        if x is None or x.nunique() < 2:
            continue
        lines = sweep_lines(joined, key, list(grid))
        points = joined.assign(_x=x, _line=lines if lines is not None else "")
        for y in measures:
            out.append((f"{y} against {key} (spread across seeds)",
                        fig.spread(points, "_x", y, "_line" if lines is not None else None,
                                   f"{y} vs {key}", key, y)))
    return out


def _fmt(value: Any) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if number != number or number in (float("inf"), float("-inf")):
        return "-"
    return str(int(number)) if number.is_integer() else f"{number:.4g}"


#: a table with more columns than this (and than rows) is shown transposed
WIDE = 10


def _frame_html(frame: pd.DataFrame, corner: str = "run") -> str:
    """A table in a horizontally scrolling box; cells never wrap. More than ``WIDE``
    columns and more columns than rows: transposed (one row per column)."""
    if frame.empty:
        return "<p class='note'>(none)</p>"
    kind = "data"
    if len(frame.columns) > WIDE and len(frame.columns) > len(frame.index):
        frame = frame.T
        corner, kind = "", "data transposed"
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = "".join(
        f"<tr><th>{html.escape(str(index))}</th>" +
        "".join(f"<td>{html.escape(_fmt(v))}</td>" for v in row) + "</tr>"
        for index, row in zip(frame.index, frame.itertuples(index=False), strict=True))
    return (f"<div class='wide'><table class='{kind}'><tr><th>{corner}</th>{head}</tr>"
            f"{body}</table></div>")


def _params_html(params: pd.DataFrame) -> str:
    """The runs' parameters: those equal on every run in one line, the others as a
    table (see ``_frame_html``)."""
    if params.empty:
        return "<p class='note'>(none)</p>"
    text = params.astype(str)
    same = [c for c in params.columns if text[c].nunique(dropna=False) == 1]
    varying = params[[c for c in params.columns if c not in same]]
    line = ""
    if same:
        shown = ", ".join(f"{c}={_fmt(params[c].iloc[0])}" for c in same)
        line = f"<p class='params'>the same on every run: {html.escape(shown)}</p>"
    return line + (_frame_html(varying) if not varying.empty else "")


def _header(output: str, scenario: str, manifest: dict[str, Any], runs: int) -> str:
    """Scenario, seed(s) and parameters; a sweep names its grid and seeds, and its
    parameters line leaves out the swept keys."""
    sweep = manifest.get("sweep") or {}
    grid: dict[str, list[Any]] = sweep.get("grid") or {}
    params = {k: v for k, v in (manifest.get("params") or {}).items() if k not in grid}
    if sweep:
        swept = "; ".join(f"{k} = {', '.join(map(str, vs))}" for k, vs in grid.items())
        seeds = ", ".join(map(str, sweep.get("seeds", [])))
        points = len(_grid_points(grid))
        text = (f"scenario <b>{html.escape(scenario)}</b>, a sweep: "
                f"<span class='swept'>{html.escape(swept or 'no key')}</span> "
                f"({points} grid point(s)) x seeds {html.escape(seeds)}: {runs} run(s); "
                f"output {html.escape(output)}")
        label = "parameters not swept"
    else:
        text = (f"scenario <b>{html.escape(scenario)}</b>, seed "
                f"<b>{html.escape(str(manifest.get('seed', '?')))}</b>, {runs} run(s); "
                f"output {html.escape(output)}")
        label = "parameters"
    line = f"<p class='note'>{text}</p>"
    if params:
        shown = ", ".join(f"{k}={v}" for k, v in params.items())
        line += f"<p class='params'>{label}: {html.escape(shown)}</p>"
    return line


#: What follows the Figures heading when these runs give no figure (a sweep of one
#: grid point and one seed, say): said, so that it does not read as a failed image.
NO_FIGURE = "no figure for these runs: their measures are in the table below"


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
        parts.append(_header(output, str(scenario), manifest, len(table)))
        if not parts or not any("class='claims'" in x for x in parts):
            parts.append("<h3>The papers' claims: measured, with a verdict</h3>")
            parts.append(_verdicts(output, manifest, str(scenario)))
        parts.append("<h3>Figures</h3>")
        figures = _figures(protocol, metrics, table, params) + _sweep_figures(
            manifest, table, params)
        for title, image in figures:
            parts.append(f"<figure><img alt='{html.escape(title)}' "
                         f"src='data:image/png;base64,{image}'/>"
                         f"<figcaption>{html.escape(title)}</figcaption></figure>")
        if not figures:  # an empty heading reads as a figure that failed to load
            parts.append(f"<p class='note'>{NO_FIGURE}</p>")
        if not params.empty:
            parts.append("<h3>Runs and their parameters</h3>")
            parts.append(_params_html(params.loc[[i for i in params.index
                                                  if i in table.index] or list(params.index)]))
        parts.append("<h3>Measures per run</h3>")
        parts.append(_frame_html(table))
        parts.append("</section>")
    return parts


STYLE = """body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;font-size:12px;margin:.5em 0;max-width:100%}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;overflow-wrap:anywhere}
.wide{overflow-x:auto;max-width:100%}.wide td,.wide th{white-space:nowrap;overflow-wrap:normal}figure{display:inline-block;margin:.5em}
figcaption{font-size:12px;color:#555}.note,.params{font-size:13px;color:#555}
td.verdict{font-weight:bold}td.agrees{color:#17692b}td.differs{color:#a33}
td.other{color:#555}table.claims{width:100%;table-layout:fixed}
table.claims col.c1{width:6%}table.claims col.c2{width:18%}table.claims col.c3{width:8%}
table.claims col.c4{width:20%}table.claims col.c5{width:14%}table.claims col.c6{width:12%}
table.claims col.c7{width:12%}table.claims col.c8{width:10%}
table.claims summary{cursor:pointer}
img{max-width:100%}"""


def is_dataset(folder: str) -> bool:
    """``folder`` is a dataset of ``timebound simulate`` or ``sweep`` (an input table
    of the contract or a ``sim_*`` table beside its ``metrics/``, and no
    ``summary.json`` of ``timebound pipeline``): an input, never written into."""
    if not os.path.isdir(os.path.join(folder, "metrics")) or os.path.exists(
            os.path.join(folder, "summary.json")):
        return False
    return any(name in INPUT_TABLES or name.startswith("sim_") for name in os.listdir(folder))


def write_report(folder: str, *, source: str | None = None, out: str | None = None) -> str:
    """Write the page from the pipeline output(s) in ``source`` (default ``folder``) to
    ``out`` (default ``folder/report.html``; a ``.html`` file that does not exist or is
    a page written before); return its path."""
    outputs = find_outputs(source or folder)
    if out is not None:
        if not out.endswith(".html"):
            raise UsageError("--out", f"expected a .html file name, got '{out}'")
        check_writable(out, "--out")
    else:
        check_writable(os.path.join(folder, "report.html"), "DIR")  # before the work
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
    path = out if out is not None else os.path.join(folder, "report.html")
    atomic_write_text(path, page, "--out" if out is not None else "DIR")  # whole or not at
    # all; the temporary file is removed on any exit
    return path
