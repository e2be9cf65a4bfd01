"""``timebound key new FILE``: a fresh shared key for the network services.

"Secure by default": a service without a key binds only loopback
addresses, so an operator who wants to serve a network needs a key, and the command
that makes one has to be obvious and hard to misuse. Choices:

- 32 bytes from ``secrets.token_bytes`` (256 bits, the HMAC-SHA256 block's strength),
  written as 64 lowercase hex characters and a newline: ``read_key`` strips the
  newline and uses the 64 ASCII bytes as the secret (>= 16 bytes), and the file can
  be copied and compared as text.
- The file is created with ``O_CREAT | O_EXCL`` (and ``O_NOFOLLOW``), mode 0600 set
  on the descriptor before a byte is written: an existing file (or a symbolic link)
  is never overwritten, since overwriting a key in use locks every client out; that
  is a one-line error, exit 2. A write that fails removes the partial file.
- ``--key-file`` refuses a key file its group or others can access (``_keys``, as
  ssh does), so the file must come out 0600 whatever the umask: the mode given to
  ``open`` is only narrowed by the umask, ``fchmod`` then says 0600 exactly (a
  umask of 0 adds nothing; under a folder's default ACL, chmod 600 sets the ACL
  mask to 0, so no named entry keeps a right), and the mode is read back
  from the descriptor: a file system that keeps other bits (a FAT or network mount
  with a fixed mode) is one line and the file is removed, rather than a key that
  every command would then refuse.
- It then prints how to use the key on the servers (``--key-file FILE`` on ``rpc
  serve``, ``channel recv``, ``group join``, ``pubsub merge``) and the clients (``rpc
  call``/``stats``, ``channel send``, ``pubsub publish``/``subscribe``), and that the
  file goes to clients over a secure channel.

Pinned by ``tests/test_net_cli_hostile.py::test_key_new_*`` and
``tests/test_net_keys_ports.py::test_key_new_*``.
"""

from __future__ import annotations

import argparse
import os
import secrets
from typing import Any

from timebound.errors import UsageError
from timebound.net._keys import private_mode_problem

#: Random bytes in a new key (written as twice as many hex characters).
KEY_BYTES = 32


def add_key_parser(commands: Any) -> None:
    """``timebound key new FILE`` (one line in timebound.cli)."""
    parser = commands.add_parser(
        "key", help="make a shared key for the network services: new",
        description="Keys for the HMAC-SHA256 frames of rpc, channel, group and pub-sub "
                    "(docs/net.md). A service without a key binds only loopback "
                    "addresses.")
    sub = parser.add_subparsers(dest="key_command", metavar="COMMAND", required=True)
    new = sub.add_parser(
        "new", help="write a fresh random key to FILE (mode 0600)",
        description="Write 32 fresh random bytes as 64 hex characters and a newline to "
                    "FILE, created with mode 0600; an existing FILE is never "
                    "overwritten (exit 2). Pass it with --key-file FILE to the servers "
                    "(rpc serve, channel recv, group join, pubsub merge) and to the "
                    "clients (rpc call, rpc stats, channel send, pubsub publish, pubsub "
                    "subscribe); copy FILE to the clients over a secure channel (scp, "
                    "a secrets manager), never in the clear.")
    new.add_argument("file", metavar="FILE", help="the key file to create")
    new.set_defaults(handler=run_key_new)


def new_key() -> bytes:
    """A fresh key as the file holds it: 64 hex characters and a newline."""
    return secrets.token_hex(KEY_BYTES).encode("ascii") + b"\n"


def write_new_key(path: str) -> None:
    """Create ``path`` (mode 0600, never over an existing file) holding a new key."""
    if not path:
        raise UsageError("FILE", "empty file name")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        raise UsageError("FILE", f"{path} exists; a key is never overwritten (clients "
                                 "holding it would be locked out): remove it first or "
                                 "choose another name") from None
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise UsageError("FILE", f"cannot create {path}: {reason}") from None
    try:
        os.fchmod(fd, 0o600)  # the umask may only remove bits; say 0600 exactly
        problem = private_mode_problem(os.fstat(fd).st_mode)
        if problem is None:
            data = new_key()
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
            os.fsync(fd)
    except OSError as exc:
        os.close(fd)
        os.unlink(path)
        raise UsageError("FILE", f"cannot write {path}: {exc.strerror or exc}") from None
    os.close(fd)
    if problem is not None:  # nothing was written: no key left where others read it
        os.unlink(path)
        raise UsageError("FILE", f"cannot make {path} private: it is {problem} after "
                                 "chmod 600 (a file system that ignores permissions?); "
                                 "create it on another one")


def run_key_new(args: argparse.Namespace) -> int:
    path = args.file
    write_new_key(path)
    print(f"wrote a new 256-bit key to {path} (mode 0600)\n"
          f"servers: --key-file {path} on rpc serve, channel recv, group join, "
          "pubsub merge\n"
          f"clients: --key-file {path} on rpc call, rpc stats, channel send, "
          "pubsub publish, pubsub subscribe\n"
          f"copy {path} to each client over a secure channel (scp, a secrets manager), "
          "never in the clear; anyone holding it can forge frames")
    return 0
