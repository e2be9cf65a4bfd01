"""Where a live server's ``latest`` lives: the class files, or memory, opened at a start.

``open_storages`` (``RpcServer``) and ``open_store`` (``ChannelListener``) give the
receivers their stable storage before the receivers are built, and apply one rule,
storage that cannot be rolled back by accident:

- *A start never trusts a missing record.* A server whose storage file is missing
  (never made, or deleted by an operator to "fix" a refusing server) creates it
  with ``latest = now``, the server's clock at its start (µs), written durably
  before the receiver exists, and says so in one line on stderr. The receiver then
  starts as a recovery from that record (``upper = now``: SCMP Fig. 2-2's recovery),
  so every call stamped before the start is refused. That is section 2.2's
  monotonic-clock rule: a call stamped before the start cannot be told apart from
  one that ran before a lost file, so none of them runs. Calls stamped after the
  start are accepted at once (the recovery writes ``latest = now + beta`` before
  serving); a client whose clock is behind the server's is refused ``down``, then
  ``stale``, for as long as it is behind.
- *Without a file* (``storage=None``) every class gets a ``MemoryStorage`` holding
  the same record, so a restarted process that keeps no file never runs a call
  stamped before its start either.
- *Class files.* Class k >= 1 keeps its ``latest`` in ``PATH.k`` (``class_storages``:
  every class of a run starts from the largest record of any class file, also of a
  run with more classes). A missing class file gets ``max(now, that largest
  latest)``: never below what a surviving class promised, never below the start.
- *Validation.* Each file is read by ``FileStorage.read`` (regular files of at most
  ``MAX_BYTES``, typed and range-checked fields) with ``horizon = now + HORIZON``:
  a ``latest`` more than a year ahead of this clock would refuse every call until
  then, so the start fails with one line saying what to do (``StorageError``, exit
  2 at the command line).

Choices: the estimator's part of a created record is the configured estimator's
initial state (``config.new_estimator()``), so a created file restores exactly what
a fresh receiver would hold. The stderr line is printed here, at the driver layer,
through ``notice`` (default: stderr) so a library user can redirect it.
Not compiled with mypyc (``_server`` is): plain Python. Tests:
``tests/test_net_storage_safety.py``.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import sys
from collections.abc import Callable

from timebound.core.atmostonce import (
    MemoryStorage,
    ReceiverConfig,
    StableRecord,
    StableStorage,
    aligned_records,
)
from timebound.net._clock import TICKS_PER_SECOND
from timebound.storage import FileStorage

#: A ``latest`` further than this ahead of the start's clock (µs) refuses the start.
HORIZON = 366 * 86400 * TICKS_PER_SECOND

Notice = Callable[[str], None]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def class_path(path: str, k: int) -> str:
    """The file of class ``k``: ``path`` for class 0, ``path.k`` otherwise."""
    return path if k == 0 else f"{path}.{k}"


def class_storages(path: str, classes: int, *, horizon: int | None = None,
                   start: StableRecord | None = None) -> list[FileStorage]:
    """The files holding each class's ``latest``: ``path`` for class 0, ``path.k``
    for class k. Before a start, every class file that exists (also of a run with
    more classes) is read and every class of this run starts from the largest
    record: a connection whose class changed with ``--classes`` is still bounded
    by the ``latest`` its old class wrote, so no call runs twice across a change of
    ``--classes``. (With one class and no other file, nothing is rewritten.)

    ``start`` (the start's record, ``latest = now``): a class file that does not
    exist is created with ``latest = max(start.latest, the largest latest)``.
    ``horizon`` bounds every ``latest`` read (``FileStorage``). The rule is the core's
    (``core.atmostonce.aligned_records``); this finds and writes the files."""
    folder = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    stores = [FileStorage(class_path(path, k), horizon=horizon) for k in range(classes)]
    others: list[FileStorage] = []
    try:
        names = os.listdir(folder)
    except OSError:
        names = []
    for name in sorted(names):
        suffix = name[len(base) + 1:] if name.startswith(base + ".") else ""
        if suffix.isascii() and suffix.isdigit() and int(suffix) >= classes:
            others.append(FileStorage(os.path.join(folder, name), horizon=horizon))
    wanted = aligned_records([s.read() for s in stores + others], classes, start)
    for store, record in zip(stores, wanted, strict=True):
        if record is not None:
            store.write(record)
    return stores


def start_record(config: ReceiverConfig, now: int) -> StableRecord:
    """The record of a start without one: ``latest = now`` (at least 1), and the
    configured estimator's initial estimate and ``p``."""
    estimator = config.new_estimator()
    return StableRecord(latest=max(1, now), estimate=estimator.estimate, p=estimator.p)


def _when(now: int) -> str:
    """``now`` (µs of the system clock) as UTC, for the operator's eye."""
    try:
        moment = datetime.datetime.fromtimestamp(now / TICKS_PER_SECOND, datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return str(now)
    return f"{now} ({moment.strftime('%Y-%m-%dT%H:%M:%S.%fZ')})"


def missing_class_files(storage: str | None, classes: int = 1) -> tuple[str, ...]:
    """The class files of ``storage`` that do not exist yet: the ones a start
    creates (``open_storages``), to remove with ``remove_created`` if the start
    fails before serving (a port in use leaves no file behind)."""
    if storage is None:
        return ()
    return tuple(path for path in (class_path(storage, k) for k in range(classes))
                 if not os.path.lexists(path))


def remove_created(paths: tuple[str, ...]) -> None:
    """Remove the files a failed start created (``missing_class_files``)."""
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def open_storages(storage: str | None, classes: int, config: ReceiverConfig, *, now: int,
                  notice: Notice | None = None, refused: str = "calls"
                  ) -> tuple[list[FileStorage], list[StableStorage]]:
    """The class files (empty without ``storage``) and the storages to build the
    receivers on (the files, or memory holding the start's record); module
    docstring. A missing file is created here, durably, and announced through
    ``notice`` (default: one line on stderr). ``StorageError`` for a file that
    cannot be used (one line that says what to do)."""
    record = start_record(config, now)
    if storage is None:
        return [], [MemoryStorage(record) for _ in range(classes)]
    paths = [class_path(storage, k) for k in range(classes)]
    missing = [p for p in paths if not os.path.lexists(p)]
    files = class_storages(storage, classes, horizon=now + HORIZON, start=record)
    if missing:
        more = ""
        if len(missing) > 1:
            more = f" (and {len(missing) - 1} class file{'s' if len(missing) > 2 else ''})"
        (notice or _stderr)(
            f"timebound: created storage file {missing[0]}{more}: {refused} stamped before "
            f"this start, {_when(record.latest)}, are refused")
    return files, list(files)


def open_store(storage: str | None, config: ReceiverConfig, *, now: int,
               notice: Notice | None = None, refused: str = "calls") -> StableStorage:
    """``open_storages`` for one class (``ChannelListener``)."""
    return open_storages(storage, 1, config, now=now, notice=notice, refused=refused)[1][0]
