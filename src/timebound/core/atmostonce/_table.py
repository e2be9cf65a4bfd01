"""The connection table of the at-most-once receiver (SCMP Fig. 2-1's ``CT`` and
``upper``; capacity, section 3.1; the reorder window, issue 16): ``ConnectionTable``,
the part of ``Receiver`` (``_receiver``) that remembers, forgets and bounds.

Theory of operation
-------------------
The table maps a connection id to the timestamp of the last message accepted on it;
one number ``upper`` bounds every timestamp it has forgotten. Garbage collection at
time ``t`` forgets every entry with ``CT[c] <= t - estimate`` and raises ``upper``
to the largest forgotten timestamp (``_evict``); ``Receiver`` decides messages
against it and says when GC runs (timers, estimator, resilience: see there). The
bound of each connection never decreases (adaptive Lemma 1), so no duplicate and no
out-of-order message is ever accepted, whatever the estimate is. Eviction never
scans the table: a heap holds each entry once, keyed at or below its timestamp
(``_evict``). With a capacity, a new connection at a full table forces an eviction
pass (``_make_room``); the table never exceeds it.

Reorder window (beyond the paper; issue 16)
-------------------------------------------
Fig. 2-1 refuses every message whose timestamp is not above its connection's last
accepted one, so a genuine message overtaken by a later one on the same connection is
lost (``DUPLICATE``, a table rejection). With ``reorder_window = W`` (default 1: the
figures exactly, on the unchanged code path; no window state exists) a connection
remembers up to W accepted timestamps above a *floor*: its table entry is
``[floor, s_1 < ... < s_k]`` (``1 <= k <= W``, ``floor < s_1``, ``s_k = CT[conn]``,
the value every other part of the receiver sees). A message on a known connection is
accepted iff ``ts`` is above the floor and not among ``s_1..s_k``; accepting inserts
it, and when that makes k exceed W the smallest remembered timestamp is dropped and
becomes the floor (a message below ``s_1`` arriving at a full window is itself that
smallest: accepted, it becomes the floor). So ``duplicate`` on a known connection means
``ts`` is one of ``s_1..s_k`` (a copy) or at or below the floor (the receiver cannot
tell): a timestamp the receiver can tell it never accepted is never refused.
A connection enters the table with ``floor = upper`` (the bound Fig. 2-1 applies to an
unknown connection) and ``s_1 = ts``. GC forgets a whole connection exactly when
Fig. 2-1 would (``s_k <= now - estimate``) and raises ``upper`` to ``s_k``.

Invariant (I): for every connection ``c`` in the table, every timestamp ever accepted
on ``c`` is one of ``s_1..s_k`` or ``<= floor``; for every connection not in the
table, every timestamp ever accepted on it is ``<= upper`` (and, resilient, ``<=``
the ``upper`` set at recovery for anything accepted before a crash). It holds
initially (empty table). Accepting on a known connection adds ``ts`` to the set;
dropping the smallest ``m`` into the floor keeps it (``floor < m``, so everything
``<= floor`` is ``<= m``); a new entry starts with ``floor = upper``, which bounds
everything accepted on ``c`` before (I for an absent ``c``); forgetting ``c`` raises
``upper`` to ``s_k >= floor``, the largest timestamp it held; a crash empties the
table and recovery sets ``upper = latest``, which bounds every timestamp accepted
before the crash (SCMP 2.3, unchanged). Nothing else removes a timestamp or lowers a
floor. No duplicate: a copy of an accepted ``(c, ts)`` finds, by (I), either ``c`` in
the table with ``ts`` in the set (found: refused) or ``ts <= floor`` (refused), or
``c`` absent with ``ts <= upper`` (``STALE``). Clocks, estimates, classes and crashes enter only through ``upper`` and
GC, exactly as in the paper's argument. With W = 1 the window is always full and
the bound is ``s_1 = CT[conn]``: Fig. 2-1 decision for decision.

Accounting: ``entries`` counts remembered timestamps (one per connection when W = 1,
``k`` per connection otherwise) and so do capacity, ``high_water`` and the size
columns; a window that would grow a full table (capacity) drops its smallest into
its floor instead, which is always safe. Tests: ``tests/test_atmostonce_reorder.py``.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from heapq import heappop, heappush

from timebound.core.atmostonce._estimators import Estimator


class ConnectionTable:
    """The table, its bound ``upper`` (and ``upper_marked``: ``_receiver``'s
    incarnation-marked messages) and the reorder windows, with the queries and the
    eviction over them. Only ``Receiver`` makes one: its constructor sets every
    attribute declared here."""

    #: The reorder window W, and with W > 1 its state: conn -> [floor, s_1 < ... <
    #: s_k] and the number of timestamps all windows hold (module docstring). Class
    #: defaults for W = 1 (no window: Fig. 2-1's table alone).
    reorder_window: int = 1
    _windows: dict[str, list[int]] | None = None
    _held: int = 0
    _table: dict[str, int]
    #: Each table entry once, keyed at or below its timestamp (see _evict).
    _expiry: list[tuple[int, str]]
    upper: int
    #: The bound of unknown connections for marked messages (``_receiver``).
    upper_marked: int
    estimator: Estimator
    capacity: int | None
    retain: Callable[[str, int], bool] | None
    _bounded: bool
    _capacity: int
    evicted: int

    @property
    def entries(self) -> int:
        """Timestamps the table remembers (one per connection when W = 1)."""
        if self._windows is None:
            return len(self._table)
        return self._held

    @property
    def connections(self) -> int:
        """Connections in the table."""
        return len(self._table)

    def lookup(self, conn: str) -> int | None:
        """The table's timestamp for ``conn``, or None if it is not in the table."""
        return self._table.get(conn)

    def _admit(self, conn: str, ts: int) -> bool:
        """Reorder window, ``ts <= CT[conn]``: accept (and remember) ``ts`` iff it is
        above the floor and not remembered (module docstring)."""
        assert self._windows is not None
        window = self._windows[conn]
        if ts <= window[0]:
            return False
        i = bisect_left(window, ts)
        if window[i] == ts:  # i < len(window): ts <= CT[conn] = window[-1]
            return False
        window.insert(i, ts)
        if len(window) > self.reorder_window + 1 or (self._bounded and self._held >= self._capacity):
            del window[0]  # the smallest remembered timestamp becomes the floor
        else:
            self._held += 1
        return True

    def _slide(self, conn: str, ts: int) -> None:
        """Reorder window, ``ts > CT[conn]`` (accepted): remember ``ts``."""
        assert self._windows is not None
        window = self._windows[conn]
        window.append(ts)
        if len(window) > self.reorder_window + 1 or (
                self._bounded and self._held >= self._capacity):
            del window[0]
        else:
            self._held += 1

    def _clear_windows(self) -> None:
        if self._windows is not None:
            self._windows = {}
            self._held = 0

    def _evict(self, now: int) -> int:
        """Forget every entry with ``CT[c] <= now - estimate`` (unless retained)
        and raise ``upper`` to the largest forgotten timestamp.

        ``_expiry`` is a heap holding each table entry once, keyed by a timestamp
        at or below the entry's current one (the key is set when the connection
        enters the table and refreshed only here, so accepting on a known
        connection costs no heap work). Every entry due for eviction therefore has
        its key at or below the threshold; an entry surfacing with a newer current
        timestamp is pushed back under that one. Cost: the surfacing items only,
        never a scan of the table.
        """
        threshold = now - self.estimator.estimate
        table = self._table
        expiry = self._expiry
        windows = self._windows
        upper = self.upper
        upper_marked = self.upper_marked
        kept: list[tuple[int, str]] = []
        removed = 0
        while expiry and expiry[0][0] <= threshold:
            conn = heappop(expiry)[1]
            ts = table[conn]
            if ts > threshold:
                heappush(expiry, (ts, conn))
                continue
            if self.retain is not None and self.retain(conn, now):
                kept.append((ts, conn))
                continue
            del table[conn]
            if windows is not None:
                self._held -= len(windows.pop(conn)) - 1
            removed += 1
            if ts > upper:
                upper = ts
            if ts > upper_marked:
                upper_marked = ts
        for item in kept:
            heappush(expiry, item)
        self.upper = upper
        self.upper_marked = upper_marked
        self.evicted += removed
        return removed

    def _make_room(self, now: int) -> bool:
        self._evict(now)
        return self.entries < self._capacity
