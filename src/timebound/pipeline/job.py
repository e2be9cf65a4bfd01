"""``timebound pipeline DATASET --out DIR``: every protocol whose input table is present.

Order of work: read and validate every table present (a schema error stops the job
before anything runs), resolve and check each run's options, then per protocol run its
operator and write its decision table, then the metrics table. Everything is written
to a hidden temporary folder beside DIR that is renamed to DIR at the end, so DIR is
never half-written (a previous DIR is replaced only then). On any failure, Ctrl-C or
SIGTERM, Spark's jobs are stopped first (the session, when the pipeline started it) and
the temporary folder is removed after, so no task writes into it once it is gone. DATASET/manifest.json is
copied to DIR/manifest.json and a small DIR/summary.json records what ran.
"""

from __future__ import annotations

import functools
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from timebound._safety import check_writable_folder, follow_umask, guard_output
from timebound.errors import TraceError, UsageError
from timebound.pipeline._watch import EVERY, eta_after, watching
from timebound.pipeline.datasets import (
    check_parquet_files,
    present_tables,
    read_manifest,
    read_table,
    table_bytes,
)
from timebound.pipeline.metrics import metrics
from timebound.pipeline.session import build_session, size_shuffles
from timebound.spark.traces import (
    MESSAGES,
    OPERATORS,
    Gathered,
    MetricRow,
    arrow_schema,
    decide_messages,
    first_time_error,
    run_options,
    survey,
    translate_errors,
    typed_options,
)
from timebound.spark.traces.schemas import METRICS, PROTOCOLS
from timebound.sparkutil import stop_quietly

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

#: What the pipeline writes in DIR (an existing DIR holding anything else is refused).
OUTPUT_NAMES = (*PROTOCOLS, "metrics", "manifest.json", "summary.json", "report.html")



def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _prefixed(progress: Callable[[str], None], head: str, line: str) -> None:
    progress(head + line)


def resolve_options(df: DataFrame, table: str, given: Mapping[str, Any],
                    progress: Callable[[str], None] = _stderr,
                    rows: Sequence[Mapping[str, Any]] | None = None,
                    ) -> dict[str, dict[str, Any]]:
    """``run -> option values`` of ``table`` (option columns over the command line over
    the operator's defaults), validated. ``rows``: the distinct (run, option columns)
    of ``df`` when already read (else a job reads them)."""
    op = OPERATORS[table]
    defaults = {**op.defaults, **{k: v for k, v in given.items() if v is not None}}
    per_run = op.run_defaults(df) if op.run_defaults is not None else None
    resolved = run_options(df, table, op.spec, defaults, per_run, rows=rows)
    check_overridden(table, given, resolved, progress)
    return resolved


def check_overridden(table: str, given: Mapping[str, Any],
                     resolved: Mapping[str, Mapping[str, Any]],
                     progress: Callable[[str], None] = _stderr) -> None:
    """A command-line option that a run's option column sets to another value is never
    ignored silently. When every run's column overrides it, the option has no effect at
    all: a contradiction, refused (UsageError). When only some runs set the column (a
    sweep whose other runs take the command line), each override is noted in one line."""
    for dest, value in given.items():
        if value is None:
            continue
        flag = "--" + dest.replace("_", "-")
        overridden = {run: options[dest] for run, options in resolved.items()
                      if dest in options and options[dest] != value}
        if overridden and len(overridden) == len(resolved):
            run, column = next(iter(overridden.items()))
            raise UsageError(flag, f"contradicts the dataset: table {table} sets "
                             f"{dest} = {column!r} for run {run!r} (option "
                             f"columns override the command line; drop {flag})")
        for run, column in overridden.items():
            progress(f"note: table {table}, run {run!r}: option column {dest} = {column!r} "
                     f"overrides {flag} {value}")


