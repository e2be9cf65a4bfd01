"""Re-decide one run of a dataset table with ``timebound replay`` (offline check).

``replay_run(dataset, table, run, workdir)`` writes the run's rows (sorted by ``seq``,
without the per-run option columns) to a Parquet file, turns the option columns into
the replay's command-line options, calls ``timebound.cli.main(["replay", ...])`` and
returns the output rows. Used by the tests and by the reproduction table to show that
the offline decisions equal the simulator's.
"""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from timebound.sim._dataset import read_table

PROTOCOL = {"messages": "atmostonce", "events": "causal", "arrivals": "merge",
            "channel": "slotted", "acks": "stability"}
OPTIONS = {
    "messages": ("estimator", "rho", "gc_every", "window", "spikes", "p", "resilient",
                 "beta", "latest_every", "recovery_grace"),
    "events": ("epsilon", "variant", "n"),
    "arrivals": ("epsilon", "delta", "variant"),
    "channel": (),
    "acks": ("acks", "senders", "receivers"),
}


def replay_argv(table: str, options: dict[str, Any], src: str, dst: str) -> list[str]:
    argv = ["replay", PROTOCOL[table], "--input", src, "--output", dst]
    for name in OPTIONS[table]:
        value = options.get(name)
        if value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        argv += [flag] if value is True else [flag, str(value)]
    return argv


def replay_run(dataset: str, table: str, run: str, workdir: str,
               channel: str | None = None) -> tuple[int, list[dict[str, Any]]]:
    """(exit status, output rows) of replaying one run (one channel for ``channel``)."""
    from timebound.cli import main

    data = read_table(dataset, table)
    rows = [r for r in data.to_pylist() if r["run"] == run
            and (channel is None or r.get("channel") == channel)]
    rows.sort(key=lambda r: r["seq"])
    options = {k: rows[0].get(k) for k in OPTIONS[table]} if rows else {}
    keep = [c for c in data.column_names if c not in OPTIONS[table]]
    sub = pa.Table.from_pylist([{k: r[k] for k in keep} for r in rows],
                               schema=pa.schema([data.schema.field(k) for k in keep]))
    safe = run.replace("/", "_").replace("=", "_")
    src = os.path.join(workdir, f"{table}-{safe}-{channel or 'all'}.parquet")
    dst = os.path.join(workdir, f"{table}-{safe}-{channel or 'all'}.out.jsonl")
    pq.write_table(sub, src)
    status = main(replay_argv(table, options, src, dst))
    if status != 0:
        return status, []
    import json

    with open(dst, encoding="utf-8") as fh:
        return status, [json.loads(line) for line in fh if line.strip()]
