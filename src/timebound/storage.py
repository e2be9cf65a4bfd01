"""Stable storage for resilient receivers: one small file, written atomically.

``FileStorage`` implements ``timebound.core.atmostonce.StableStorage``: each write goes
to a temporary file in the same folder, is fsynced, renamed over the target, and the
folder is fsynced, so after a crash the file holds either the old record or the new
one, never a mix. A file that does not parse raises ``StorageError``: a resilient
receiver must not guess its ``latest`` (SCMP 2.3: stable storage failing is a
catastrophic failure, not something to paper over).

The temporary file is named ``.<target name>.<8 random characters>.timebound-tmp``.
A process killed between creating it and the rename (SIGKILL, power loss) leaves it
behind; ``read()``, the recovery step every start goes through, removes the ones of
this target, and only those: no other file in the folder is ever touched.

What is read (a careless operator's file must never start a server that
silently misbehaves). ``read()`` opens the path with ``O_NONBLOCK | O_NOFOLLOW``
(a FIFO cannot hang the start, a symbolic link is refused: ``write`` would replace
the link itself, not its target), takes only a regular file (``fstat`` on the
opened descriptor: no race with a rename) of at most ``MAX_BYTES`` bytes (a copy of
``/dev/full`` or ``/dev/zero`` is refused without being read), and parses it as a
JSON object with integer fields (never ``bool``, which JSON's ``true`` becomes):
``1 <= latest < 2**63``, ``1 <= estimate < 2**63``, ``1 <= p < 2**63`` (the range of
the RPC's ``ts:u64`` timestamps and of every estimator's state). Nesting too deep
for the parser (``RecursionError``) is a ``StorageError`` like any other bad record.
``horizon`` (given by the caller, which owns the clock: this module reads none)
refuses a ``latest`` above it: a record far ahead of the machine's clock would
refuse every call until the clock gets there. Every ``StorageError`` of ``read``
says what to do, in one line. Tests: ``tests/test_net_storage_safety.py``.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import tempfile

from timebound.core.atmostonce import StableRecord
from timebound.errors import StorageError

TMP_SUFFIX = ".timebound-tmp"

#: The largest storage file read: a record is about 60 bytes.
MAX_BYTES = 4096

#: Every field of a record is below this (timestamps travel as u64, held as int64).
FIELD_LIMIT = 2**63

#: What to do with a storage file that cannot be used, said by every read error.
REMEDY = ("restore the file from a backup, or remove it: a new file refuses every "
          "call stamped before the server's start")

_READ_FLAGS = (os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
               | getattr(os, "O_CLOEXEC", 0))


def read_at_most(fd: int, limit: int) -> bytes:
    """At most ``limit + 1`` bytes from ``fd`` (one more than ``limit`` tells the
    caller the file is too large), however the reads split them."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = os.read(fd, limit + 1 - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


class FileStorage:
    """``latest`` in one file (module docstring). ``horizon``: the largest ``latest``
    ``read`` accepts (None: any below 2**63); the caller derives it from its clock."""

    def __init__(self, path: str | os.PathLike[str], *, horizon: int | None = None) -> None:
        self.path = os.fspath(path)
        self.horizon = horizon
        self.writes = 0
        self._folder = os.path.dirname(os.path.abspath(self.path))
        self._prefix = "." + os.path.basename(self.path) + "."
        self._leftover = re.compile(re.escape(self._prefix) + r"[a-z0-9_]{8}"
                                    + re.escape(TMP_SUFFIX))

    def remove_leftovers(self) -> int:
        """Remove the temporary files an interrupted ``write`` of this target left;
        return how many were removed."""
        try:
            names = os.listdir(self._folder)
        except OSError:
            return 0
        removed = 0
        for name in names:
            if self._leftover.fullmatch(name):
                try:
                    os.unlink(os.path.join(self._folder, name))
                    removed += 1
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    raise StorageError(f"cannot remove the leftover temporary file "
                                       f"{name} of {self.path}: {exc}") from None
        return removed

    def read(self) -> StableRecord | None:
        """The record on the file, None when there is no file; ``StorageError``
        (one line naming the path, the fault and ``REMEDY``) for anything else."""
        self.remove_leftovers()
        raw = self._read_bytes()
        if raw is None:
            return None
        try:
            data = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            reason = ("is nested too deeply" if isinstance(exc, RecursionError)
                      else f"is not JSON ({_one_line(exc)})")
            raise self._bad(reason) from None
        if not isinstance(data, dict):
            raise self._bad("is not a JSON object {\"latest\", \"estimate\", \"p\"}")
        values: list[int] = []
        for name in ("latest", "estimate", "p"):
            if name not in data:
                raise self._bad(f"has no field {name!r}")
            value = data[name]
            if isinstance(value, bool) or not isinstance(value, int):
                raise self._bad(f"field {name!r} must be an integer, got "
                                f"{_short(json.dumps(value))}")
            if not 1 <= value < FIELD_LIMIT:
                raise self._bad(f"field {name!r} must be in [1, 2**63), got {_short(str(value))}")
            values.append(value)
        latest, estimate, p = values
        if self.horizon is not None and latest > self.horizon:
            raise StorageError(
                f"stable storage {self.path}: latest {latest} is more than a year ahead "
                f"of this machine's clock, so every call would be refused until then: "
                f"if the clock is right, remove the file (a new file refuses every call "
                f"stamped before the server's start)")
        return StableRecord(latest=latest, estimate=estimate, p=p)

    def _read_bytes(self) -> bytes | None:
        """At most ``MAX_BYTES`` of a regular file; None when there is no file."""
        try:
            fd = os.open(self.path, _READ_FLAGS)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise StorageError(f"stable storage {self.path} is a symbolic link: give "
                                   f"the path of the file itself (each write replaces "
                                   f"the file at that path, so it would replace the "
                                   f"link)") from None
            raise self._bad(f"cannot be opened ({_one_line(exc)})") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise self._bad(f"is not a regular file (a {_kind(info.st_mode)})")
            if info.st_size > MAX_BYTES:
                raise self._bad(f"is {info.st_size} bytes, more than a record's "
                                f"{MAX_BYTES} at most")
            data = read_at_most(fd, MAX_BYTES)  # the file may grow after fstat
        except OSError as exc:
            raise self._bad(f"cannot be read ({_one_line(exc)})") from None
        finally:
            os.close(fd)
        if len(data) > MAX_BYTES:
            raise self._bad(f"is more than a record's {MAX_BYTES} bytes")
        return data

    def _bad(self, reason: str) -> StorageError:
        return StorageError(f"stable storage {self.path} {reason}: {REMEDY}")

    def write(self, record: StableRecord) -> None:
        folder = self._folder
        payload = json.dumps(
            {"latest": record.latest, "estimate": record.estimate, "p": record.p}
        ).encode("utf-8")
        try:
            fd, tmp = tempfile.mkstemp(prefix=self._prefix, suffix=TMP_SUFFIX, dir=folder)
            try:
                try:
                    os.write(fd, payload)
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.replace(tmp, self.path)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
            dir_fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError as exc:
            raise StorageError(f"cannot write stable storage {self.path}: {exc}") from None
        self.writes += 1


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _short(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "special file"
