"""Re-decide one run of a dataset table with the shared row adapter (offline check).

``replay_run(dataset, table, run, workdir)`` reads the run's rows (sorted by ``seq``),
builds the protocol's typed options from the run's option columns
(``timebound.adapters``: the same object ``timebound replay`` builds from its command
line) and feeds the rows, without the option columns, to the protocol's row adapter --
exactly what ``timebound replay`` does with a file of those rows. Returns the exit
status the replay would have (0, or 2 for a bad option or row) and the output rows as
the replay writes them to JSON Lines. Used by the tests and by
the reproduction table to show that the offline decisions equal the simulator's.
``workdir`` is kept for callers; nothing is written there.
"""

from __future__ import annotations

from typing import Any

from timebound.adapters import ADAPTERS, Row
from timebound.contract import OPTIONS, PROTOCOLS
from timebound.errors import TimeboundError
from timebound.sim._dataset import read_table

#: table -> protocol, and each table's option columns (from the contract).
PROTOCOL = dict(PROTOCOLS)
OPTION_COLUMNS = {table: tuple(o.name for o in OPTIONS[protocol])
                  for table, protocol in PROTOCOLS.items()}


def replay_run(dataset: str, table: str, run: str, workdir: str,
               channel: str | None = None) -> tuple[int, list[dict[str, Any]]]:
    """(exit status, output rows) of replaying one run (one channel for ``channel``)."""
    spec = ADAPTERS[PROTOCOL[table]]
    data = read_table(dataset, table)
    rows = [r for r in data.to_pylist() if r["run"] == run
            and (channel is None or r.get("channel") == channel)]
    rows.sort(key=lambda r: r["seq"])
    options = OPTION_COLUMNS[table]
    values = {k: rows[0].get(k) for k in options} if rows else {}
    source = f"{table}[run {run!r}]"
    out: list[dict[str, Any]] = []
    try:
        adapter = spec.build(values)
        for line, row in enumerate(rows, start=1):
            record = {k: v for k, v in row.items() if k not in options and v is not None}
            out.extend(_plain(produced) for produced in adapter.feed(Row(source, line, record)))
        out.extend(_plain(produced) for produced in adapter.finish())
    except TimeboundError:
        return 2, []
    return 0, out


def _plain(row: Any) -> dict[str, Any]:
    """An output row as JSON Lines carries it (tuples as lists)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dict(row).items()}
