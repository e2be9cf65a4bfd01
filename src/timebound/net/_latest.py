"""``LatestWriter``: the ``latest`` of a server or a channel listener written off the loop.

The receivers are built with ``StableLatest(deferred=True)`` (the receiver's module
docstring, "Deferred writes"): a refresh of ``latest`` does not fsync inside the
datagram or timer callback that caused it. The receiver calls ``write_wanted``; this
writer takes the record (``take_write``), writes it with the class's ``FileStorage``
in one worker thread (one write in flight per class, in order), and reports it back
on the loop (``write_done``, or ``write_failed`` after an ``OSError`` or
``StorageError``: counted in ``storage_errors``, and the record is written again at
the next refresh). Until a write is reported, the receiver keeps refusing ``ts``
above the last durable ``latest`` (EARLY), so nothing accepted is ever above what
storage holds, whatever moment the process is killed.

A failing disk (ENOSPC, EIO...) is said on stderr once, when the first write fails
(``timebound: warning: cannot write latest to PATH: ...; calls above L are refused
early until it succeeds``, L the last durable ``latest``), not at every retry, and
once more when a write lands again (``timebound: storage PATH is written again:
latest L``); every failed write is counted in ``storage_errors`` (``statistics()``,
Prometheus). While it fails, calls stamped up to L are still served; the ones above
are refused ``early`` (not run). ``log`` (default: stderr) receives those lines.
Tests: ``tests/test_net_storage_safety.py``.

``drain()`` (the server's ``close``) waits for the writes in flight and writes what
is still wanted, so a clean stop leaves the newest ``latest`` on storage.
``drain_now()`` does the same without awaiting, for a driver whose ``close()`` is
synchronous (``ChannelListener.close``): it blocks until the write in flight is done
(the worker pool shut down with ``wait=True``), reports it to its receiver at once
and writes what is still wanted in place. Either way no worker thread is left, and a
failed write is counted, never raised.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
from collections.abc import Callable, Sequence

from timebound.core.atmostonce import Receiver, StableRecord, StableStorage
from timebound.errors import StorageError


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _name(storage: StableStorage) -> str:
    path = getattr(storage, "path", None)
    return path if isinstance(path, str) else type(storage).__name__


def _reason(error: BaseException | None) -> str:
    if error is None:
        return "cancelled"
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 300 else text[:297] + "..."


class LatestWriter:
    def __init__(self, receivers: Sequence[Receiver], storages: Sequence[StableStorage],
                 *, log: Callable[[str], None] | None = None) -> None:
        self.storage_errors = 0
        self.writes = 0
        self._log = log or _stderr
        # The storages whose last write failed (by id): the warning is said when
        # this becomes non-empty, the recovery line when it empties again.
        self._failing: set[int] = set()
        self._storage = {id(r): s for r, s in zip(receivers, storages, strict=True)}
        self._receivers = list(receivers)
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        # The writes handed to the worker and not yet reported to their receiver:
        # the loop's future -> (receiver, record, the worker's future).
        self._pending: dict[asyncio.Future[None],
                            tuple[Receiver, StableRecord, concurrent.futures.Future[None]]] = {}
        for receiver in receivers:
            receiver.write_wanted = self._wanted

    def _wanted(self, receiver: Receiver) -> None:
        record = receiver.take_write()
        if record is None:
            return
        storage = self._storage[id(receiver)]
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # driven outside a loop: write in place
            self._write_now(receiver, storage, record)
            return
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="timebound-latest")
        job = self._pool.submit(storage.write, record)
        future = asyncio.wrap_future(job, loop=loop)
        self._pending[future] = (receiver, record, job)
        future.add_done_callback(self._landed)

    def _landed(self, future: asyncio.Future[None]) -> None:
        error = (None if future.cancelled() else future.exception())
        failed = future.cancelled() or error is not None
        entry = self._pending.pop(future, None)
        if entry is None:
            return  # already reported by drain_now
        receiver, record, _ = entry
        if self._report(receiver, record, failed, error):
            self._wanted(receiver)  # a newer record may be waiting

    def _report(self, receiver: Receiver, record: StableRecord, failed: bool,
                error: BaseException | None = None) -> bool:
        storage = self._storage[id(receiver)]
        if failed:
            self.storage_errors += 1
            receiver.write_failed(record)
            if not self._failing:
                name = _name(storage)
                reason = _reason(error).removeprefix(f"cannot write stable storage {name}: ")
                self._log(f"timebound: warning: cannot write latest to {name}: {reason}; "
                          f"calls above {receiver.latest} are refused early until it "
                          f"succeeds")
            self._failing.add(id(storage))
            return False  # written again at the next refresh, not in a tight loop
        self.writes += 1
        receiver.write_done(record)
        if id(storage) in self._failing:
            self._failing.discard(id(storage))
            if not self._failing:
                self._log(f"timebound: storage {_name(storage)} is written again: "
                          f"latest {receiver.latest}")
        return True

    def _write_now(self, receiver: Receiver, storage: StableStorage,
                   record: StableRecord) -> None:
        try:
            storage.write(record)
        except (OSError, StorageError) as exc:
            self._report(receiver, record, failed=True, error=exc)
            return
        self._report(receiver, record, failed=False)

    def _write_wanted_now(self) -> None:
        for receiver in self._receivers:
            record = receiver.take_write()
            if record is not None:
                self._write_now(receiver, self._storage[id(receiver)], record)

    async def drain(self) -> None:
        """Wait for the writes in flight, then write what is still wanted."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)
        self._write_wanted_now()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def drain_now(self) -> None:
        """``drain`` without awaiting (a synchronous ``close``): block until the
        write in flight is done and stop the worker, report the writes that landed
        (or failed) to their receivers, then write what is still wanted in place.
        The loop's futures of those writes, when they complete later, are ignored."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        for future, (receiver, record, job) in list(self._pending.items()):
            del self._pending[future]
            error = None if job.cancelled() else job.exception()
            self._report(receiver, record, job.cancelled() or error is not None, error)
        self._write_wanted_now()