def run_pipeline(
    dataset: str,
    out: str,
    *,
    options: Mapping[str, Any] | None = None,
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    spark: SparkSession | None = None,
    progress: Callable[[str], None] = _stderr,
    progress_every: float = EVERY,
) -> dict[str, Any]:
    """Run the pipeline; returns the summary (also written to OUT/summary.json).
    ``progress`` takes every progress line; while a table is decided, the tasks done
    are said every ``progress_every`` seconds (``_watch``; 0: never)."""
    options = dict(options or {})
    tables = present_tables(dataset)
    if not tables:
        raise UsageError("DATASET", f"'{dataset}' holds none of the tables "
                         f"{', '.join(PROTOCOLS)}")
    out = os.path.abspath(out)
    parent = os.path.dirname(out)
    if not os.path.isdir(parent):
        raise UsageError("--out", f"folder '{parent}' does not exist")
    guard_output(out, [dataset], "--out", folder=True, marker="summary.json",
                 ours=OUTPUT_NAMES)
    check_writable_folder(out, "--out")
    for table in tables:  # before Spark starts: a bad part file is named at once
        check_parquet_files(table, os.path.join(dataset, table))
    manifest = read_manifest(dataset)
    scenario = str(manifest.get("scenario") or os.path.basename(os.path.abspath(dataset)))
    started = time.perf_counter()
    owned = False  # a session this run started (stopped on a failure), not a caller's
    if spark is None:
        from pyspark.sql import SparkSession

        owned = SparkSession.getActiveSession() is None
        spark = build_session(master, dict(conf or {}))
    partitions = size_shuffles(spark, table_bytes(dataset, tables), dict(conf or {}))
    inputs = {table: read_table(spark, dataset, table) for table in tables}
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.tmp-", dir=parent)
    follow_umask(tmp)
    summary: dict[str, Any] = {"dataset": os.path.abspath(dataset), "protocols": {},
                               "shuffle_partitions": partitions}
    # the ETA weighs each table by its input bytes (at least 1: an empty table costs a job)
    weights = {table: max(1, table_bytes(dataset, [table])) for table in tables}
    deciding = time.perf_counter()
    try:
        decisions: dict[str, DataFrame] = {}
        gathered: dict[str, list[MetricRow]] = {}  # metrics rows gathered while deciding
        for index, table in enumerate(tables, start=1):
            protocol = PROTOCOLS[table]
            t0 = time.perf_counter()
            progress(f"pipeline {scenario} [{index}/{len(tables)}] {protocol}: "
                     f"reading {table}")
            decided_with = None
            try:
                with translate_errors():
                    op = OPERATORS[table]
                    gather = found = None
                    if table == MESSAGES:  # one aggregate: options, receivers, spans
                        found = survey(inputs[table], [c for c in op.spec.option_columns
                                                       if c in inputs[table].columns])
                    per_run = resolve_options(inputs[table], table, options, progress,
                                              rows=found.options if found else None)
                    typed = typed_options(op.spec, per_run)
                    decided_with = typed
                    if found is not None:
                        gather = Gathered.create(spark)
                        result = decide_messages(inputs[table], typed, gather=gather,
                                                 surveyed=found)
                    else:
                        result = op.operate(inputs[table], typed)
                    head = f"pipeline {scenario} [{index}/{len(tables)}] {protocol}: deciding, "
                    with watching(spark, functools.partial(_prefixed, progress, head),
                                  progress_every):
                        result.write.parquet(os.path.join(tmp, table))
            except TraceError:
                if table == MESSAGES and decided_with:
                    # the error the per-class plan reports: time first, its first row
                    with translate_errors():
                        first_time_error(inputs[table], decided_with)
                raise
            decisions[table] = spark.read.parquet(os.path.join(tmp, table))
            rows = decisions[table].count()
            if gather is not None and gather.usable(rows):
                gathered[table] = gather.rows()
            seconds = time.perf_counter() - t0
            summary["protocols"][protocol] = {"table": table, "runs": len(per_run),
                                              "decisions": rows, "seconds": round(seconds, 2)}
            if gather is not None:
                summary["protocols"][protocol]["measures"] = (
                    "gathered while deciding" if table in gathered
                    else "read from the decision table")
            eta = eta_after(sum(weights[t] for t in tables[:index]),
                            sum(weights[t] for t in tables[index:]),
                            time.perf_counter() - deciding)
            progress(f"pipeline {scenario} [{index}/{len(tables)}] {protocol}: "
                     f"{len(per_run)} run(s), "
                     f"{rows} decision rows -> {table}/ ({seconds:.1f} s){eta}")
        t0 = time.perf_counter()
        with translate_errors():
            write_metrics(spark, {t: d for t, d in decisions.items() if t not in gathered},
                          [row for rows in gathered.values() for row in rows],
                          os.path.join(tmp, "metrics"))
        m = pq.read_table(os.path.join(tmp, "metrics")).to_pylist()
        summary["metrics_rows"] = len(m)
        summary["headline"] = _headline(m)
        progress(f"pipeline {scenario}: metrics: {summary['metrics_rows']} rows "
                 f"({time.perf_counter() - t0:.1f} s)")
        if manifest:
            shutil.copyfile(os.path.join(dataset, "manifest.json"),
                            os.path.join(tmp, "manifest.json"))
        summary["seconds"] = round(time.perf_counter() - started, 2)
        with open(os.path.join(tmp, "summary.json"), "w", encoding="utf-8") as handle:
            json.dump(summary, handle, indent=2, default=str)
        _publish(tmp, out)
    except BaseException:
        try:
            stop_quietly(spark, owned)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    return summary


