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
"""

from __future__ import annotations

import json
import os
import re
import tempfile

from timebound.core.atmostonce import StableRecord
from timebound.errors import StorageError

TMP_SUFFIX = ".timebound-tmp"


class FileStorage:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
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
        self.remove_leftovers()
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
