"""Names on the wire (``docs/wire.md``): ``len:u8 name``, 1..64 UTF-8 bytes.

Group bodies (group and member names) and pub-sub bodies (process, merger and
subscriber names) carry names the same way, so both encode and decode them here.
Encoding a name out of range is the caller's mistake (``ProtocolUsageError``);
decoding is strict on what a peer sent: a zero or too large length, a truncated name
or bytes that are not UTF-8 raise ``MalformedDatagram`` (the datagram is counted and
dropped). Pinned by tests/test_net_group_core.py and tests/test_net_pubsub_core.py.
"""

from __future__ import annotations

from timebound.errors import MalformedDatagram, ProtocolUsageError

#: Longest name, UTF-8 bytes.
MAX_NAME_BYTES = 64


def encode_name(text: str) -> bytes:
    """``len:u8 name``; ProtocolUsageError unless 1..MAX_NAME_BYTES UTF-8 bytes."""
    raw = text.encode("utf-8")
    if not 1 <= len(raw) <= MAX_NAME_BYTES:
        raise ProtocolUsageError(f"name {text!r} must be 1..{MAX_NAME_BYTES} UTF-8 bytes")
    return bytes((len(raw),)) + raw


def check_name(text: str) -> str:
    """``text`` if it can be sent as a name (else ProtocolUsageError)."""
    encode_name(text)
    return text


def read_name(body: bytes, at: int) -> tuple[str, int]:
    """The name starting at ``body[at]`` and the offset just after it."""
    if at >= len(body) or not 1 <= body[at] <= MAX_NAME_BYTES:
        raise MalformedDatagram("bad name length")
    end = at + 1 + body[at]
    if end > len(body):
        raise MalformedDatagram("name truncated")
    try:
        return body[at + 1:end].decode("utf-8"), end
    except UnicodeDecodeError as exc:
        raise MalformedDatagram("name is not UTF-8") from exc
