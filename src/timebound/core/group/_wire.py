"""Group frame bodies (frame kind ``KIND_GROUP``; ``docs/wire.md``).

Every body starts with ``type:u8  group_len:u8 group  from_len:u8 from  inc:u64``:
the group's name, the sending member's name and its incarnation (the µs clock
reading when that member process started, so a restarted member is told apart).

::

    MSG    1  head  seq:u64  ts:u64  data                     a multicast message
    HB     2  head  next:u64  base:u64  promise:u64  ack      periodic: ack + heartbeat
    NACK   3  head  to_len:u8 to  to_inc:u64  first:u64  count:u16   resend these
    LEAVE  4  head                                            the member leaves

    ack = 1 value:u64                                         timestamp ack
        | 2 n:u16 (name_len:u8 name value:u64) * n            vector ack

``next``: the sender's next sequence number (so a receiver detects a lost tail);
``base``: its lowest sequence number still in its send buffer (everything below was
stable among its receiver group); ``promise``: no message it sends later has a
timestamp at or below it (a null message, see ``_member``). Decoding is strict:
anything else raises ``MalformedDatagram``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from timebound.core.stability import Ack, TimestampAck, VectorAck
from timebound.core.wire import MAX_NAME_BYTES as MAX_NAME_BYTES  # names: 1..64 UTF-8 bytes
from timebound.core.wire import check_name as check_name
from timebound.core.wire import encode_name, read_name
from timebound.errors import MalformedDatagram, ProtocolUsageError

MSG = 1
HB = 2
NACK = 3
LEAVE = 4
#: Most sequence numbers one NACK asks for.
MAX_NACK = 256

_U64 = struct.Struct(">Q")
_MSG = struct.Struct(">QQ")
_HB = struct.Struct(">QQQ")
_NACK = struct.Struct(">QQH")
_U64_MAX = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class Head:
    group: str
    member: str
    inc: int


@dataclass(frozen=True, slots=True)
class Msg:
    head: Head
    seq: int
    ts: int
    data: bytes


@dataclass(frozen=True, slots=True)
class Heartbeat:
    head: Head
    next: int
    base: int
    promise: int
    ack: Ack


@dataclass(frozen=True, slots=True)
class Nack:
    head: Head
    to: str
    to_inc: int
    first: int
    count: int


@dataclass(frozen=True, slots=True)
class Leave:
    head: Head


Body = Msg | Heartbeat | Nack | Leave


def _head(kind: int, head: Head) -> bytes:
    if not 0 <= head.inc <= _U64_MAX:
        raise ProtocolUsageError("incarnation out of range")
    return bytes((kind,)) + encode_name(head.group) + encode_name(head.member) + _U64.pack(head.inc)


def encode_msg(head: Head, seq: int, ts: int, data: bytes) -> bytes:
    return _head(MSG, head) + _MSG.pack(seq, ts) + data


def encode_ack(ack: Ack) -> bytes:
    if isinstance(ack, TimestampAck):
        return b"\x01" + _U64.pack(ack.value)
    parts = [b"\x02", struct.pack(">H", len(ack.entries))]
    for name, value in sorted(ack.entries.items()):
        parts.append(encode_name(name) + _U64.pack(value))
    return b"".join(parts)


def encode_heartbeat(head: Head, nxt: int, base: int, promise: int, ack: Ack) -> bytes:
    return _head(HB, head) + _HB.pack(nxt, base, promise) + encode_ack(ack)


def encode_nack(head: Head, to: str, to_inc: int, first: int, count: int) -> bytes:
    if not 1 <= count <= MAX_NACK:
        raise ProtocolUsageError(f"a NACK asks for 1..{MAX_NACK} messages")
    return _head(NACK, head) + encode_name(to) + _NACK.pack(to_inc, first, count)


def encode_leave(head: Head) -> bytes:
    return _head(LEAVE, head)


class _Reader:
    __slots__ = ("data", "at")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def name(self) -> str:
        text, self.at = read_name(self.data, self.at)
        return text

    def fixed(self, fmt: struct.Struct) -> tuple[int, ...]:
        if self.at + fmt.size > len(self.data):
            raise MalformedDatagram("truncated")
        values = fmt.unpack_from(self.data, self.at)
        self.at += fmt.size
        return tuple(values)

    def byte(self) -> int:
        if self.at >= len(self.data):
            raise MalformedDatagram("truncated")
        self.at += 1
        return self.data[self.at - 1]

    def end(self) -> None:
        if self.at != len(self.data):
            raise MalformedDatagram("trailing bytes")


def decode(body: bytes) -> Body:
    """The message in ``body``; ``MalformedDatagram`` if it is not a valid one."""
    r = _Reader(body)
    kind = r.byte()
    group = r.name()
    member = r.name()
    (inc,) = r.fixed(_U64)
    head = Head(group, member, inc)
    if kind == MSG:
        seq, ts = r.fixed(_MSG)
        if ts == 0:
            raise MalformedDatagram("timestamp 0")
        return Msg(head, seq, ts, body[r.at:])
    if kind == HB:
        nxt, base, promise = r.fixed(_HB)
        if base > nxt:
            raise MalformedDatagram("base above next")
        mode = r.byte()
        ack: Ack
        if mode == 1:
            (value,) = r.fixed(_U64)
            ack = TimestampAck(member, value)
        elif mode == 2:
            (n,) = r.fixed(struct.Struct(">H"))
            entries: dict[str, int] = {}
            for _ in range(n):
                name = r.name()
                (value,) = r.fixed(_U64)
                if name in entries:
                    raise MalformedDatagram("vector ack names a sender twice")
                entries[name] = value
            ack = VectorAck(member, entries)
        else:
            raise MalformedDatagram(f"unknown ack mode {mode}")
        r.end()
        return Heartbeat(head, nxt, base, promise, ack)
    if kind == NACK:
        to = r.name()
        to_inc, first, count = r.fixed(_NACK)
        r.end()
        if not 1 <= count <= MAX_NACK:
            raise MalformedDatagram("NACK count out of range")
        return Nack(head, to, to_inc, first, count)
    if kind == LEAVE:
        r.end()
        return Leave(head)
    raise MalformedDatagram(f"unknown group message type {kind}")
