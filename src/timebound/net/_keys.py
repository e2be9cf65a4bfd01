"""Reading shared keys from files (``--key-file``, ``--previous-key-file``)."""

from __future__ import annotations

import os

from timebound.core.wire import MIN_KEY_BYTES, Key, Keyring
from timebound.errors import UsageError


def read_key(path: str, option: str = "--key-file") -> bytes:
    """The key in ``path``: its bytes, trailing whitespace stripped (>= 16 bytes)."""
    try:
        with open(path, "rb") as handle:
            secret = handle.read(1 << 16).rstrip()
    except OSError as exc:
        raise UsageError(option, f"cannot read {path}: {exc.strerror or exc}") from None
    if len(secret) < MIN_KEY_BYTES:
        raise UsageError(option, f"{path} holds {len(secret)} bytes; a key needs "
                                 f">= {MIN_KEY_BYTES}")
    return secret


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
