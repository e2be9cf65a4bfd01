"""Where one micro-batch of the streaming at-most-once path spends its milliseconds
(issue 29, item 1).

For each connection count: ``timebound.stream.bench.generate`` writes a ``messages``
stream of two files of ``--rows`` rows each; the query (``timebound.stream``'s
at-most-once query, fixed rho, RocksDB, one shuffle partition so the Python work runs
in one task, one after the other) first drains file 0 (warm-up: Python workers up,
every key's state written), then, restarted from the same checkpoint, file 1: that
second micro-batch is the one profiled (its keys load and store a real snapshot).

The processor is ``ProfiledProcessor``, a subclass of
``timebound.spark.traces``' ``AtMostOnceProcessor`` (the row-at-a-time path run by
``transformWithState``; since commit 48bc342 the query ``timebound stream`` runs is the
column-wise ``ColumnarProcessor`` under ``transformWithStateInPandas``, which this script
does not split) defined here that changes no decision: in each Python worker it wraps the module functions the processor calls
(``decode``/``restore_classified``, ``classified_snapshot``/``encode``, the adapter's
``feed``) and the state handle's ``get``/``update`` with timers, times its own
``handleInputRows`` (row objects in, the decisions, the hand-back of output rows) and
writes running totals to one JSON file per processor instance in a temporary folder;
the driver sums them afterwards. Phases:

- ``rows in``: pulling the key's rows from PySpark's iterator (Arrow batch -> pandas ->
  ``Row``) and ``row.asDict()``;
- ``snapshot decode``: zlib + JSON decode and ``restore_classified``;
- ``snapshot encode``: ``classified_snapshot`` and zlib + JSON encode;
- ``state get`` / ``state update``: the ``ValueState`` calls (state-server round trips);
- ``core decisions``: ``AtMostOnceAdapter.feed`` (the core receiver and the row adapter);
- ``decide glue``: the rest of ``decide`` (sorting rows, per-row dicts, verdict rows);
- ``rows out``: from the first output row to the generator's end: ``OutRow`` and
  PySpark's conversion of the rows we yield (it runs between our yields);
- ``JVM/Spark``: the micro-batch's ``durationMs.triggerExecution`` minus all the above
  (scan, shuffle, Arrow in and out of the worker outside ``handleInputRows``, the state
  store commit, the foreachBatch Parquet write, planning).

A second table, "engines", puts the stateful operators side by side on one stream of
four micro-batches of ``--rows`` rows (the first ``--connections`` value, the bench's
two shuffle partitions): ``grouped`` (``applyInPandasWithState``, what a new
``timebound stream atmostonce`` checkpoint runs), ``columnar``
(``transformWithStateInPandas``, the engine before it) and the built-in
``dropDuplicatesWithinWatermark``, each on a fresh checkpoint, in turn, ``--repeats``
times after one untimed warm-up run each; per side, medians over the repeats: the first
micro-batch's ``queryPlanning`` and ``addBatch`` (ms), the later micro-batches' median
``triggerExecution`` (ms) and the query's wall time (s).

    .venv/bin/python benchmarks/profile_stream.py [--rows 100000]
        [--connections 1000,100000] [--repeats 3] [--master local[2]] [--json OUT] [--smoke]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from timebound.spark.traces._rows import OutRow
from timebound.spark.traces._stream_atmostonce import AtMostOnceProcessor
from timebound.stream.bench import RHO, WATERMARK_TICKS, generate, run_query

PHASES = ["rows in", "snapshot decode", "snapshot encode", "state get", "state update",
          "core decisions", "decide glue", "rows out"]

def _totals() -> dict[str, float]:
    """The worker's totals by phase, in seconds. Kept on the instrumented module, not
    here: this script's functions reach the workers by value (cloudpickle), each query
    with its own copy of this module's globals, while the wrappers installed by the
    first query stay in the worker's ``_atmostonce`` for the next."""
    from timebound.spark.traces import _stream_atmostonce as module

    totals: dict[str, float] = module.__dict__.setdefault("_profile_totals", {})
    return totals


