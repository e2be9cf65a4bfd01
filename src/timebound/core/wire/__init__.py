"""The datagram frame shared by every live protocol (``docs/wire.md``), sans-IO.

- ``FrameCodec``: seal a body into a versioned frame (header + body + optional
  HMAC-SHA256 tag) and open a received datagram, counting and dropping anything
  malformed, oversized, of an unknown version or failing authentication;
- ``Keyring``: the shared keys (current and previous, for key rotation with a grace
  period), ``key_id`` of a key;
- ``Outgoing``: a datagram to send and its peer, what every core asks its driver to
  send; ``Record``: the base of the cores' immutable records;
- names in bodies (``len:u8 name``, 1..``MAX_NAME_BYTES`` UTF-8 bytes):
  ``encode_name``, ``read_name``, ``check_name``, shared by groups and pub-sub.

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
    MAX_SERVICE_BYTES,
    MIN_KEY_BYTES,
    TAG_BYTES,
    VERSION,
    FrameCodec,
    FrameStatistics,
    Key,
    Keyring,
    Opened,
    key_id,
    service_prefix,
)
from timebound.core.wire._names import MAX_NAME_BYTES, check_name, encode_name, read_name
from timebound.core.wire._records import Outgoing, Record

__all__ = [
    "Outgoing",
    "Record",
    "FLAG_AUTH",
    "HEADER_BYTES",
    "KIND_CHANNEL",
    "KIND_GROUP",
    "KIND_PUBSUB",
    "KIND_RPC",
    "MAX_DATAGRAM",
    "MAX_NAME_BYTES",
    "MAX_SERVICE_BYTES",
    "MIN_KEY_BYTES",
    "TAG_BYTES",
    "VERSION",
    "FrameCodec",
    "FrameStatistics",
    "Key",
    "Keyring",
    "Opened",
    "check_name",
    "encode_name",
    "key_id",
    "read_name",
    "service_prefix",
]