#: (protocol, measure) shown in the one-screen summary, summed/averaged over runs.
HEADLINE = [
    ("atmostonce", "messages", "sum"), ("atmostonce", "verdict.accepted", "sum"),
    ("atmostonce", "verdict.duplicate", "sum"), ("atmostonce", "verdict.stale", "sum"),
    ("atmostonce", "lost_rate", "avg"), ("atmostonce", "at_most_once_violations", "sum"),
    ("causal", "events", "sum"), ("causal", "c_max", "max"),
    ("merge", "action.deliver", "sum"), ("merge", "action.late", "sum"),
    ("merge", "buffering_mean", "avg"),
    ("slotted", "delivered.FR", "sum"), ("slotted", "buffer_max", "max"),
    ("stability", "stable", "sum"), ("stability", "latency_mean", "avg"),
    ("stability", "ack_bytes", "sum"),
]


def write_metrics(spark: SparkSession, decisions: Mapping[str, DataFrame],
                  ready: list[MetricRow], path: str) -> None:
    """Write the metrics table to ``path``: the measures of ``decisions`` (Spark) and the
    rows already computed (``ready``). With nothing left for Spark, ``ready`` is written
    with pyarrow as one Parquet file (the folder Spark would write, no job)."""
    table = pa.Table.from_pylist([dict(zip(METRICS.names, row)) for row in ready],
                                 schema=METRICS_ARROW)
    if decisions:
        frame = metrics(spark, dict(decisions))
        if ready:
            frame = frame.unionByName(spark.createDataFrame(table))
        frame.coalesce(1).write.parquet(path)
        return
    os.mkdir(path)
    pq.write_table(table, os.path.join(path, "part-00000.parquet"))


METRICS_ARROW = arrow_schema(METRICS)


def _headline(m: list[dict[str, Any]]) -> list[tuple[str, str, float]]:
    """HEADLINE's measures over the metrics rows (not series points): sum, avg or max
    over runs of the non-null values."""
    values: dict[tuple[str, str], list[float]] = {}
    for r in m:
        if r["t"] is None and r["value"] is not None:
            values.setdefault((r["protocol"], r["measure"]), []).append(r["value"])
    how: dict[str, Callable[[list[float]], float]] = {
        "sum": math.fsum, "avg": lambda v: math.fsum(v) / len(v), "max": max}
    out = []
    for protocol, measure, kind in HEADLINE:
        found = values.get((protocol, measure))
        if found:
            out.append((protocol, f"{measure} ({kind} over runs)", float(how[kind](found))))
    return out


def _publish(tmp: str, out: str) -> None:
    """Rename ``tmp`` to ``out``; a previous ``out`` is put back if Ctrl-C or SIGTERM
    lands between the two renames (never a missing DIR, never one hidden away)."""
    old = None
    try:
        if os.path.exists(out):
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.old-",
                                   dir=os.path.dirname(out))
            os.rmdir(old)
            os.replace(out, old)
        os.replace(tmp, out)
    except BaseException:
        if old is not None and os.path.isdir(old) and not os.path.exists(out):
            os.replace(old, out)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def format_summary(summary: Mapping[str, Any]) -> str:
    lines = [f"{'protocol':<11} {'runs':>5} {'decisions':>10} {'seconds':>8}"]
    for protocol, info in summary["protocols"].items():
        lines.append(f"{protocol:<11} {info['runs']:>5} {info['decisions']:>10} "
                     f"{info['seconds']:>8.1f}")
    for protocol, label, value in summary.get("headline", []):
        shown = f"{value:.4g}" if value != int(value) else f"{int(value)}"
        lines.append(f"  {protocol:<11} {label:<40} {shown}")
    lines.append(f"metrics rows: {summary.get('metrics_rows', 0)}; "
                 f"total {summary.get('seconds', 0):.1f} s")
    return "\n".join(lines)
