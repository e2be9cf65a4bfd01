"""The connection table of the at-most-once receiver (SCMP Fig. 2-1's ``CT`` and
``upper``; capacity, section 3.1; the reorder window): ``ConnectionTable``,
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
(``_evict``).

Bounds: entries and bytes, and forgetting early
-----------------------------------------------
``capacity`` bounds the entries, ``max_bytes`` the bytes: an entry is counted as
``entry_bytes + len(conn)`` (an estimate of what the table and the protocol above
keep per connection, the id's text apart) plus the bytes the protocol above stores
for it and declares with ``store_bytes`` (the RPC's stored reply). A new connection
that does not fit (``_fits``) first forces an ordinary eviction pass at ``now``
(``_evict``: the expired entries); if that is not enough, the table *forgets the
oldest connections early* (``_force``): SCMP section 2.4's GC run ahead of time,
which is safe at any moment because it only raises ``upper`` (to each forgotten
``CT[c]``, the largest timestamp ``c`` holds), so it can only make a late copy of a
forgotten connection ``STALE``. Oldest means smallest ``CT[c]``: the expiry heap
already orders the entries so (a key below its entry's timestamp is refreshed when it
surfaces, so entries leave in exactly the order of their current timestamps), and
the oldest entry is the one ordinary GC would forget first; forgetting it raises
``upper`` the least. An entry the protocol above cannot give up (``evictable(conn,
now)`` is False: an RPC call still computing, whose reply would be lost) is skipped
and stays; only when no entry can go is the connection refused (``FULL``, the
receiver's verdict). ``store_bytes`` makes room the same way and, if even that is not
enough, forgets the charged connection itself (it returns False: the protocol above
keeps nothing for it). So the table never holds more than ``capacity`` entries nor
more than ``max_bytes`` bytes: a new entry is admitted only if it fits, and a charge
that does not fit is undone with its entry, which leaves less than before it. Cost of
a forced pass: the entries it forgets plus the kept ones older than them, each a heap
operation (so with many pinned entries at the old end of the heap, each pass pays
for them again; the RPC pins only calls still computing).

Reorder window (beyond the paper)
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
``upper`` to ``s_k >= floor``, the largest timestamp it held, whenever it happens
(expired GC, or early at a full table: ``_forget`` is the one path for both, so
nothing in the argument depends on *when* an entry is forgotten); a crash empties
the table and recovery sets ``upper = latest``, which bounds every timestamp accepted
before the crash (SCMP 2.3, unchanged). Nothing else removes a timestamp or lowers a
floor. No duplicate: a copy of an accepted ``(c, ts)`` finds, by (I), either ``c`` in
the table with ``ts`` in the set (found: refused) or ``ts <= floor`` (refused), or
``c`` absent with ``ts <= upper`` (``STALE``). Clocks, estimates, classes, crashes
and floods enter only through ``upper`` and GC, exactly as in the paper's argument.
With W = 1 the window is always full and the bound is ``s_1 = CT[conn]``: Fig. 2-1
decision for decision.

Incarnation marks (``_receiver``: a marked message of an unknown connection is
decided against ``upper_marked``). Invariant (M), within one incarnation I: for every connection ``c`` not in the table,
every timestamp accepted on ``c`` *during I* is ``<= upper_marked``. It holds when I
begins (the table is empty and nothing was accepted during I); accepting during I puts
``c`` in the table; forgetting ``c`` raises ``upper_marked`` to ``s_k``, the largest
timestamp accepted on ``c`` (by (I), ``s_k`` bounds everything accepted on ``c``). No
duplicate, with (I) (this module) for the rest: a marked copy of ``(c, ts)`` finds
``c`` in the table (decided by the entry, as any message), or ``c`` absent: if ``(c, ts)`` was
accepted during I, ``ts <= upper_marked`` (refused ``STALE``); it cannot have been
accepted during an earlier incarnation, because it was made after I began and every
earlier incarnation had ended by then (a connection's timestamps only grow, so the
pair is not an older message's either). The caller must therefore mark only what was
made after I began: a mark of an older incarnation is not a mark (``marked=False``),
and a forged mark is outside the guarantee (the RPC authenticates it with the key).
With a reorder window (W > 1) the entry a marked message creates gets ``floor =
max(upper_marked, min(upper, ts - 1))``, not ``upper_marked``: what was accepted on
the connection during I is at or below ``upper_marked``, what an earlier incarnation
accepted on it is at or below ``upper`` and below ``ts`` (made before it), so (I)
holds, while an old unmarked copy between ``upper_marked`` and ``ts`` is refused
rather than admitted as reordered (the property found that duplicate with the floor
at ``upper_marked``).

Accounting: ``entries`` counts remembered timestamps (one per connection when W = 1,
``k`` per connection otherwise) and so do capacity, ``high_water`` and the size
columns; a window that would grow a full table (capacity) drops its smallest into
its floor instead, which is always safe. Bytes are counted per connection (a
window's extra timestamps are bounded by the entry count, not by ``max_bytes``).
Tests: ``tests/test_atmostonce_reorder.py``; the bounds and early forgetting:
``tests/test_atmostonce_capacity.py``.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from heapq import heapify, heappop, heappush

from timebound.core.atmostonce._estimators import Estimator
from timebound.errors import ProtocolUsageError

#: ``entry_bytes`` of a bare receiver: a table slot, a heap item and the timestamp
#: (CPython 3.11, 64-bit: about 130 bytes a connection, the id's text apart).
TABLE_ENTRY_BYTES = 160


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
    #: May this entry be forgotten before it expires (the table is full)? False
    #: keeps it; True means the protocol above has dropped its state for it.
    evictable: Callable[[str, int], bool] | None
    #: The byte bound (None: none) and the estimate of one entry's bytes, its id's
    #: text apart (module docstring, "Bounds").
    max_bytes: int | None
    entry_bytes: int
    _bounded: bool
    _capacity: int
    _max_bytes: int
    #: Bytes counted: sum over entries of entry_bytes + len(conn) + stored bytes.
    _bytes: int
    #: The stored bytes ``store_bytes`` declared, per connection (none: absent).
    _stored: dict[str, int]
    evicted: int
    #: Entries forgotten early (``_force``), part of ``evicted``.
    forced: int

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

    @property
    def bytes_used(self) -> int:
        """Bytes counted for the table (module docstring, "Bounds")."""
        return self._bytes

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

    def _clear_table(self) -> None:
        """Forget everything (a crash): ``upper`` is the caller's business."""
        self._table = {}
        self._expiry = []
        self._stored = {}
        self._bytes = 0
        if self._windows is not None:
            self._windows = {}
            self._held = 0

    def set_entry_bytes(self, entry_bytes: int) -> None:
        """Count each entry as ``entry_bytes`` plus its id's text from now on (the
        protocol above installs its own estimate, ``core.rpc.Server``)."""
        if entry_bytes < 0:
            raise ProtocolUsageError(f"entry_bytes must be >= 0, got {entry_bytes}")
        self.entry_bytes = entry_bytes
        self._bytes = sum(entry_bytes + len(conn) for conn in self._table) + sum(
            self._stored.values())

    def _fits(self, entries: int, nbytes: int) -> bool:
        """Whether ``entries`` more entries and ``nbytes`` more bytes fit."""
        return (self.entries + entries <= self._capacity
                and self._bytes + nbytes <= self._max_bytes)

    def store_bytes(self, conn: str, nbytes: int, *, now: int) -> bool:
        """Count ``nbytes`` stored by the protocol above for ``conn``'s entry (in
        place of what it declared before; 0: nothing). Over ``max_bytes``, the
        oldest evictable entries are forgotten early, and if that is not enough,
        ``conn`` itself. Returns whether ``conn`` is still in the table (False: the
        protocol above must drop what it stored for it)."""
        ts = self._table.get(conn)
        if ts is None:
            raise ProtocolUsageError(f"store_bytes for {conn!r}, which is not in the table")
        if nbytes < 0:
            raise ProtocolUsageError(f"nbytes must be >= 0, got {nbytes}")
        stored = self._stored
        self._bytes += nbytes - stored.pop(conn, 0)
        if nbytes:
            stored[conn] = nbytes
        if self._bytes <= self._max_bytes:
            return True
        self._force(now, 0, 0)
        if self._bytes <= self._max_bytes:
            return conn in self._table
        ts = self._table.get(conn)
        if ts is not None:
            # Every entry that may go is gone and ``evictable`` keeps ``conn``: it
            # goes all the same (the caller asked to store what does not fit). Its
            # heap item comes out with it (a scan: this is the last resort).
            expiry = self._expiry
            for i, item in enumerate(expiry):
                if item[1] == conn:
                    expiry[i] = expiry[-1]
                    expiry.pop()
                    heapify(expiry)
                    break
            self._forget(conn, ts)
            self.forced += 1
        return False

    def _forget(self, conn: str, ts: int) -> None:
        """Remove ``conn`` (its ``CT`` is ``ts``) and raise ``upper`` (and
        ``upper_marked``) to ``ts``, the largest timestamp it holds: the one way an
        entry leaves the table but a crash, so (I) and (M) hold however early it
        happens. The caller has taken its heap item out."""
        del self._table[conn]
        if self._windows is not None:
            self._held -= len(self._windows.pop(conn)) - 1
        self._bytes -= self.entry_bytes + len(conn) + self._stored.pop(conn, 0)
        if ts > self.upper:
            self.upper = ts
        if ts > self.upper_marked:
            self.upper_marked = ts
        self.evicted += 1

    def _force(self, now: int, entries: int, nbytes: int) -> None:
        """Forget the oldest entries (smallest ``CT``) that ``evictable`` lets go
        until ``entries`` more entries and ``nbytes`` more bytes fit, or none is
        left to forget (module docstring, "Bounds")."""
        table = self._table
        expiry = self._expiry
        evictable = self.evictable
        kept: list[tuple[int, str]] = []
        while expiry and not self._fits(entries, nbytes):
            key, conn = heappop(expiry)
            ts = table[conn]
            if ts > key:
                heappush(expiry, (ts, conn))  # surfaced below its timestamp: re-keyed
                continue
            if evictable is not None and not evictable(conn, now):
                kept.append((ts, conn))
                continue
            self._forget(conn, ts)
            self.forced += 1
        for item in kept:
            heappush(expiry, item)

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
        retain = self.retain
        kept: list[tuple[int, str]] = []
        removed = 0
        while expiry and expiry[0][0] <= threshold:
            conn = heappop(expiry)[1]
            ts = table[conn]
            if ts > threshold:
                heappush(expiry, (ts, conn))
                continue
            if retain is not None and retain(conn, now):
                kept.append((ts, conn))
                continue
            self._forget(conn, ts)
            removed += 1
        for item in kept:
            heappush(expiry, item)
        return removed

    def _make_room(self, conn: str, now: int) -> bool:
        """Room for a new entry ``conn`` at a table that has none: the expired
        entries go first (``_evict``), then, if needed, the oldest early
        (``_force``). False: nothing more may go (``FULL``)."""
        need = self.entry_bytes + len(conn)
        self._evict(now)
        if not self._fits(1, need):
            self._force(now, 1, need)
        return self._fits(1, need)
