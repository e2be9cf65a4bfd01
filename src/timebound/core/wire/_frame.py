"""One datagram frame for every live protocol: header, body, optional HMAC tag.

Theory of operation
-------------------
Every datagram timebound sends on a real network is one *frame* (``docs/wire.md``)::

    version:u8  kind:u8  flags:u8  key_id:u8  body  [tag: TAG_BYTES]

``version`` is ``VERSION`` (2); a receiver drops every other version (a later
version may change anything after the first byte). ``kind`` names the protocol
whose body follows (``KIND_RPC`` = 1 is the at-most-once RPC of
``timebound.core.rpc``; 0 is never used, other values are reserved for channels,
groups and pub-sub). ``flags`` bit 0 (``FLAG_AUTH``) says a tag ends the frame; the
other bits must be 0. ``key_id`` is the first byte of SHA-256 of the key that made
the tag (0 when unauthenticated): a hint that spares a receiver holding two keys
during a rotation from computing two HMACs for every frame.

Authentication (optional, shared key): the tag is the first ``TAG_BYTES`` (16) bytes
of HMAC-SHA256(key, header + body), compared in constant time. It protects the
whole frame, header included, so a frame cannot be moved to another kind or
version. It does not stop an attacker from *replaying* a captured frame; the
protocols above make replays harmless (an at-most-once CALL replayed is a duplicate
for SCMP: refused, never run twice).

Service ids: a codec built with ``service=`` (1..64 UTF-8 bytes: the name of the one
server a frame is meant for, chosen at ``serve`` and known to its clients) puts
``b"timebound-service\x00" + len + service`` *under the tag* (the HMAC covers it;
no byte of it is sent), so a frame sealed for service A does not verify at a
service B that shares the key: a CALL captured for one server never runs on
another. Without a service id the tag covers the frame alone (as before). The
prefix starts with ``t``, never with the version byte, so the two inputs cannot
collide. Pinned by ``tests/test_rpc_hostile.py::test_call_for_one_service_never_runs_on_another``
and the ``test_service_id_*`` tests of the channel, group and pub-sub.

Key rotation: a ``Keyring`` holds a current key and, optionally, a previous one
accepted until ``previous_until`` (an absolute tick; None: until removed). A
receiver answers with the key the request was authenticated with, so a client still
on the previous key can read its replies during the grace period.

Strictness: ``FrameCodec.open`` never raises on what a peer sent. A datagram shorter
than a header, longer than ``MAX_DATAGRAM``, of another version, with unknown flag
bits, with kind 0, or too short for its tag is counted as *malformed*; a frame whose
tag does not verify under an accepted key, a frame without a tag at a receiver that
has keys, and a tagged frame at a receiver without keys are counted as
*unauthenticated*. Both are dropped before any protocol state is touched. Pinned by
``tests/test_net_wire.py`` (every truncation and every single-byte change of a
sealed frame is dropped).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from timebound.core._frozen import by_constructor
from timebound.errors import ProtocolUsageError

#: The frame format version this code writes and reads.
VERSION: Final = 2
#: Bytes of the header: version, kind, flags, key id.
HEADER_BYTES: Final = 4
#: Bytes of the truncated HMAC-SHA256 tag.
TAG_BYTES: Final = 16
#: Largest frame, in bytes: the largest UDP payload over IPv4 (65535 - 8 - 20).
MAX_DATAGRAM: Final = 65507
#: Flag bit: the frame ends with a tag.
FLAG_AUTH: Final = 0x01
#: Frame kind of the at-most-once RPC (``timebound.core.rpc``).
KIND_RPC: Final = 1
#: Frame kind of slotted-FIFO channels (``timebound.core.channel``).
KIND_CHANNEL: Final = 2
#: Frame kind of stable multicast groups (``timebound.core.group``).
KIND_GROUP: Final = 3
#: Frame kind of causal pub-sub (``timebound.core.pubsub``).
KIND_PUBSUB: Final = 4
#: Shortest accepted key, in bytes (128 bits).
MIN_KEY_BYTES: Final = 16
#: Longest service id, in UTF-8 bytes.
MAX_SERVICE_BYTES: Final = 64

_NO_TAG: Final = bytes((0,))


def service_prefix(service: str) -> bytes:
    """What the tag covers before a frame sealed for ``service`` (see the module
    doc); ``ProtocolUsageError`` for an id that is not 0..64 UTF-8 bytes."""
    if not isinstance(service, str):
        raise ProtocolUsageError(f"a service id is a str, got {type(service).__name__}")
    if not service:
        return b""
    try:
        raw = service.encode("utf-8")
    except UnicodeEncodeError:
        raise ProtocolUsageError("a service id must be UTF-8") from None
    if len(raw) > MAX_SERVICE_BYTES:
        raise ProtocolUsageError(
            f"a service id is at most {MAX_SERVICE_BYTES} UTF-8 bytes, got {len(raw)}")
    return b"timebound-service\x00" + bytes((len(raw),)) + raw


def key_id(secret: bytes) -> int:
    """The key id byte of ``secret``: the first byte of its SHA-256."""
    return hashlib.sha256(secret).digest()[0]


@dataclass(frozen=True, slots=True)
class Key:
    """One shared secret and its id byte."""

    secret: bytes

    def __post_init__(self) -> None:
        if len(self.secret) < MIN_KEY_BYTES:
            raise ProtocolUsageError(
                f"a key must be at least {MIN_KEY_BYTES} bytes, got {len(self.secret)}"
            )

    @property
    def id(self) -> int:
        return key_id(self.secret)

    def tag(self, data: bytes, service: bytes = b"") -> bytes:
        """The tag of ``data`` (``service``: the codec's prefix, see the module doc)."""
        return hmac.digest(self.secret, service + data if service else data,
                           "sha256")[:TAG_BYTES]

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return by_constructor(self)


@dataclass(frozen=True, slots=True)
class Keyring:
    """The keys a receiver accepts: ``current`` and, during a rotation, ``previous``
    until the absolute tick ``previous_until`` (None: until the keyring is replaced)."""

    current: Key
    previous: Key | None = None
    previous_until: int | None = None

    def accepted(self, kid: int, now: int) -> tuple[Key, ...]:
        """Keys to try for a frame with key id ``kid`` at ``now`` (current first)."""
        keys: tuple[Key, ...] = ()
        if self.current.id == kid:
            keys = (self.current,)
        previous = self.previous
        if previous is not None and previous.id == kid and (
            self.previous_until is None or now < self.previous_until
        ):
            keys += (previous,)
        return keys

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return by_constructor(self)


class Opened(NamedTuple):
    """A frame that passed every check: its kind, body and the key that verified it."""

    kind: int
    body: bytes
    key: Key | None


@dataclass(frozen=True, slots=True)
class FrameStatistics:
    opened: int
    sealed: int
    malformed: int
    unauthenticated: int
    unknown_version: int
    oversized: int

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return by_constructor(self)


# Building an ``Opened`` without the generated ``__new__`` (hot path).
_new_opened: Final = tuple.__new__
# The header of an untagged frame of each kind (index: kind).
_PLAIN_HEADS: Final = tuple(bytes((VERSION, kind, 0, 0)) for kind in range(256))


class FrameCodec:
    """Seals and opens frames for one endpoint; counts what it drops.

    With ``keyring`` None the endpoint neither sends nor accepts tags; with a
    keyring it tags everything it sends (with the current key unless told which)
    and accepts only frames tagged under an accepted key.
    """

    def __init__(self, keyring: Keyring | None = None, service: str = "") -> None:
        self.keyring = keyring
        self.service = service
        #: What the tag covers before the frame (empty without a service id).
        self.service_prefix = service_prefix(service)
        self.opened = 0
        self.sealed = 0
        self.malformed = 0
        self.unauthenticated = 0
        self.unknown_version = 0
        self.oversized = 0

    def statistics(self) -> FrameStatistics:
        return FrameStatistics(
            opened=self.opened, sealed=self.sealed, malformed=self.malformed,
            unauthenticated=self.unauthenticated, unknown_version=self.unknown_version,
            oversized=self.oversized,
        )

    def seal(self, kind: int, body: bytes, key: Key | None = None) -> bytes:
        """The frame carrying ``body``; tagged with ``key`` or the current key."""
        if not 1 <= kind <= 255:
            raise ProtocolUsageError(f"frame kind must be in [1, 255], got {kind}")
        if key is None and self.keyring is not None:
            key = self.keyring.current
        if key is None:
            frame = _PLAIN_HEADS[kind] + body
        else:
            head = bytes((VERSION, kind, FLAG_AUTH, key.id)) + body
            frame = head + key.tag(head, self.service_prefix)
        if len(frame) > MAX_DATAGRAM:
            raise ProtocolUsageError(
                f"frame of {len(frame)} bytes exceeds the datagram limit {MAX_DATAGRAM}"
            )
        self.sealed += 1
        return frame

    def open(self, datagram: bytes, *, now: int = 0) -> Opened | None:
        """The frame's kind, body and key, or None (counted) if it must be dropped."""
        size = len(datagram)
        if self.keyring is None and HEADER_BYTES <= size <= MAX_DATAGRAM:
            # Hot path of an endpoint without keys: one comparison checks version,
            # flags (no tag) and key id (0) of a frame of a non-zero kind.
            kind = datagram[1]
            if kind and datagram[:HEADER_BYTES] == _PLAIN_HEADS[kind]:
                self.opened += 1
                body = datagram[HEADER_BYTES:]
                return _new_opened(Opened, (kind, body if type(body) is bytes else bytes(body),
                                            None))
        if size < HEADER_BYTES:
            self.malformed += 1
            return None
        if size > MAX_DATAGRAM:
            self.malformed += 1
            self.oversized += 1
            return None
        version, kind, flags, kid = datagram[0], datagram[1], datagram[2], datagram[3]
        if version != VERSION:
            self.malformed += 1
            self.unknown_version += 1
            return None
        if kind == 0 or flags & ~FLAG_AUTH:
            self.malformed += 1
            return None
        keyring = self.keyring
        if not flags:
            if kid or keyring is not None:
                # A key id without a tag is malformed; no tag at a keyed receiver
                # is unauthenticated.
                if kid:
                    self.malformed += 1
                else:
                    self.unauthenticated += 1
                return None
            self.opened += 1
            return _new_opened(Opened, (kind, bytes(datagram[HEADER_BYTES:]), None))
        if size < HEADER_BYTES + TAG_BYTES:
            self.malformed += 1
            return None
        if keyring is None:
            self.unauthenticated += 1
            return None
        data = bytes(datagram)
        signed, tag = data[:-TAG_BYTES], data[-TAG_BYTES:]
        prefix = self.service_prefix
        for key in keyring.accepted(kid, now):
            if hmac.compare_digest(key.tag(signed, prefix), tag):
                self.opened += 1
                return Opened(kind, signed[HEADER_BYTES:], key)
        self.unauthenticated += 1
        return None
