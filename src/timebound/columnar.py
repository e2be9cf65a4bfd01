"""Column-wise at-most-once decisions: the replayer's receivers driven over Arrow columns.

Shared by the Spark drivers (``timebound pipeline``'s operator, ``timebound stream``'s
processor) and the library (``timebound.spark``): one column-wise path for them all.

The per-row path (``AtMostOnceAdapter.feed``) wraps every record in a ``Row`` dict,
checks its fields one by one and looks up its receiver and class by name. Over a
table most of that is column-wide work, done here once per column in Arrow/numpy:

- the checks of a well-formed message row (types, non-null, non-empty strings,
  ``ts >= 1``) and of the trace rule (``at`` never decreasing per receiver, also
  across calls, against the replayer's last ``at``) are vectorized; a segment that
  fails any of them is handed to the row path untouched, which raises the exact
  ``file:line: field`` error (nothing is decided before every check passed);
- receivers and connection ids are dictionary-encoded; each distinct id is
  classified once by the core's own classifier (``crc32_classes``: ``crc32(utf-8
  conn) mod K``), and checked against the class Spark routed it to, if any;
- each receiver's rows, in file order, go as plain columns to the adapter's column
  path, ``AtMostOnceAdapter.decide_receiver`` (receiver creation, the ``at`` rule, the
  class split, the core's ``drive`` loop of ``decide_message`` per row, the counters
  and the receiver's clock: the same decisions ``decide`` makes row by row), and the
  results are scattered back to file order.

Crash rows (any ``type`` other than ``msg``) split a table into segments; they go
through the row path between the segments, so crashes land at the right place.

Every decision is still the core's: no protocol rule lives here. The differential
test (tests/test_pipeline_fastpath.py) checks this path equal to the row path over
generated traces (every estimator, classes, resilient crashes, malformed rows).
``path()`` names it in benchmark output.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from timebound.adapters.atmostonce import ClassRows
from timebound.contract import MESSAGE_IDS, MESSAGE_MINIMUMS
from timebound.core.atmostonce import VERDICT_CODES as CODES
from timebound.core.atmostonce import Verdict, crc32_classes


def path() -> str:
    """Which decision path runs, for benchmark output (the core: see ``_compiled``)."""
    from timebound._compiled import status

    return f"columnar ({status()}, Arrow/numpy column checks)"

#: Verdict codes (int8) -> output strings.
NAMES = tuple(v.value for v in Verdict)

@functools.cache
def _names_array() -> pa.Array:
    """``NAMES`` as Arrow, built on first use: ``pa.array`` of a Python list imports
    pandas (to check for a Series), about half a second a Python process that only
    unpickles a streaming processor (Spark's driver-side ``init``) does not need."""
    return pa.array(NAMES, pa.string())

_MESSAGE_COLUMNS = ("receiver", "conn", "ts", "at")
_TYPES = {"receiver": pa.string(), "conn": pa.string(), "ts": pa.int64(), "at": pa.int64()}


class Decided:
    """Outputs of ``decide_table``: the row indexes that produced a decision (in
    order) and the decision columns, aligned with them."""

    __slots__ = ("keep", "verdict", "rho", "entries", "cls", "fast_rows", "slow_rows")

    def __init__(self, keep: np.ndarray, verdict: pa.Array, rho: pa.Array,
                 entries: pa.Array, cls: pa.Array, fast_rows: int, slow_rows: int) -> None:
        self.keep = keep
        self.verdict = verdict
        self.rho = rho
        self.entries = entries
        self.cls = cls  # the core classifier's class of each decided row's conn
        self.fast_rows = fast_rows
        self.slow_rows = slow_rows


def decide_table(replayer: Any, source: str, table: pa.Table, lines: np.ndarray,
                 row_path: Callable[[int], Sequence[Any]], *,
                 expect_class: int | None = None, all_messages: bool = False) -> Decided:
    """Decide every row of ``table`` (in row order) with ``replayer``.

    ``lines[i]`` numbers row ``i`` in errors. ``row_path(i)`` feeds row ``i`` to the
    replayer's row path and returns its output rows (dicts with verdict, rho,
    entries); it is used for crash rows and for any segment that is not plainly
    well-formed, so errors are the replay's own. ``expect_class``: every message's
    connection was routed to this class by someone else (Spark's ``crc32``); each
    distinct id is checked against the core's classifier before its rows are decided
    (``AssertionError`` naming it otherwise; ``row_path`` must check its own rows).
    ``all_messages``: every row is a message row, whatever ``type`` column there is."""
    n = table.num_rows
    verdict = np.zeros(n, dtype=np.int8)
    rho = np.zeros(n, dtype=np.int64)
    entries = np.zeros(n, dtype=np.int64)
    classes = np.zeros(n, dtype=np.int64)
    valid = np.ones(n, dtype=bool)  # False: rho/entries null (down) -- or no output
    produced = np.zeros(n, dtype=bool)
    fast = slow = 0

    kinds = table.column("type") if "type" in table.column_names else None
    if all_messages:
        is_msg = np.ones(n, dtype=bool)
    elif kinds is not None and kinds.type == pa.string() and kinds.null_count == 0:
        is_msg = pc.equal(kinds, "msg").to_numpy(zero_copy_only=False)
    else:
        is_msg = np.zeros(n, dtype=bool)
    other = np.flatnonzero(~is_msg)
    bounds = [-1, *other.tolist(), n]

    def slow_row(i: int) -> None:
        outputs = row_path(i)
        if outputs:
            out = outputs[0]
            produced[i] = True
            verdict[i] = CODES[out["verdict"]]
            classes[i] = crc32_classes([out["conn"]], replayer.options.classes)[0]
            if out["rho"] is None:
                valid[i] = False
            else:
                rho[i] = out["rho"]
                entries[i] = out["entries"]

    for left, right in zip(bounds, bounds[1:]):
        start, stop = left + 1, right
        if stop > start:
            segment = table.slice(start, stop - start)
            if _decide_segment(replayer, source, segment, lines[start:stop],
                               verdict[start:stop], rho[start:stop], entries[start:stop],
                               valid[start:stop], classes[start:stop], expect_class):
                produced[start:stop] = True
                fast += stop - start
            else:
                for i in range(start, stop):
                    slow_row(i)
                slow += stop - start
        if right < n:
            slow_row(right)
            slow += 1
    keep = np.flatnonzero(produced)
    mask = ~valid[keep]
    return Decided(
        keep,
        pc.take(_names_array(), pa.array(verdict[keep])),
        pa.array(rho[keep], pa.int64(), mask=mask),
        pa.array(entries[keep], pa.int64(), mask=mask),
        pa.array(classes[keep]),
        fast, slow,
    )


def misrouted(conn: str, cls: int, classes: int) -> str:
    """The error of a connection routed to a class the core's classifier disagrees with."""
    return (f"Spark crc32 class {cls} differs from the core's "
            f"({crc32_classes([conn], classes)[0]}) for conn {conn!r}")


def _well_formed(segment: pa.Table) -> bool:
    for name in _MESSAGE_COLUMNS:
        if name not in segment.column_names:
            return False
        column = segment.column(name)
        if column.type != _TYPES[name] or column.null_count:
            return False
    for name in MESSAGE_IDS:
        if pc.min(pc.binary_length(segment.column(name))).as_py() == 0:
            return False
    return bool(pc.min(segment.column("ts")).as_py() >= MESSAGE_MINIMUMS["ts"])


def _scatter(rows: np.ndarray, decided: Any, verdict: np.ndarray, rho: np.ndarray,
             entries: np.ndarray, valid: np.ndarray) -> None:
    """One ``Decisions`` (``AtMostOnceAdapter``) into the segment's columns at ``rows``."""
    verdict[rows] = decided.codes
    rho[rows] = decided.estimates
    entries[rows] = decided.sizes
    if decided.up is not None:
        valid[rows] = decided.up


def _decide_segment(replayer: Any, source: str, segment: pa.Table, lines: np.ndarray,
                    verdict: np.ndarray, rho: np.ndarray, entries: np.ndarray,
                    valid: np.ndarray, classes_out: np.ndarray,
                    expect_class: int | None = None) -> bool:
    """Decide a segment of message rows; False (and nothing changed) when any row is
    malformed or goes back in time (the caller takes the row path)."""
    if not _well_formed(segment):
        return False
    names_enc = pc.dictionary_encode(segment.column("receiver").combine_chunks())
    conns_enc = pc.dictionary_encode(segment.column("conn").combine_chunks())
    names = names_enc.dictionary.to_pylist()
    conns = conns_enc.dictionary.to_pylist()
    rcode = names_enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    ccode = conns_enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    at = segment.column("at").to_numpy()
    ts = segment.column("ts").to_numpy()

    # trace rule: per receiver, `at` never decreases (within, and from the last call)
    by_receiver = np.argsort(rcode, kind="stable")
    r_sorted, at_sorted = rcode[by_receiver], at[by_receiver]
    if np.any((r_sorted[1:] == r_sorted[:-1]) & (at_sorted[1:] < at_sorted[:-1])):
        return False
    firsts = np.flatnonzero(np.r_[True, r_sorted[1:] != r_sorted[:-1]])
    if pc.min(segment.column("at")).as_py() < MESSAGE_MINIMUMS["at"]:
        return False
    for first in firsts.tolist():
        last = replayer.clock(names[r_sorted[first]])
        if last is not None and at_sorted[first] < last:
            return False

    # each receiver's rows, in file order, through the adapter's column path (receiver
    # creation, the class split, the core's loop, the counters, the clock)
    classes = replayer.options.classes
    conn_class = np.array(crc32_classes(conns, classes), dtype=np.int64)
    if expect_class is not None:
        wrong = np.flatnonzero(conn_class != expect_class)
        if len(wrong):
            raise AssertionError(misrouted(conns[int(wrong[0])], expect_class, classes))
    row_class = conn_class[ccode]
    conn_objects = np.array(conns, dtype=object)
    lasts = np.r_[firsts[1:], len(at_sorted)]
    for first, stop in zip(firsts.tolist(), lasts.tolist()):
        idx = by_receiver[first:stop]
        name, receiver_lines = names[r_sorted[first]], lines[idx].tolist()
        if classes == 1 or expect_class is not None:
            decided = replayer.decide_receiver(
                source, receiver_lines, name, conn_objects[ccode[idx]].tolist(),
                ts[idx].tolist(), at[idx].tolist(),
                0 if expect_class is None else expect_class)
            _scatter(idx, decided, verdict, rho, entries, valid)
            continue
        # the class split and the scatter back are numpy's (``decide_classes``)
        of_row = row_class[idx]
        by_class = idx[np.argsort(of_row, kind="stable")]
        bounds = np.cumsum([0, *np.bincount(of_row, minlength=classes).tolist()]).tolist()
        split = {c: by_class[bounds[c]:bounds[c + 1]] for c in range(classes)
                 if bounds[c + 1] > bounds[c]}
        parts = [ClassRows(c, conn_objects[ccode[rows]].tolist(), ts[rows].tolist(),
                           at[rows].tolist()) for c, rows in split.items()]
        decided_parts = replayer.decide_classes(source, receiver_lines, name,
                                                at[idx].tolist(), parts)
        for rows, decided in zip(split.values(), decided_parts):
            _scatter(rows, decided, verdict, rho, entries, valid)
    classes_out[:] = row_class
    return True
