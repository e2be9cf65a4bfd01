"""Stable storage for resilient receivers: one small file, written atomically.

``FileStorage`` implements ``timebound.core.atmostonce.StableStorage``: each write goes
to a temporary file in the same folder, is fsynced, renamed over the target, and the
folder is fsynced, so after a crash the file holds either the old record or the new
one, never a mix. A file that does not parse raises ``StorageError``: a resilient
receiver must not guess its ``latest`` (SCMP 2.3: stable storage failing is a
catastrophic failure, not something to paper over).
"""

from __future__ import annotations

import json
import os
import tempfile

from timebound.core.atmostonce import StableRecord
from timebound.errors import StorageError


class FileStorage:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self.writes = 0

    def read(self) -> StableRecord | None:
        try:
            with open(self.path, encoding="utf-8") as handle:
                data = json.load(handle)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise StorageError(f"cannot read stable storage {self.path}: {exc}") from None
        try:
            record = StableRecord(
                latest=data["latest"], estimate=data["estimate"], p=data["p"]
            )
        except (KeyError, TypeError) as exc:
            raise StorageError(f"stable storage {self.path} is not a record: {exc}") from None
        if not all(isinstance(v, int) for v in (record.latest, record.estimate, record.p)):
            raise StorageError(f"stable storage {self.path} holds non-integer values")
        return record

    def write(self, record: StableRecord) -> None:
        folder = os.path.dirname(os.path.abspath(self.path))
        payload = json.dumps(
            {"latest": record.latest, "estimate": record.estimate, "p": record.p}
        ).encode("utf-8")
        try:
            fd, tmp = tempfile.mkstemp(prefix=".latest.", dir=folder)
            try:
                os.write(fd, payload)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
            dir_fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError as exc:
            raise StorageError(f"cannot write stable storage {self.path}: {exc}") from None
        self.writes += 1
