"""Reading shared keys from files (``--key-file``, ``--previous-key-file``), and the
keyring the drivers build from keys given in Python.

A key file is what ``timebound key new FILE`` writes (``_keygen``): 64 lowercase hex
characters (32 random bytes) and a newline, mode 0600. ``read_key`` accepts nothing
else, each refusal one line naming the option and the file (``UsageError``, exit 2):

- *Private, as ssh requires of a private key.* A key file that its group or others
  may read, write or execute (any bit of ``0o077``: ``-rw-r--r--`` is mode 0644) is
  refused, ``--key-file: F is readable by others (mode 0644): a key file must be
  private to its owner; chmod 600 F``: anyone who can read the key can forge every
  frame. The mode is read from the open descriptor (``fstat``), so a file swapped
  between the check and the read is never used. Not checked on Windows, where
  ``st_mode`` does not describe who can read a file.
- *Hex of the documented length.* After trailing whitespace is stripped (the newline,
  also ``\\r\\n``), the file must hold exactly ``KEY_HEX_CHARS`` (64) characters of
  ``0-9a-f``: anything else (40 bytes of text, a binary key, uppercase hex, a
  truncated copy) is refused with what a key file must hold, without echoing any
  byte of it (it may be a secret). Uppercase is refused rather than folded: the key
  is the text itself (below), so ``ABC...`` and ``abc...`` would be two keys.
- *Small and regular.* Only a regular file of at most ``MAX_KEY_FILE`` bytes is read,
  opened without blocking: a FIFO (which would hang the command), a device or a
  directory is one line and exit 2, as is a file too large to be a key (bounded
  reads).

The secret is the 64 ASCII characters, not the 32 bytes they spell (as before this
check existed): a key file and the same text given to the Python API (``key="..."``)
are the same key, and servers and clients already sharing a ``timebound key new``
file keep working.

Keys given to the Python API (``keyring``, hence ``RpcServer(key=...)``,
``RpcClient``, ``ChannelListener``, ``Channel``, ``Group``, the pub-sub endpoints)
keep their documented rule, unchanged: any ``bytes`` (a ``str`` is its UTF-8 bytes)
of at least ``MIN_KEY_BYTES`` (16), checked by ``core.wire.Key``. docs/net.md
documents ``key=`` as a secret, not a file, and a program holding random bytes
should not have to hex them; the hex and mode rules guard what an operator copies
around as a file.

Pinned by ``tests/test_net_keys_ports.py`` and
``tests/test_net_cli_hostile.py::test_key_file_must_be_a_small_regular_file``.
"""

from __future__ import annotations

import os
import re
import stat

from timebound.core.wire import Key, Keyring
from timebound.errors import UsageError
from timebound.storage import read_at_most

#: Longest key file read, bytes.
MAX_KEY_FILE = 1 << 16
#: Hex characters in a key file (``timebound key new``: 32 random bytes).
KEY_HEX_CHARS = 64
#: What a key file must hold, as every refusal of its content says it.
KEY_FILE_RULE = (f"a key file holds {KEY_HEX_CHARS} lowercase hex characters and a "
                 "newline, as 'timebound key new F' writes")
#: Permission bits of a key file that its group or others hold: any is refused.
GROUP_OR_OTHERS = 0o077

_HEX_KEY = re.compile(rb"[0-9a-f]{%d}" % KEY_HEX_CHARS)
_LOWER_HEX = frozenset(b"0123456789abcdef")
#: What a mode bit lets others do to a key file, the worst first.
_EXPOSED = ((0o004, "readable by others"), (0o040, "readable by its group"),
            (0o002, "writable by others"), (0o020, "writable by its group"))


def read_key(path: str, option: str = "--key-file") -> bytes:
    """The key in the key file ``path``: its 64 hex characters, as ASCII bytes
    (module docstring); a ``UsageError`` naming ``option`` and ``path`` for a file
    that group or others can access, that is not a small regular file, or that
    does not hold exactly 64 lowercase hex characters (trailing whitespace
    stripped)."""
    data = read_small_file(path, option, MAX_KEY_FILE,
                           "not a key file ('timebound key new F' writes one)",
                           private=True)
    secret = data.rstrip()
    if not _HEX_KEY.fullmatch(secret):
        raise UsageError(option, f"{path} {_what_it_holds(secret)}: {KEY_FILE_RULE}")
    return secret


def _what_it_holds(secret: bytes) -> str:
    """Why ``secret`` (stripped) is not a key, without showing any of its bytes."""
    if not secret:
        return "is empty"
    if len(secret) != KEY_HEX_CHARS:
        return f"holds {len(secret)} bytes, not {KEY_HEX_CHARS} hex characters"
    at = next(i for i, byte in enumerate(secret) if byte not in _LOWER_HEX)
    if secret[at] in b"ABCDEF":
        return f"holds uppercase hex (byte {at + 1})"
    return f"holds a byte that is not hex (byte {at + 1})"


def private_mode_problem(mode: int) -> str | None:
    """Why a key file of ``st_mode`` ``mode`` is not private, or None (POSIX only)."""
    bits = stat.S_IMODE(mode)
    if os.name == "nt" or not bits & GROUP_OR_OTHERS:
        return None
    who = next((text for bit, text in _EXPOSED if bits & bit),
               "accessible by its group or others")
    return f"{who} (mode {bits:04o})"


def read_small_file(path: str, option: str, limit: int, too_large: str, *,
                    private: bool = False) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them, read without
    blocking; anything else is a ``UsageError`` naming ``option`` (``too_large``
    says what a larger file is not). With ``private`` a file its group or others
    can access is refused too (a key file: module docstring), before a byte of it
    is read."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
                     | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise UsageError(option, f"cannot read {path}: {reason}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UsageError(option, f"{path} is not a regular file")
        problem = private_mode_problem(mode) if private else None
        if problem is not None:
            raise UsageError(option, f"{path} is {problem}: a key file must be private "
                                     f"to its owner; chmod 600 {path}")
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
    """A keyring from secrets (str: UTF-8; at least ``MIN_KEY_BYTES`` bytes, any
    content: module docstring), or None without ``key``."""
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

