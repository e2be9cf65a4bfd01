"""Reading shared keys from files (``--key-file``, ``--previous-key-file``)."""

from __future__ import annotations

import os
import stat

from timebound.core.wire import MIN_KEY_BYTES, Key, Keyring
from timebound.errors import UsageError
from timebound.storage import read_at_most

#: Longest key file read, bytes.
MAX_KEY_FILE = 1 << 16


def read_key(path: str, option: str = "--key-file") -> bytes:
    """The key in ``path``: its bytes, trailing whitespace stripped (>= 16 bytes).

    Only a regular file of at most ``MAX_KEY_FILE`` bytes is read, opened without
    blocking: a FIFO (which would hang the command), a device or a directory is one
    line and exit 2, as is a file too large to be a key (issue 26: bounded reads).
    Pinned by ``tests/test_net_cli_hostile.py::test_key_file_must_be_a_small_regular_file``."""
    data = read_small_file(path, option, MAX_KEY_FILE,
                           "not a key file ('timebound key new F' writes one)")
    secret = data.rstrip()
    if len(secret) < MIN_KEY_BYTES:
        raise UsageError(option, f"{path} holds {len(secret)} bytes; a key needs "
                                 f">= {MIN_KEY_BYTES}")
    return secret


def read_small_file(path: str, option: str, limit: int, too_large: str) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them, read without
    blocking; anything else is a ``UsageError`` naming ``option`` (``too_large``
    says what a larger file is not)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise UsageError(option, f"cannot read {path}: {reason}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(option, f"{path} is not a regular file")
        data = read_at_most(fd, limit)
    except OSError as exc:
        raise UsageError(option, f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise UsageError(option, f"{path} is larger than {limit} bytes: {too_large}")
    return data


def keyring(key: bytes | str | None, previous: bytes | str | None = None,
            previous_until: int | None = None) -> Keyring | None:
    """A keyring from secrets (str: UTF-8), or None without ``key``."""
    if key is None:
        if previous is not None:
            raise UsageError("previous_key", "a previous key needs a current key")
        return None
    current = Key(_raw(key))
    old = None if previous is None else Key(_raw(previous))
    return Keyring(current, old, previous_until if old is not None else None)


def _raw(secret: bytes | str | os.PathLike[str]) -> bytes:
    if isinstance(secret, bytes):
        return secret
    return os.fsencode(secret) if not isinstance(secret, str) else secret.encode("utf-8")