def _timed(phase: str, func: Callable[..., Any], totals: dict[str, float]
           ) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            totals[phase] = totals.get(phase, 0.0) + time.perf_counter() - started

    return wrapper


def _instrument() -> None:
    """Wrap the module functions ``AtMostOnceProcessor.decide`` calls, once per worker."""
    from timebound.spark.traces import _stream_atmostonce as module

    if getattr(module, "_profiled", False):
        return
    module._profiled = True  # type: ignore[attr-defined]
    totals = _totals()
    for name, phase in (("decode", "snapshot decode"), ("restore_classified", "snapshot decode"),
                        ("encode", "snapshot encode"),
                        ("classified_snapshot", "snapshot encode")):
        if hasattr(module, name):
            setattr(module, name, _timed(phase, getattr(module, name), totals))
    adapter = getattr(module, "AtMostOnceAdapter", None)
    if adapter is not None:
        class TimedAdapter(adapter):  # type: ignore[misc, valid-type]
            def feed(self, row: Any) -> Any:
                # consumed inside the timer, should feed ever return an iterator
                started = time.perf_counter()
                out = list(super().feed(row))
                totals["core decisions"] = totals.get("core decisions", 0.0) \
                    + time.perf_counter() - started
                return out

        module.AtMostOnceAdapter = TimedAdapter  # type: ignore[attr-defined]


class _TimedState:
    def __init__(self, state: Any, totals: dict[str, float]) -> None:
        self.state = state
        self.totals = totals

    def get(self) -> Any:
        started = time.perf_counter()
        try:
            return self.state.get()
        finally:
            self.totals["state get"] = self.totals.get("state get", 0.0) \
                + time.perf_counter() - started

    def update(self, value: Any) -> None:
        started = time.perf_counter()
        try:
            self.state.update(value)
        finally:
            self.totals["state update"] = self.totals.get("state update", 0.0) \
                + time.perf_counter() - started

    def __getattr__(self, name: str) -> Any:
        return getattr(self.state, name)


class ProfiledProcessor(AtMostOnceProcessor):
    """``AtMostOnceProcessor`` with every phase timed (module docstring)."""

    def __init__(self, options: Any, folder: str) -> None:
        super().__init__(options)
        self.folder = folder

    def init(self, handle: Any) -> None:
        super().init(handle)
        _instrument()
        self.state = _TimedState(self.state, _totals())
        self.file = os.path.join(self.folder, f"{os.getpid()}-{uuid.uuid4().hex}.json")
        self.totals: dict[str, float] = {}

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any
                        ) -> Iterator[Any]:
        from timebound.spark.traces._rows import grouping_key

        totals = _totals()
        totals.clear()
        started = time.perf_counter()
        dicts = [row.asDict() for row in rows]
        pulled = time.perf_counter()
        outputs = self.decide(grouping_key(key), dicts)
        decided = time.perf_counter()
        inner = sum(totals.values())  # decode, encode, state calls, core decisions
        for out in outputs:
            yield OutRow(out)
        totals["rows in"] = pulled - started
        totals["decide glue"] = decided - pulled - inner
        totals["rows out"] = time.perf_counter() - decided
        totals["rows"] = len(dicts)
        totals["keys"] = 1
        for phase, value in totals.items():
            self.totals[phase] = self.totals.get(phase, 0.0) + value
        totals.clear()
        with open(self.file, "w") as handle:
            json.dump(self.totals, handle)


def _summed(folder: str) -> dict[str, float]:
    total: dict[str, float] = {}
    for path in glob.glob(os.path.join(folder, "*.json")):
        with open(path) as handle:
            for phase, value in json.load(handle).items():
                total[phase] = total.get(phase, 0.0) + value
    return total


