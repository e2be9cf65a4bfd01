"""The datagram frame shared by every live protocol (``docs/wire.md``), sans-IO.

- ``FrameCodec``: seal a body into a versioned frame (header + body + optional
  HMAC-SHA256 tag) and open a received datagram, counting and dropping anything
  malformed, oversized, of an unknown version or failing authentication;
- ``Keyring``: the shared keys (current and previous, for key rotation with a grace
  period), ``key_id`` of a key.

The RPC frames (``timebound.core.rpc``) are one kind of body; channels, groups and
pub-sub add their own kinds on the same header, keys and counters.
"""

from timebound.core.wire._frame import (
    FLAG_AUTH,
    HEADER_BYTES,
    KIND_CHANNEL,
    KIND_GROUP,
    KIND_PUBSUB,
    KIND_RPC,
    MAX_DATAGRAM,
    MIN_KEY_BYTES,
    TAG_BYTES,
    VERSION,
    FrameCodec,
    FrameStatistics,
    Key,
    Keyring,
    Opened,
    key_id,
)

__all__ = [
    "FLAG_AUTH",
    "HEADER_BYTES",
    "KIND_CHANNEL",
    "KIND_GROUP",
    "KIND_PUBSUB",
    "KIND_RPC",
    "MAX_DATAGRAM",
    "MIN_KEY_BYTES",
    "TAG_BYTES",
    "VERSION",
    "FrameCodec",
    "FrameStatistics",
    "Key",
    "Keyring",
    "Opened",
    "key_id",
]
