"""Messages of the at-most-once RPC (SCMP paper, section 3.1 and Fig. 3-1).

Four messages travel between a client and a server:

- ``Call(conn, ts, payload)``: the at-most-once message that starts a call. The pair
  ``(conn, ts)`` is the call's unique id (section 3.1: "the client uid and timestamp
  provide the unique call id"). A *truncated* call (``payload is None``) is what the
  client retransmits once the server has ACKed: "subsequent retransmissions send a
  truncated message that contains only the connection and call ids".
- ``Ack(conn, ts)``: the server received call ``ts`` and is computing it.
- ``Reply(conn, ts, result)``: the result of call ``ts`` (sent on completion and
  retransmitted on every duplicate of the call while the server is REPLYING).
- ``ReplyAck(conn, ts)``: the client's hint that it has the reply of call ``ts``.

Wire format (all integers big-endian), compact and self-delimiting so that every
truncation of a valid datagram is rejected::

    type:u8  conn_len:u8  conn:conn_len bytes (UTF-8, non-empty)  ts:u64 (>= 1)
    [body_len:u32  body:body_len bytes]        -- CALL and REPLY only

Types: 1 CALL, 2 truncated CALL, 3 ACK, 4 REPLY, 5 REPLY_ACK. The datagram must end
exactly where its lengths say: a short datagram, trailing bytes, an unknown type, an
empty or non-UTF-8 connection id or ``ts = 0`` raise ``MalformedDatagram``. Pinned by
``tests/test_rpc_messages.py`` (Hypothesis round trip; every truncation rejected).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Final

from timebound.core._frozen import by_constructor
from timebound.errors import MalformedDatagram, ProtocolUsageError

#: Largest connection id, in UTF-8 bytes (one length byte).
MAX_CONN_BYTES: Final = 255
#: Largest timestamp (an unsigned 64-bit field), in ticks.
MAX_TS: Final = (1 << 64) - 1
#: Largest payload or result, in bytes (a u32 length; UDP itself allows < 64 KiB).
MAX_BODY_BYTES: Final = (1 << 32) - 1

_CALL: Final = 1
_CALL_TRUNCATED: Final = 2
_ACK: Final = 3
_REPLY: Final = 4
_REPLY_ACK: Final = 5

_TS: Final = struct.Struct(">Q")
_LEN: Final = struct.Struct(">I")


def _check_ids(conn: str, ts: int) -> None:
    if not conn:
        raise ProtocolUsageError("connection id must not be empty")
    if len(conn.encode("utf-8")) > MAX_CONN_BYTES:
        raise ProtocolUsageError(f"connection id longer than {MAX_CONN_BYTES} UTF-8 bytes")
    if not 1 <= ts <= MAX_TS:
        raise ProtocolUsageError(f"timestamp must be in [1, 2**64), got {ts}")


def _check_body(body: bytes) -> None:
    if len(body) > MAX_BODY_BYTES:
        raise ProtocolUsageError(f"body longer than {MAX_BODY_BYTES} bytes")


def _header(kind: int, conn: str, ts: int) -> bytes:
    raw = conn.encode("utf-8")
    return bytes((kind, len(raw))) + raw + _TS.pack(ts)


@dataclass(frozen=True, slots=True)
class Call:
    """A call (``payload`` set) or its truncated retransmission (``payload`` None)."""

    conn: str
    ts: int
    payload: bytes | None

    def __post_init__(self) -> None:
        _check_ids(self.conn, self.ts)
        if self.payload is not None:
            _check_body(self.payload)

    @property
    def truncated(self) -> bool:
        return self.payload is None

    def encode(self) -> bytes:
        if self.payload is None:
            return _header(_CALL_TRUNCATED, self.conn, self.ts)
        return _header(_CALL, self.conn, self.ts) + _LEN.pack(len(self.payload)) + self.payload

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return by_constructor(self)


@dataclass(frozen=True, slots=True)
class Ack:
    """The server has call ``(conn, ts)`` and is computing it."""

    conn: str
    ts: int

    def __post_init__(self) -> None:
        _check_ids(self.conn, self.ts)

    def encode(self) -> bytes:
        return _header(_ACK, self.conn, self.ts)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return by_constructor(self)


@dataclass(frozen=True, slots=True)
class Reply:
    """The result of call ``(conn, ts)``."""

    conn: str
    ts: int
    result: bytes

    def __post_init__(self) -> None:
        _check_ids(self.conn, self.ts)
        _check_body(self.result)

    def encode(self) -> bytes:
        return _header(_REPLY, self.conn, self.ts) + _LEN.pack(len(self.result)) + self.result

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return by_constructor(self)


@dataclass(frozen=True, slots=True)
class ReplyAck:
    """The client has the reply of call ``(conn, ts)``; the server may drop it."""

    conn: str
    ts: int

    def __post_init__(self) -> None:
        _check_ids(self.conn, self.ts)

    def encode(self) -> bytes:
        return _header(_REPLY_ACK, self.conn, self.ts)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return by_constructor(self)


Message = Call | Ack | Reply | ReplyAck


#: Type bytes, for the state machines' hot paths (``parse``).
CALL_TYPE: Final = _CALL
TRUNCATED_TYPE: Final = _CALL_TRUNCATED
ACK_TYPE: Final = _ACK
REPLY_TYPE: Final = _REPLY
REPLY_ACK_TYPE: Final = _REPLY_ACK

_HEAD_BODY: Final = struct.Struct(">QI")


def head(kind: int, conn: str) -> bytes:
    """The first bytes of every message of type ``kind`` on ``conn`` (type, length,
    id), checked once so that a state machine can reuse them (``frame``)."""
    _check_ids(conn, 1)
    raw = conn.encode("utf-8")
    return bytes((kind, len(raw))) + raw


def parsed_head(kind: int, conn: str) -> bytes:
    """``head`` of a connection id that ``parse`` returned (so already checked)."""
    raw = conn.encode("utf-8")
    return bytes((kind, len(raw))) + raw


def frame(prefix: bytes, ts: int, body: bytes | None = None) -> bytes:
    """A message from its ``head`` and checked fields: no validation (hot path)."""
    if body is None:
        return prefix + _TS.pack(ts)
    return prefix + _HEAD_BODY.pack(ts, len(body)) + body


def parse(datagram: bytes) -> tuple[int, str, int, bytes | None]:
    """``(type, conn, ts, body)`` of one datagram (``body`` None for the bodiless
    types), with exactly ``decode``'s checks but no message object: the state
    machines' hot path. Raises ``MalformedDatagram``."""
    data = datagram if type(datagram) is bytes else bytes(datagram)
    size = len(data)
    if size < 2:
        raise MalformedDatagram(f"datagram of {size} bytes is shorter than a header")
    kind, conn_len = data[0], data[1]
    if not _CALL <= kind <= _REPLY_ACK:
        raise MalformedDatagram(f"unknown message type {kind}")
    if conn_len == 0:
        raise MalformedDatagram("empty connection id")
    ts_at = 2 + conn_len
    body_at = ts_at + 8
    if size < body_at:
        raise MalformedDatagram(f"datagram of {size} bytes truncated inside its header")
    try:
        conn = data[2:ts_at].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedDatagram("connection id is not UTF-8") from exc
    if kind == _CALL or kind == _REPLY:
        if size < body_at + 4:
            raise MalformedDatagram("datagram truncated before its body length")
        ts, body_len = _HEAD_BODY.unpack_from(data, ts_at)
        if ts == 0:
            raise MalformedDatagram("timestamp 0 (timestamps start at 1)")
        start = body_at + 4
        if size != start + body_len:
            raise MalformedDatagram(
                f"body length {body_len} disagrees with the {size - start} bytes present"
            )
        return kind, conn, ts, data[start:]
    (ts,) = _TS.unpack_from(data, ts_at)
    if ts == 0:
        raise MalformedDatagram("timestamp 0 (timestamps start at 1)")
    if size != body_at:
        raise MalformedDatagram(f"{size - body_at} trailing bytes after the message")
    return kind, conn, ts, None