def profile(spark: Any, rows: int, connections: int, workdir: str,
            warm_up: bool = True) -> dict[str, Any]:
    """One warm-up micro-batch (``--smoke``: none), then the profiled one; milliseconds
    per phase."""
    from timebound.adapters.atmostonce import AtMostOnceOptions
    from timebound.core.atmostonce import ReceiverConfig
    from timebound.spark.traces._stream_atmostonce import with_classes
    from timebound.spark.traces._stream_schemas import VERDICTS
    from timebound.stream._commands import _source

    base = os.path.join(workdir, f"c{connections}")
    staged, source = os.path.join(base, "staged"), os.path.join(base, "in")
    truth = generate(staged, 2 * rows, connections, 2, WATERMARK_TICKS)
    os.makedirs(source)
    options = AtMostOnceOptions(ReceiverConfig("fixed", rho=RHO, gc_every=RHO), 1)
    checkpoint, sink = os.path.join(base, "ck"), os.path.join(base, "out")
    measured: dict[str, Any] = {}
    for index in ((0, 1) if warm_up else (0,)):
        shutil.move(os.path.join(staged, f"{index:05d}.parquet"), source)
        timings = os.path.join(base, f"timings-{index}")
        os.makedirs(timings)
        query = with_classes(_source(spark, "messages", source, 1), 1) \
            .groupBy("run", "receiver", "cls") \
            .transformWithState(ProfiledProcessor(options, timings), VERDICTS, "Append",
                                "None")
        _, progress = run_query(query, sink, checkpoint)
        batch = [p for p in progress if p["numInputRows"]][-1]
        measured = {"batch_ms": float(batch["durationMs"]["triggerExecution"]),
                    "input_rows": int(batch["numInputRows"]),
                    "python": _summed(timings)}
    python = measured["python"]
    phases = {phase: 1000 * python.get(phase, 0.0) for phase in PHASES}
    phases["JVM/Spark"] = measured["batch_ms"] - sum(phases.values())
    return {"connections": connections, "rows": measured["input_rows"],
            "stream_rows": truth["rows"], "keys": int(python.get("keys", 0)),
            "batch_ms": measured["batch_ms"], "phases_ms": phases}


def report(results: list[dict[str, Any]]) -> str:
    head = "| phase | " + " | ".join(
        f"{r['connections']:,} conns: ms | share" for r in results) + " |"
    lines = [head, "|---|" + "---:|---:|" * len(results)]
    for phase in ["JVM/Spark", *PHASES]:
        cells = [f"{r['phases_ms'][phase]:,.0f} | {r['phases_ms'][phase] / r['batch_ms']:.0%}"
                 for r in results]
        lines.append(f"| {phase} | " + " | ".join(cells) + " |")
    lines.append("| **micro-batch** (`triggerExecution`) | " + " | ".join(
        f"**{r['batch_ms']:,.0f}** | 100%" for r in results) + " |")
    lines.append("| rows in the micro-batch, keys | " + " | ".join(
        f"{r['rows']:,} | {r['keys']}" for r in results) + " |")
    lines.append("| us per row | " + " | ".join(
        f"{1000 * r['batch_ms'] / max(1, r['rows']):,.1f} |" for r in results) + " |")
    return "\n".join(lines)


ENGINES = ("grouped", "columnar", "builtin")


