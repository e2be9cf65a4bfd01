"""Snapshots of at-most-once receivers: their whole state as plain JSON-able data.

A driver that keeps receivers outside the process between inputs (the streaming
driver keeps one per key in Spark's state store) needs the receiver's state as data
and a way to load it back. ``receiver_snapshot(receiver)`` returns a dict of ints,
strings, bools, ``None`` and lists of them -- ``json.dumps`` takes it as it is -- and
``restore_receiver(receiver, data)`` loads it into a receiver freshly built from the
*same configuration* (``ReceiverConfig.new_receiver()``): the configuration
(estimator kind and parameters, ``gc_every``, resilience, capacity, grace, reorder
window) is not
state and is not in the snapshot; restoring checks that the estimator kinds agree.
``classified_snapshot`` / ``restore_classified`` do the same for every class of a
``ClassifiedReceiver``.

What is state: the connection table (with a reorder window W > 1, each connection's
window and the count of timestamps they hold), ``upper``, the down/recovery flags and every
timer (``next GC``, ``next refresh``, recovery time, the monotonic-clock window, the
end of the recovery grace), ``latest``, the verdict counters, ``gcs`` and
``evicted``, the estimator (estimate, ``p``, ``numacc``, ``numrej`` and the period's
lifetimes: the running maximum for the unlimited horizon, the H+1 largest and the
count for the limited one) and, for a ``MemoryStorage``, the record on stable
storage. Storage of any other kind is the driver's business (it survives on its own).

Choices:
- A timer that is not armed is ``None`` in the snapshot (as in the receiver).
- The expiry heap is not state: it is rebuilt from the table with each entry keyed
  by its current timestamp. The heap's keys are only lower bounds of the entries'
  timestamps (``Receiver._evict``), so the rebuilt heap evicts exactly the same
  entries at every later GC; only the amount of heap work differs.
- The table is two lists, ``[conns, timestamps]``, the connections sorted, so equal
  receivers give equal snapshots, byte for byte once serialized with sorted keys.
  (Version 1 wrote a list of ``[conn, ts]`` pairs; restoring still reads it. The two
  lists take a third of the time to build and about 60% of the time to serialize: a
  stream saves its receivers' snapshots at every micro-batch.)
- A receiver with a reorder window (``reorder_window`` W > 1) has
  ``"windows"``: ``[conns, [[floor, s_1, ..., s_k], ...]]``, the connections sorted
  (version 1: ``[conn, window]`` pairs), and ``"held"``, the timestamps they hold;
  with W = 1 ``"windows"`` is ``None``. Restoring checks that the snapshot and the
  receiver agree on having a window (W itself is configuration).

Round trip, pinned by ``tests/test_stream_snapshot.py``: ``receiver_snapshot(
restore_receiver(fresh, receiver_snapshot(r))) == receiver_snapshot(r)``, and the
restored receiver answers every later input exactly as ``r`` does.
"""

from __future__ import annotations

import heapq
from typing import Any

from timebound.core.atmostonce._classes import ClassifiedReceiver
from timebound.core.atmostonce._estimators import (
    Estimator,
    Fixed,
    LimitedHorizon,
    UnlimitedHorizon,
)
from timebound.core.atmostonce._events import StableRecord
from timebound.core.atmostonce._receiver import MemoryStorage, Receiver, StableLatest
from timebound.errors import ProtocolUsageError

#: Bumped when the snapshot's layout changes; ``restore`` reads this one and those of
#: ``READABLE_VERSIONS``, and refuses any other.
SNAPSHOT_VERSION = 2
READABLE_VERSIONS = (1, 2)

Snapshot = dict[str, Any]


def _time(value: int | float | None) -> int | None:
    """A timer as data: ``None`` when it is not armed."""
    if value is None or value in (float("inf"), float("-inf")):
        return None
    return int(value)


