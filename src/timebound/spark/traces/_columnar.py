"""Column-wise group bodies of the Spark operators (Arrow in, Arrow out).

A group's Arrow table is sorted by ``seq`` in Arrow (C++) unless it arrives in that
order, decided column-wise by the adapter's receivers (``timebound.columnar``: the
core's receivers over integer-coded columns, crash and malformed rows on the
replayer's row path), and the output is the sorted input columns (rows with a
decision) plus the decision columns: no ``to_pylist`` of whole rows, no per-row dicts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from timebound.adapters import Row
from timebound.columnar import decide_table, misrouted
from timebound.core.atmostonce import crc32_class


def atmostonce_group(replayer: Any, source: str, table: pa.Table, cls: int | None, k: int,
                     schema: pa.Schema, *, all_messages: bool = False) -> pa.Table:
    """One (run, receiver, cls) group of ``messages`` -> its decision rows. With ``cls``
    None, the rows of whole receivers (every class: no routing by Spark, crash rows
    once): each decision row's ``cls`` is the core classifier's class of its conn.
    ``all_messages``: every row is a message row (the caller checked), and the table
    has no ``type`` or ``down`` column (nor does ``schema``)."""
    seqs = table.column("seq").to_numpy()
    if len(seqs) > 1 and bool(np.any(seqs[1:] < seqs[:-1])):  # else in order already
        table = table.sort_by([("seq", "ascending")])
        seqs = table.column("seq").to_numpy()

    # Spark's SQL crc32 routed these rows; the core's classifier must agree on every
    # connection id: the column-wise path checks each distinct id of a segment once
    # (``expect_class``), the row path each message it is given.
    def row_path(i: int) -> list[Any]:
        data = {n: v for n, v in table.slice(i, 1).to_pylist()[0].items() if v is not None}
        if all_messages:
            data["type"] = "msg"
        conn = data.get("conn")
        if cls is not None and k > 1 and data.get("type") == "msg" and isinstance(conn, str) \
                and crc32_class(conn, k) != cls:
            raise AssertionError(misrouted(conn, cls, k))
        return list(replayer.feed(Row(source, int(seqs[i]), data)))

    decided = decide_table(replayer, source, table, seqs, row_path,
                           expect_class=cls if cls is not None and k > 1 else None,
                           all_messages=all_messages)
    if len(decided.keep) != table.num_rows:
        table = table.take(pa.array(decided.keep, type=pa.int64()))
    extra = {"verdict": decided.verdict, "rho": decided.rho, "entries": decided.entries,
             "cls": decided.cls if cls is None
             else pa.array(np.full(len(decided.keep), cls, dtype=np.int64))}
    columns = []
    for field in schema:
        column = extra[field.name] if field.name in extra else table.column(field.name)
        if column.type != field.type:
            column = column.cast(field.type)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema)