def engines(spark: Any, rows: int, connections: int, repeats: int, workdir: str,
            batches: int = 4, warm_up: bool = True) -> dict[str, dict[str, float]]:
    """The "engines" table's medians per side (module docstring); ``--smoke``: one
    micro-batch, no warm-up."""
    import statistics

    from timebound.adapters.atmostonce import AtMostOnceOptions
    from timebound.core.atmostonce import ReceiverConfig
    from timebound.spark.traces._stream_atmostonce import verdicts
    from timebound.stream.bench import builtin, messages

    spark.conf.set("spark.sql.shuffle.partitions",
                   str(max(1, int(spark.sparkContext.defaultParallelism))))
    base = os.path.join(workdir, "engines")
    source, warm = os.path.join(base, "in"), os.path.join(base, "warm")
    generate(source, batches * rows, connections, batches, WATERMARK_TICKS)
    options = AtMostOnceOptions(ReceiverConfig("fixed", rho=RHO, gc_every=RHO), 1)

    def one(side: str, folder: str, name: str) -> dict[str, float]:
        df = (builtin(spark, folder, WATERMARK_TICKS) if side == "builtin"
              else verdicts(messages(spark, folder), options, side))
        wall, progress = run_query(df, os.path.join(base, f"out-{name}"),
                                   os.path.join(base, f"ck-{name}"))
        read = [p["durationMs"] for p in progress if p["numInputRows"]]
        return {"plan_ms": float(read[0].get("queryPlanning", 0)),
                "first_ms": float(read[0].get("addBatch", 0)),
                "later_ms": statistics.median(float(d["triggerExecution"]) for d in read[1:])
                if len(read) > 1 else 0.0, "wall_s": wall}

    if warm_up:
        generate(warm, 2_000, 100, 2, WATERMARK_TICKS)
        for side in ENGINES:
            one(side, warm, f"warm-{side}")
    runs: dict[str, list[dict[str, float]]] = {side: [] for side in ENGINES}
    for repeat in range(repeats):
        order = ENGINES if repeat % 2 == 0 else ENGINES[::-1]
        for side in order:
            print(f"profile stream: engines, {side} run {repeat + 1}/{repeats}",
                  file=sys.stderr, flush=True)
            runs[side].append(one(side, source, f"{side}-{repeat}"))
    return {side: {k: statistics.median(r[k] for r in runs[side]) for k in runs[side][0]}
            for side in ENGINES}


def report_engines(table: dict[str, dict[str, float]], rows: int, connections: int,
                   repeats: int, batches: int) -> str:
    lines = [f"engines: {batches} micro-batches of {rows:,} rows, {connections:,} connections, "
             f"median of {repeats}",
             "| side | first batch: queryPlanning ms | first batch: addBatch ms | "
             "later batches: median ms | query wall s |", "|---|---:|---:|---:|---:|"]
    for side, v in table.items():
        lines.append(f"| {side} | {v['plan_ms']:,.0f} | {v['first_ms']:,.0f} | "
                     f"{v['later_ms']:,.0f} | {v['wall_s']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000, help="rows per micro-batch")
    parser.add_argument("--connections", default="1000,100000")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs per side of the engines table (default 3)")
    parser.add_argument("--json", default=None, metavar="OUT", help="also write the results")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (Spark start dominates)")
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.connections, args.repeats = 2_000, "100", 1
    from timebound.stream._run import build_session, prepare_session

    workdir = tempfile.mkdtemp(prefix="profile-stream-")
    spark = build_session(args.master, {"spark.sql.shuffle.partitions": "1"},
                          app_name="profile-stream", log=os.path.join(workdir, "spark.log"))
    try:
        prepare_session(spark, os.path.join(workdir, "none"),
                        {"spark.sql.shuffle.partitions": "1"})
        results = []
        for c in [int(c) for c in args.connections.split(",")]:
            print(f"profile stream: {c:,} connections", file=sys.stderr, flush=True)
            results.append(profile(spark, args.rows, c, workdir, warm_up=not args.smoke))
        first = int(args.connections.split(",")[0])
        batches = 1 if args.smoke else 4
        table = engines(spark, args.rows, first, args.repeats, workdir, batches,
                        warm_up=not args.smoke)
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print(report(results))
    print()
    print(report_engines(table, args.rows, first, args.repeats, batches))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"phases": results, "engines": table}, handle, indent=2)


if __name__ == "__main__":
    main()
