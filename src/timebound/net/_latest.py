"""``LatestWriter``: a server's ``latest`` written off the event loop.

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

``drain()`` (the server's ``close``) waits for the writes in flight and writes what
is still wanted, so a clean stop leaves the newest ``latest`` on storage.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Sequence

from timebound.core.atmostonce import Receiver, StableRecord, StableStorage
from timebound.errors import StorageError


class LatestWriter:
    def __init__(self, receivers: Sequence[Receiver], storages: Sequence[StableStorage]
                 ) -> None:
        self.storage_errors = 0
        self.writes = 0
        self._storage = {id(r): s for r, s in zip(receivers, storages, strict=True)}
        self._receivers = list(receivers)
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._pending: set[asyncio.Future[None]] = set()
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
        future = loop.run_in_executor(self._pool, storage.write, record)
        self._pending.add(future)
        future.add_done_callback(lambda f: self._landed(receiver, record, f))

    def _landed(self, receiver: Receiver, record: StableRecord,
                future: asyncio.Future[None]) -> None:
        self._pending.discard(future)
        if future.cancelled() or future.exception() is not None:
            self.storage_errors += 1
            receiver.write_failed(record)
            return  # written again at the next refresh, not in a tight loop
        self.writes += 1
        receiver.write_done(record)
        self._wanted(receiver)  # a newer record may be waiting

    def _write_now(self, receiver: Receiver, storage: StableStorage,
                   record: StableRecord) -> None:
        try:
            storage.write(record)
        except (OSError, StorageError):
            self.storage_errors += 1
            receiver.write_failed(record)
            return
        self.writes += 1
        receiver.write_done(record)

    async def drain(self) -> None:
        """Wait for the writes in flight, then write what is still wanted."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)
        for receiver in self._receivers:
            record = receiver.take_write()
            if record is not None:
                self._write_now(receiver, self._storage[id(receiver)], record)
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