def _untime(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


def _estimator_kind(estimator: Estimator) -> str:
    if isinstance(estimator, Fixed):
        return "fixed"
    if isinstance(estimator, UnlimitedHorizon):
        return "unlimited"
    if isinstance(estimator, LimitedHorizon):
        return "limited"
    raise ProtocolUsageError(f"no snapshot for estimator {estimator!r}")


def estimator_snapshot(estimator: Estimator) -> Snapshot:
    """The estimator's state (estimate, ``p``, counters, the period's lifetimes)."""
    kind = _estimator_kind(estimator)
    data: Snapshot = {"kind": kind, "estimate": estimator.estimate, "p": estimator.p}
    if isinstance(estimator, UnlimitedHorizon):
        data.update(numacc=estimator.numacc, numrej=estimator.numrej, max=estimator._max)
    elif isinstance(estimator, LimitedHorizon):
        data.update(numacc=estimator.numacc, numrej=estimator.numrej,
                    top=sorted(estimator._top), count=estimator._count_in_period)
    return data


def restore_estimator(estimator: Estimator, data: Snapshot) -> None:
    """Load ``estimator_snapshot`` data into an estimator of the same kind."""
    kind = _estimator_kind(estimator)
    if data.get("kind") != kind:
        raise ProtocolUsageError(
            f"snapshot of a {data.get('kind')!r} estimator restored into a {kind!r} one")
    estimator.estimate = int(data["estimate"])
    estimator.p = int(data["p"])
    if isinstance(estimator, UnlimitedHorizon):
        estimator.numacc = int(data["numacc"])
        estimator.numrej = int(data["numrej"])
        estimator._max = int(data["max"])
    elif isinstance(estimator, LimitedHorizon):
        estimator.numacc = int(data["numacc"])
        estimator.numrej = int(data["numrej"])
        top = [int(x) for x in data["top"]]
        heapq.heapify(top)
        estimator._top = top
        estimator._count_in_period = int(data["count"])


def receiver_snapshot(receiver: Receiver) -> Snapshot:
    """The receiver's whole state as JSON-able data (module docstring)."""
    if receiver._wanted is not None or receiver._in_flight is not None:
        raise ProtocolUsageError("snapshot of a receiver with a deferred write pending")
    counts = receiver._counts
    windows: dict[str, list[int]] | None = getattr(receiver, "_windows", None)
    table = receiver._table
    conns = sorted(table)
    held = None if windows is None else sorted(windows)
    data: Snapshot = {
        "version": SNAPSHOT_VERSION,
        "table": [conns, [table[conn] for conn in conns]],
        "windows": None if windows is None or held is None else
        [held, [list(windows[conn]) for conn in held]],
        "held": getattr(receiver, "_held", 0),
        "upper": receiver.upper,
        "down": receiver._down,
        "recover_at": _time(receiver._recover_at),
        "refuse_until": _time(receiver._refuse_until),
        "no_evict_until": _time(receiver._no_evict_until),
        "next_gc": _time(receiver._next_gc),
        "next_refresh": _time(receiver._next_refresh),
        "latest": _time(receiver._latest),
        "counts": [receiver._accepted, receiver._duplicates, receiver._stale,
                   *(counts[verdict] for verdict in sorted(counts, key=lambda v: v.value))],
        "gcs": receiver.gcs,
        "evicted": receiver.evicted,
        "estimator": estimator_snapshot(receiver.estimator),
        "stable": None,
    }
    resilience = receiver.resilience
    if isinstance(resilience, StableLatest) and isinstance(resilience.storage, MemoryStorage):
        record = resilience.storage.record
        if record is not None:
            data["stable"] = [record.latest, record.estimate, record.p]
    return data


def _pairs(data: Any, version: object) -> Any:
    """(conn, value) pairs of a table or windows: two lists (version 2) or pairs (1)."""
    if version == 1:
        return data
    conns, values = data
    if len(conns) != len(values):
        raise ProtocolUsageError("receiver snapshot: a table's two lists differ in length")
    return zip(conns, values)


def restore_receiver(receiver: Receiver, data: Snapshot) -> Receiver:
    """Load ``receiver_snapshot`` data into ``receiver`` (built from the same
    configuration as the one snapshotted); returns it."""
    version = data.get("version")
    if version not in READABLE_VERSIONS:
        raise ProtocolUsageError(
            f"receiver snapshot version {version!r}, expected {SNAPSHOT_VERSION}")
    restore_estimator(receiver.estimator, data["estimator"])
    table = {str(conn): int(ts) for conn, ts in _pairs(data["table"], version)}
    receiver._table = table
    expiry = [(ts, conn) for conn, ts in table.items()]
    heapq.heapify(expiry)
    receiver._expiry = expiry
    receiver._stored = {}  # nothing stored above the table survives a snapshot
    receiver.set_entry_bytes(receiver.entry_bytes)  # the bytes of the loaded table
    windows = data["windows"]
    if (windows is None) != (getattr(receiver, "_windows", None) is None):
        raise ProtocolUsageError("snapshot and receiver disagree on the reorder window")
    if windows is not None:
        receiver._windows = {str(conn): [int(x) for x in window]
                             for conn, window in _pairs(windows, version)}
        receiver._held = int(data["held"])
    receiver.upper = int(data["upper"])
    receiver._down = bool(data["down"])
    receiver._recover_at = _untime(data["recover_at"])
    receiver._refuse_until = _untime(data["refuse_until"])
    receiver._no_evict_until = _untime(data["no_evict_until"])
    receiver._next_gc = _untime(data["next_gc"])
    receiver._next_refresh = _untime(data["next_refresh"])
    receiver._latest = _untime(data["latest"])
    receiver._promised = receiver._latest
    accepted, duplicates, stale, *rare = (int(x) for x in data["counts"])
    receiver._accepted, receiver._duplicates, receiver._stale = accepted, duplicates, stale
    order = sorted(receiver._counts, key=lambda v: v.value)
    if len(rare) != len(order):
        raise ProtocolUsageError("receiver snapshot: wrong number of counters")
    receiver._counts = dict(zip(order, rare))
    receiver.gcs = int(data["gcs"])
    receiver.evicted = int(data["evicted"])
    resilience = receiver.resilience
    stable = data["stable"]
    if isinstance(resilience, StableLatest) and isinstance(resilience.storage, MemoryStorage):
        resilience.storage.record = None if stable is None else StableRecord(
            latest=int(stable[0]), estimate=int(stable[1]), p=int(stable[2]))
    receiver._update_due()
    return receiver


def classified_snapshot(node: ClassifiedReceiver) -> Snapshot:
    """Every class's receiver, in class order (the classifier is configuration)."""
    return {"version": SNAPSHOT_VERSION,
            "receivers": [receiver_snapshot(receiver) for receiver in node.receivers]}


def restore_classified(node: ClassifiedReceiver, data: Snapshot) -> ClassifiedReceiver:
    """Load ``classified_snapshot`` data into a node with as many classes."""
    states = data["receivers"]
    if len(states) != len(node.receivers):
        raise ProtocolUsageError(
            f"snapshot of {len(states)} classes restored into {len(node.receivers)}")
    for receiver, state in zip(node.receivers, states):
        restore_receiver(receiver, state)
    return node