def decode(datagram: bytes) -> Message:
    """Parse one datagram; raise ``MalformedDatagram`` on anything but an exact message."""
    kind, conn, ts, body = parse(datagram)
    if kind == _CALL:
        return Call(conn, ts, body)
    if kind == _REPLY:
        assert body is not None
        return Reply(conn, ts, body)
    if kind == _CALL_TRUNCATED:
        return Call(conn, ts, None)
    if kind == _ACK:
        return Ack(conn, ts)
    return ReplyAck(conn, ts)


def _decode_reference(datagram: bytes) -> Message:
    """The straightforward decoder ``parse`` must agree with (tests only)."""
    data = bytes(datagram)
    size = len(data)
    if size < 2:
        raise MalformedDatagram(f"datagram of {size} bytes is shorter than a header")
    kind, conn_len = data[0], data[1]
    if not _CALL <= kind <= _REPLY_ACK:
        raise MalformedDatagram(f"unknown message type {kind}")
    if conn_len == 0:
        raise MalformedDatagram("empty connection id")
    ts_at = 2 + conn_len
    body_at = ts_at + _TS.size
    if size < body_at:
        raise MalformedDatagram(f"datagram of {size} bytes truncated inside its header")
    try:
        conn = data[2:ts_at].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedDatagram("connection id is not UTF-8") from exc
    (ts,) = _TS.unpack_from(data, ts_at)
    if ts == 0:
        raise MalformedDatagram("timestamp 0 (timestamps start at 1)")
    if kind in (_CALL, _REPLY):
        if size < body_at + _LEN.size:
            raise MalformedDatagram("datagram truncated before its body length")
        (body_len,) = _LEN.unpack_from(data, body_at)
        start = body_at + _LEN.size
        if size != start + body_len:
            raise MalformedDatagram(
                f"body length {body_len} disagrees with the {size - start} bytes present"
            )
        body = data[start:]
        return Call(conn, ts, body) if kind == _CALL else Reply(conn, ts, body)
    if size != body_at:
        raise MalformedDatagram(f"{size - body_at} trailing bytes after the message")
    if kind == _CALL_TRUNCATED:
        return Call(conn, ts, None)
    if kind == _ACK:
        return Ack(conn, ts)
    return ReplyAck(conn, ts)
