"""The at-most-once receiver: SCMP Figs. 2-1 and 2-2, adaptive paper Figs. 1-3.

Theory of operation
-------------------
A receiver keeps a *connection table* ``CT`` (connection id -> timestamp of the last
message accepted on it) and one number ``upper`` bounding every timestamp it has
forgotten. A message ``(conn, ts)`` is accepted iff ``ts`` is above the connection's
bound: ``CT[conn]`` if the connection is in the table, ``upper`` otherwise. Garbage
collection at time ``t`` forgets every entry with ``CT[c] <= t - estimate`` and raises
``upper`` to the largest forgotten timestamp. The bound of each connection never
decreases (adaptive Lemma 1), so no duplicate and no out-of-order message is ever
accepted, whatever the clocks do and whatever the estimate is (SCMP 2.3, adaptive
Theorem 2). Clocks only decide how often a late non-duplicate is refused (``STALE``).

A *resilient* receiver (Fig. 2-2) also refuses ``ts > latest`` (``EARLY``), where
``latest`` is on stable storage and only ever grows; every ``latest_every`` ticks it
writes ``latest = max(latest, now + beta)``. After a crash the table and ``upper`` are
gone; recovery sets ``upper = latest`` (everything accepted before the crash was at or
below it) and writes a new ``latest = max(latest, now + beta)``. The alternative of
section 2.2 for a monotonic clock needs no storage: ``EARLY`` when
``ts > now + epsilon``, and after a restart everything is refused for ``epsilon``
(``RECOVERING``), then ``upper = now``.

Time and timers (sans-IO, after aioquic)
----------------------------------------
Time is an integer ``now`` in ticks passed to every call; the receiver never reads a
clock. Periodic work happens at absolute multiples of its period (``k * gc_every``,
``k * latest_every``, k >= 1), scheduled as the next multiple, so an idle gap of any
length costs O(1): consecutive garbage collections with no message between them are
equivalent to the first one (which consumes the period's lifetimes) followed by the
last one (an update with no lifetimes changes no estimator), and consecutive
``latest`` refreshes to the last one (``latest`` is a running maximum). Every call
first fires what is due at or before ``now`` (``handle_timer``): at one instant,
recovery, then the ``latest`` refresh, then GC. Nothing fires while the receiver is
down. A crash may carry its duration (``down``), in which case recovery is itself a
timer. ``next_deadline()`` tells a driver when to call ``handle_timer`` again. A
timer that will never fire is ``None`` (integer time has no infinity).

Deferred writes (beyond the figures; for drivers with an event loop)
--------------------------------------------------------------------
Fig. 2-2 writes ``latest`` and only then uses it, so a driver whose storage is a
file fsyncs on its hot path. With ``StableLatest(deferred=True)`` the periodic
refreshes (and the estimator's updates) are not written by the receiver: each one
becomes the *wanted* record, ``take_write()`` hands the wanted record to the driver
(one write in flight at a time; a newer wanted record replaces an older one not yet
handed out; ``write_wanted``, when a driver sets it, is told), and
``write_done(record)`` reports it durable. ``EARLY`` is decided
against the last *durable* ``latest`` only, so everything accepted is at or below a
value on stable storage, exactly the invariant of SCMP 2.3: a crash at any moment,
with any write in flight, recovers ``upper`` from storage above every accepted
timestamp. Every record handed out carries the largest ``latest`` ever promised, so
storage never goes backwards whatever order writes land in. The writes at creation
and at recovery stay synchronous (they happen before the receiver serves), and a
recovery with a write still in flight is a usage error: the driver must first learn
whether it landed (a real crash ends the process, and its write, first).
Tests: ``tests/test_atmostonce_deferred.py``.

Verbs (aioquic's): ``receive(conn, ts, *, now)``, ``handle_timer(*, now)``,
``crash(*, now, down=None)``, ``restart(*, now)``, ``next_deadline()``,
``statistics()``; for the protocol above, ``store_bytes(conn, nbytes, *, now)``.

Choices where the papers leave room
-----------------------------------
- The receiver is created at ``start`` (default 0) with an empty table and
  ``upper = 0`` (Fig. 2-1 says ``min(0, time - rho)``; with timestamps >= 1 the two
  agree). A resilient receiver whose storage already holds a record starts as a
  recovery from it (the process restarted); an empty storage gets ``start + beta``.
- The limited-horizon GC runs right after the message that brings the period's
  S-th lifetime, at that message's time (the figure: "when ltimes has exactly S
  entries"); it has no timer.
- Lifetimes are recorded for ``ACCEPTED``, ``DUPLICATE`` and ``STALE`` messages (the
  figure records every received message; ``EARLY``, ``DOWN``, ``RECOVERING`` and
  ``FULL`` messages were refused before the skeleton ran).
- Capacity (section 3.1: "we do not remove connection table entries unless the table
  is almost full"): with ``capacity`` set, a periodic GC evicts expired entries only
  while the table holds at least ``high_water`` entries. ``max_bytes`` bounds the
  table's bytes too (``entry_bytes`` plus the id per entry, plus what the protocol
  above stores and declares with ``store_bytes``: ``_table``, "Bounds"). A new
  connection that does not fit forces an eviction pass at ``now`` (removal only, the
  estimator is left alone) and then, if every entry is still live, forgets the
  oldest ones early (smallest ``CT``), raising ``upper`` over them as any GC does: a
  flood of new connections cannot lock new callers out for rho, it only makes late
  copies of the forgotten connections ``STALE``. Entries ``evictable`` keeps (an RPC
  call still computing) stay; only when no entry may go is the message refused
  with ``FULL``. The table never exceeds ``capacity`` nor ``max_bytes``; forgetting
  early and refusing are both always safe for at-most-once. The price: ``upper``
  rises towards the timestamps of the connections forgotten, so a caller whose
  timestamp is below them (a clock behind, or an attacker stamping its flood ahead,
  up to ``latest``) is refused ``STALE`` until its clock passes them. Neither the
  forced pass nor forgetting early waits for ``recovery_grace`` (below): a full
  table has no better choice, and the guarantee does not depend on the grace.
  Tests: ``tests/test_atmostonce_receiver.py::test_capacity_*``,
  ``tests/test_atmostonce_capacity.py`` (properties: no duplicate under floods with
  crashes, classes and clocks; both bounds always hold).
- ``recovery_grace`` (default 0, as in the figures and the replay contract): after a
  recovery at T, periodic GC evicts nothing before T + grace. Section 2.4: "it is
  necessary to avoid removing entries from the table until sufficient time has
  passed to process all pending messages", else ``upper`` rises above retransmissions
  still in flight. Test: ``test_recovery_grace_keeps_pending_retransmissions``.
- ``retain(conn, now)``, when given, can keep an expired entry a while longer (a
  higher protocol's entry still in use, e.g. an RPC call still computing, Fig. 3-1).
  Keeping an entry longer never weakens the guarantee; it only delays ``upper``.
  ``evictable(conn, now)``, when given, says whether an entry may be forgotten
  early at a full table (False keeps it; True: the protocol above dropped its state
  for it); without it every entry may. A full table does not ask ``retain``: its
  entries are live by definition.

Reorder window (beyond the paper)
---------------------------------
With ``reorder_window = W > 1`` a connection remembers up to W accepted timestamps
above a floor, so a genuine message overtaken on its connection is still accepted
once (``_receive_windowed``); the window's rule, its invariant (I) and its
accounting are the connection table's (``_table``). W = 1 is Fig. 2-1 exactly.

Incarnation-marked messages (beyond the paper)
----------------------------------------------
After a crash, recovery sets ``upper = latest`` and every message stamped at or below
it is refused, for about crash + beta: the paper's outage. But a message *made after
this incarnation began* was never seen by an earlier one. ``receive(..., marked=True)``
is the caller's statement of exactly that (the RPC layer says it when a CALL carries
the id of the current incarnation, which a client learns only from this incarnation's
answers); the receiver then decides an unknown connection against a separate bound
``upper_marked`` instead of ``upper``. ``upper_marked`` is 0 at creation and at each
recovery (an incarnation begins: nothing marked for it exists yet) and every
forgetting (GC, or early at a full table) raises it with ``upper``, to the timestamp
forgotten. A known connection, ``EARLY``,
``DOWN``, ``RECOVERING`` and ``FULL`` are decided as for any message. With
``marked=False`` (the default, every replay and simulator path) nothing changes: the
code compares against ``upper`` exactly as before.

Invariant (M) and why a marked message is never a duplicate: ``_table`` (beside (I)).
Tests: ``tests/test_atmostonce_marked.py`` (properties over crashes, GC, reordering,
clocks stepped back and re-sent frames of older incarnations; each fails with its
rule removed).
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappush
from typing import Final

from timebound.core.atmostonce._estimators import Estimator
from timebound.core.atmostonce._events import ReceiverStatistics, StableRecord, Verdict
from timebound.core.atmostonce._resilience import (
    MemoryStorage,
    MonotonicClock,
    Resilience,
    StableLatest,
    StableStorage,
)
from timebound.core.atmostonce._table import TABLE_ENTRY_BYTES, ConnectionTable
from timebound.errors import ProtocolUsageError

__all__ = ["MemoryStorage", "MonotonicClock", "Receiver", "Resilience", "StableLatest",
           "StableStorage"]

_ACCEPTED: Final = Verdict.ACCEPTED
_DUPLICATE: Final = Verdict.DUPLICATE
_STALE: Final = Verdict.STALE
_EARLY: Final = Verdict.EARLY
_DOWN: Final = Verdict.DOWN
_RECOVERING: Final = Verdict.RECOVERING
_FULL: Final = Verdict.FULL
#: The bound of an unbounded count (``capacity`` or ``max_bytes`` None).
_UNBOUNDED: Final = 1 << 62


class Receiver(ConnectionTable):
    """One at-most-once receiver (one server, or one class of a server): the
    connection table (``ConnectionTable``) with the figures' decisions, timers and
    resilience."""

    #: Deferred writes: called with the receiver when a record becomes wanted and no
    #: write is in flight, so a driver need not poll ``take_write`` (set by drivers).
    write_wanted: Callable[[Receiver], None] | None = None

    def __init__(
        self,
        estimator: Estimator,
        *,
        gc_every: int | None = None,
        resilience: Resilience | None = None,
        capacity: int | None = None,
        high_water: int | None = None,
        start: int = 0,
        retain: Callable[[str, int], bool] | None = None,
        recovery_grace: int = 0,
        reorder_window: int = 1,
        max_bytes: int | None = None,
        entry_bytes: int = TABLE_ENTRY_BYTES,
        evictable: Callable[[str, int], bool] | None = None,
    ) -> None:
        if reorder_window < 1:
            raise ProtocolUsageError(f"reorder_window must be >= 1, got {reorder_window}")
        if estimator.gc_by_count:
            if gc_every is not None:
                raise ProtocolUsageError("a count-triggered estimator takes no gc_every")
        elif gc_every is None or gc_every < 1:
            raise ProtocolUsageError(f"gc_every must be >= 1, got {gc_every}")
        if capacity is not None:
            if capacity < 1:
                raise ProtocolUsageError(f"capacity must be >= 1, got {capacity}")
            if high_water is None:
                high_water = max(1, capacity - max(1, capacity // 10))
            if not 1 <= high_water <= capacity:
                raise ProtocolUsageError("high_water must be in [1, capacity]")
        if max_bytes is not None and max_bytes < 1:
            raise ProtocolUsageError(f"max_bytes must be >= 1, got {max_bytes}")
        if entry_bytes < 0:
            raise ProtocolUsageError(f"entry_bytes must be >= 0, got {entry_bytes}")
        self.estimator = estimator
        self.gc_every = gc_every
        self.resilience = resilience
        self.capacity = capacity
        self.high_water = high_water
        self.retain = retain
        self.evictable = evictable
        if recovery_grace < 0:
            raise ProtocolUsageError(f"recovery_grace must be >= 0, got {recovery_grace}")
        self.recovery_grace = recovery_grace
        self._no_evict_until: int | None = None
        self._table: dict[str, int] = {}
        if reorder_window > 1:
            # W = 1 keeps the class defaults: no instance attribute is added, so a
            # W = 1 receiver is laid out (and runs) exactly as without the window.
            self.reorder_window = reorder_window
            self._windows = {}
            self._held = 0
        self.upper = 0
        #: The bound of unknown connections for marked messages (module docstring).
        self.upper_marked = 0
        self.accepted_marked = 0
        self._down = False
        # Timers: an absolute tick, or None when the timer is not armed.
        self._recover_at: int | None = None
        self._refuse_until: int | None = None  # monotonic-clock recovery window
        self._next_gc: int | None = None
        self._next_refresh: int | None = None
        self._due: int | None = None
        # Hot-path verdict counters are plain attributes; the rare ones a dict.
        self._accepted = self._duplicates = self._stale = 0
        self._counts = dict.fromkeys((_DOWN, _RECOVERING, _EARLY, _FULL), 0)
        # Each table entry once, keyed at or below its timestamp (see _evict).
        self._expiry: list[tuple[int, str]] = []
        self._bounded = capacity is not None or max_bytes is not None
        self._capacity = _UNBOUNDED if capacity is None else capacity
        self.max_bytes = max_bytes
        self._max_bytes = _UNBOUNDED if max_bytes is None else max_bytes
        self.entry_bytes = entry_bytes
        self._bytes = 0
        self._stored: dict[str, int] = {}
        self.gcs = 0
        self.evicted = 0
        self.forced = 0
        self._latest: int | None = None  # None: no bound (not StableLatest)
        # Deferred writes: the largest latest put in any record, the record wanted
        # next and the one the driver is writing (module docstring).
        self._promised: int | None = None
        self._wanted: StableRecord | None = None
        self._in_flight: StableRecord | None = None
        self._tracks = estimator.observes
        # Only a resilient receiver can be down, recovering or see EARLY messages.
        self._guarded = resilience is not None
        # Monotonic-clock resilience: EARLY when ts > now + epsilon.
        self._slack: int | None = (
            resilience.epsilon if isinstance(resilience, MonotonicClock) else None
        )
        if isinstance(resilience, StableLatest):
            record = resilience.storage.read()
            if record is None:
                self._write_latest(start + resilience.beta, sync=True)
            else:
                self._recover(start)
                return
        self._schedule_from(start)

    # -- queries (the table's: ``ConnectionTable``) -------------------------

    @property
    def estimate(self) -> int:
        return self.estimator.estimate

    @property
    def latest(self) -> int | None:
        """The bound on acceptable timestamps; None when there is none."""
        if isinstance(self.resilience, StableLatest):
            return self._latest
        return None

    @property
    def down(self) -> bool:
        return self._down

    def next_deadline(self) -> int | None:
        """The next absolute time at which ``handle_timer`` has work, or None."""
        return self._due

    def statistics(self) -> ReceiverStatistics:
        counts = self._counts
        return ReceiverStatistics(
            entries=self.entries, upper=self.upper, latest=self.latest,
            estimate=self.estimator.estimate, down=self._down,
            accepted=self._accepted, duplicate=self._duplicates, stale=self._stale,
            early=counts[_EARLY], refused_down=counts[_DOWN],
            recovering=counts[_RECOVERING], full=counts[_FULL],
            gcs=self.gcs, evicted=self.evicted,
        )

    # -- deferred writes (module docstring) ----------------------------------

    def take_write(self) -> StableRecord | None:
        """The record the driver must now write durably and then report with
        ``write_done``; None when nothing is wanted or a write is in flight."""
        record = self._wanted
        if record is None or self._in_flight is not None:
            return None
        self._wanted = None
        self._in_flight = record
        return record

    def write_done(self, record: StableRecord) -> None:
        """``record`` (from ``take_write``) is durable: its ``latest`` is in force."""
        if record is not self._in_flight:
            raise ProtocolUsageError("write_done of a record that is not in flight")
        self._in_flight = None
        if not self._down and (self._latest is None or record.latest > self._latest):
            self._latest = record.latest

    def write_failed(self, record: StableRecord) -> None:
        """Writing ``record`` (from ``take_write``) failed: it is wanted again (or a
        newer record is), for the driver's next ``take_write``; nothing changed."""
        if record is not self._in_flight:
            raise ProtocolUsageError("write_failed of a record that is not in flight")
        self._in_flight = None
        if self._wanted is None and not self._down:
            self._wanted = record

    # -- inputs --------------------------------------------------------------

    def receive(self, conn: str, ts: int, *, now: int, marked: bool = False) -> Verdict:
        """Decide about message ``(conn, ts)`` arriving at receiver time ``now``;
        ``marked``: it was made after this incarnation began (module docstring)."""
        if self._windows is not None:
            return self._receive_windowed(conn, ts, now=now, marked=marked)
        due = self._due
        if due is not None and now >= due:
            self.handle_timer(now=now)
        if self._guarded:
            refusal = self._refusal(ts, now)
            if refusal is not None:
                self._counts[refusal] += 1
                return refusal
        table = self._table
        last = table.get(conn)
        if last is not None:
            if ts <= last:
                verdict = _DUPLICATE
                self._duplicates += 1
            else:
                table[conn] = ts  # its expiry key stays below ts: see _evict
                verdict = _ACCEPTED
                self._accepted += 1
        elif ts <= (self.upper_marked if marked else self.upper):
            verdict = _STALE
            self._stale += 1
        else:
            if self._bounded and (
                    len(table) >= self._capacity
                    or self._bytes + self.entry_bytes + len(conn) > self._max_bytes
            ) and not self._make_room(conn, now):
                self._counts[_FULL] += 1
                return _FULL
            table[conn] = ts
            heappush(self._expiry, (ts, conn))
            self._bytes += self.entry_bytes + len(conn)
            verdict = _ACCEPTED
            self._accepted += 1
            if marked:
                self.accepted_marked += 1
        if self._tracks and self.estimator.observe(now - ts, verdict):
            self._gc(now)
        return verdict

    def _receive_windowed(self, conn: str, ts: int, *, now: int,
                          marked: bool = False) -> Verdict:
        """``receive`` with a reorder window W > 1 (module docstring); ``receive``
        hands over to it first thing, so W = 1 runs the figures' code with only that
        one test on its path (a method, not an instance attribute swapped in at
        construction, so the module also compiles with mypyc)."""
        due = self._due
        if due is not None and now >= due:
            self.handle_timer(now=now)
        if self._guarded:
            refusal = self._refusal(ts, now)
            if refusal is not None:
                self._counts[refusal] += 1
                return refusal
        table = self._table
        last = table.get(conn)
        if last is not None:
            if ts > last:
                table[conn] = ts  # its expiry key stays below ts: see _evict
                self._slide(conn, ts)
                verdict = _ACCEPTED
                self._accepted += 1
            elif self._admit(conn, ts):
                verdict = _ACCEPTED  # a reordered message within the window
                self._accepted += 1
            else:
                verdict = _DUPLICATE
                self._duplicates += 1
        elif ts <= (bound := self.upper_marked if marked else self.upper):
            verdict = _STALE
            self._stale += 1
        else:
            # Taken before _make_room may raise it (other connections). A marked
            # message's entry keeps out, below it, what an earlier incarnation may
            # have accepted on the connection (module docstring, (M)).
            floor = max(bound, min(self.upper, ts - 1)) if marked else bound
            if self._bounded and (
                    self._held >= self._capacity
                    or self._bytes + self.entry_bytes + len(conn) > self._max_bytes
            ) and not self._make_room(conn, now):
                self._counts[_FULL] += 1
                return _FULL
            table[conn] = ts
            heappush(self._expiry, (ts, conn))
            self._bytes += self.entry_bytes + len(conn)
            assert self._windows is not None
            self._windows[conn] = [floor, ts]
            self._held += 1
            verdict = _ACCEPTED
            self._accepted += 1
            if marked:
                self.accepted_marked += 1
        if self._tracks and self.estimator.observe(now - ts, verdict):
            self._gc(now)
        return verdict


    def _refusal(self, ts: int, now: int) -> Verdict | None:
        """The checks before Fig. 2-2's skeleton: down, recovering, too early."""
        if self._down:
            return _DOWN
        refuse_until = self._refuse_until
        if refuse_until is not None and now < refuse_until:
            return _RECOVERING
        latest = self._latest
        if latest is not None and ts > latest:
            return _EARLY
        slack = self._slack
        if slack is not None and ts > now + slack:
            return _EARLY
        return None

    def handle_timer(self, *, now: int) -> None:
        """Fire every timer due at or before ``now`` (recovery, refresh, GC)."""
        due = self._due
        if due is None or now < due:
            # Nothing due (also when the receiver's clock stepped back: timers
            # stay on their absolute schedule).
            return
        if self._down:
            if self._recover_at is None or self._recover_at > now:
                return
            self._recover(self._recover_at)
        if self._refuse_until is not None and now >= self._refuse_until:
            # Monotonic-clock recovery: the epsilon window is over; everything
            # accepted before the crash had ts <= crash time + epsilon <= this.
            self.upper = max(self.upper, self._refuse_until)
            self._refuse_until = None
        if self._next_refresh is not None and self._next_refresh <= now:
            assert isinstance(self.resilience, StableLatest)
            period = self.resilience.latest_every
            last = now - now % period
            self._write_latest(last + self.resilience.beta)
            self._next_refresh = last + period
        if self._next_gc is not None and self._next_gc <= now:
            assert self.gc_every is not None
            first = self._next_gc
            self._gc(first)
            last = now - now % self.gc_every
            if last > first:
                self._gc(last)
            self._next_gc = last + self.gc_every
        self._update_due()

    def crash(self, *, now: int, down: int | None = None) -> None:
        """Lose volatile state at ``now``; recover at ``now + down`` if given.

        Without ``down`` the receiver stays down until ``restart(now=...)``.
        """
        if self.resilience is None:
            raise ProtocolUsageError(
                "a non-resilient receiver cannot survive a crash (Fig. 2-1): "
                "recovering with upper = 0 could accept duplicates"
            )
        if self._down:
            raise ProtocolUsageError("crash of a receiver that is already down")
        if down is not None and down < 1:
            raise ProtocolUsageError(f"down must be >= 1, got {down}")
        self.handle_timer(now=now)
        self._down = True
        self._clear_table()
        self.upper = 0
        self.upper_marked = 0
        self._refuse_until = None
        self.estimator.lose_volatile()
        self._wanted = None  # never handed out: lost with the process
        self._next_gc = self._next_refresh = None
        self._recover_at = None if down is None else now + down
        self._update_due()

    def restart(self, *, now: int) -> None:
        """Recover a crashed receiver at ``now`` (its process came back)."""
        if not self._down:
            raise ProtocolUsageError("restart of a receiver that is not down")
        self._recover(now)
        self.handle_timer(now=now)

    # -- internals -----------------------------------------------------------

    def _recover(self, now: int) -> None:
        if self._in_flight is not None:
            raise ProtocolUsageError("recovery with a deferred write in flight: report "
                                     "it (write_done) once it landed or failed")
        self._down = False
        self._no_evict_until = now + self.recovery_grace
        self._recover_at = None
        self._clear_table()
        self.upper_marked = 0  # a new incarnation: nothing marked for it yet
        resilience = self.resilience
        if isinstance(resilience, StableLatest):
            record = resilience.storage.read()
            if record is None:
                raise ProtocolUsageError("resilient recovery found nothing on stable storage")
            self.estimator.restore(record.estimate, record.p)
            self._latest = record.latest
            self._promised = record.latest
            self._wanted = None
            self.upper = record.latest
            self._write_latest(now + resilience.beta, sync=True)
        elif isinstance(resilience, MonotonicClock):
            self.upper = 0
            self._refuse_until = now + resilience.epsilon
        else:
            self.upper = 0
        self._schedule_from(now)

    def _schedule_from(self, now: int) -> None:
        """Next timers: the first multiples of each period at or after ``now``
        (strictly after 0: periodic work starts at k >= 1)."""
        if self.gc_every is not None:
            self._next_gc = max(self.gc_every, -(-now // self.gc_every) * self.gc_every)
        if isinstance(self.resilience, StableLatest):
            period = self.resilience.latest_every
            self._next_refresh = max(period, -(-now // period) * period)
        self._update_due()

    def _update_due(self) -> None:
        timers = (self._next_gc, self._next_refresh, self._recover_at, self._refuse_until)
        armed = [t for t in timers if t is not None]
        self._due = min(armed) if armed else None

    def _write_latest(self, candidate: int, *, sync: bool = False) -> None:
        resilience = self.resilience
        assert isinstance(resilience, StableLatest)
        latest = candidate
        for bound in (self._latest, self._promised):
            if bound is not None and bound > latest:
                latest = bound
        self._promised = latest
        record = StableRecord(latest=latest, estimate=self.estimator.estimate,
                              p=self.estimator.p)
        if resilience.deferred and not sync:
            self._wanted = record  # the driver writes it: take_write / write_done
            if self._in_flight is None and self.write_wanted is not None:
                self.write_wanted(self)
            return
        resilience.storage.write(record)
        self._latest = latest  # only after the write is durable (Fig. 2-2)

    def _gc(self, now: int) -> None:
        self.gcs += 1
        if self.estimator.update() and isinstance(self.resilience, StableLatest):
            assert self._latest is not None  # written at creation and at recovery
            self._write_latest(self._latest)
        if self._no_evict_until is not None and now < self._no_evict_until:
            return
        if self.capacity is None or self.entries >= (self.high_water or 0):
            self._evict(now)
