"""Snapshots of a causal deterministic merger: its whole state as plain JSON-able data.

The streaming driver keeps one merger per key in Spark's state store between
micro-batches; ``merger_snapshot(merger)`` gives its state as a dict of ints, strings
and lists (``json.dumps`` takes it as it is) and ``restore_merger(merger, data)`` loads
it into a merger freshly built with the same ``epsilon``, ``delta`` and ``retain`` (those are
configuration, not state).

What is state: the buffered messages (process, message id, arrival time and
timestamp), the remembered ids (``(proc, msg)`` of every buffered or delivered
message, and with ``retain`` the queue of ids to forget with their deadlines) and
the counters of ``statistics()``. The heap is rebuilt from the buffered messages:
its order is the total order ``(deadline, tiebreak, proc, msg)``, so any heap of the
same messages pops them in the same order. Timestamps are ``⟨r, c, kn⟩``
(``Timestamp``) or ``⟨r, c⟩`` (``RCTimestamp``); ``kn`` present or absent tells which.

Lists are sorted, so equal mergers give equal snapshots. Round trip, pinned by
``tests/test_stream_snapshot.py``: ``merger_snapshot(restore_merger(fresh,
merger_snapshot(m))) == merger_snapshot(m)`` and the restored merger acts exactly as
``m`` on every later input.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Any

from timebound.core.causal import RCTimestamp, Timestamp
from timebound.core.merge._merger import Envelope, Merger, Stamp
from timebound.errors import ProtocolUsageError

SNAPSHOT_VERSION = 1

Snapshot = dict[str, Any]


def stamp_data(stamp: Stamp) -> list[Any]:
    """``[r, c, kn]`` for ⟨r, c, kn⟩, ``[r, c]`` for ⟨r, c⟩."""
    if isinstance(stamp, Timestamp):
        return [stamp.r, stamp.c, list(stamp.kn)]
    if isinstance(stamp, RCTimestamp):
        return [stamp.r, stamp.c]
    raise ProtocolUsageError(f"no snapshot for timestamp {stamp!r}")


def stamp_from(data: list[Any]) -> Timestamp | RCTimestamp:
    if len(data) == 3:
        return Timestamp(int(data[0]), int(data[1]), tuple(int(x) for x in data[2]))
    if len(data) == 2:
        return RCTimestamp(int(data[0]), int(data[1]))
    raise ProtocolUsageError(f"not a timestamp snapshot: {data!r}")


def merger_snapshot(merger: Merger) -> Snapshot:
    """The merger's whole state as JSON-able data (module docstring)."""
    buffered = sorted(
        (item[0], item[1], item[2], item[3], item[4], item[5]) for item in merger._heap)
    return {
        "version": SNAPSHOT_VERSION,
        "buffer": [[proc, msg, arrived, stamp_data(env.stamp)]
                   for _, _, proc, msg, arrived, env in buffered],
        "seen": sorted([proc, msg] for proc, msg in merger._seen),
        "forget": [[due, proc, msg] for due, (proc, msg) in merger._forget],
        "counts": [merger._received, merger._delivered, merger._late, merger._duplicates,
                   merger._max_buffered, merger._total_buffering, merger._max_buffering],
    }


def restore_merger(merger: Merger, data: Snapshot) -> Merger:
    """Load ``merger_snapshot`` data into ``merger`` (same epsilon, delta and retain);
    returns it."""
    if data.get("version") != SNAPSHOT_VERSION:
        raise ProtocolUsageError(
            f"merger snapshot version {data.get('version')!r}, expected {SNAPSHOT_VERSION}")
    heap = []
    for proc, msg, arrived, stamp in data["buffer"]:
        envelope = Envelope(str(proc), str(msg), stamp_from(stamp))
        heap.append((merger.deadline(envelope.stamp), envelope.stamp.tiebreak(),
                     envelope.proc, envelope.msg, int(arrived), envelope))
    heapq.heapify(heap)
    merger._heap = heap
    merger._seen = {(str(proc), str(msg)) for proc, msg in data["seen"]}
    merger._forget = deque((int(due), (str(proc), str(msg)))
                           for due, proc, msg in data["forget"])
    (merger._received, merger._delivered, merger._late, merger._duplicates,
     merger._max_buffered, merger._total_buffering, merger._max_buffering) = (
        int(x) for x in data["counts"])
    return merger
