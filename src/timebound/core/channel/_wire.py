"""Channel frame bodies (frame kind ``KIND_CHANNEL``; ``docs/wire.md``).

Every body starts with the session it belongs to: ``type:u8 conn_len:u8 conn:UTF-8
ts:u64`` -- the connection id the sender chose and the timestamp (µs) of its
opening datagram. Naming the session by ``(conn, ts)`` in *every* datagram keeps a
datagram of an old session from touching a newer one that reuses the connection id.

::

    OPEN    1  session  seq:u64  floor:u64  stamp  data      the first datagram (seq 0)
    DATA    2  session  seq:u64  floor:u64  stamp  data      every later datagram
    ACK     3  session  cum:u64  n:u16  seq:u64 * n          cumulative + selective
    REFUSE  4  session  reason:u8  [seq:u64]                 the opening was refused,
                                                             or (reason 5) the session
                                                             is not held: seq is the
                                                             segment refused

    stamp = slot:u64  kind:u8 (1 FR, 2 R, 3 F, 4 N)  order:u32

``floor`` is the sender's lowest unacknowledged reliable sequence number (its next
one when none is outstanding): the receiver may forget everything below it. ``order``
is 0 for R and N, >= 1 for F, >= 0 for FR (the slotted paper's ST field). ``data`` is
the rest of the body. ``cum``: every sequence number below it was received (or is
below the floor); the ``n`` numbers after it were received too.

Decoding is strict: a wrong length, an unknown type, kind or reason, an order that
does not fit its kind, ``ts = 0``, ``seq < floor``, an OPEN with ``seq != 0`` or an
ACK whose selective numbers are not increasing and above ``cum`` raise
``MalformedDatagram`` (the endpoint counts and drops it).

Range checks (nothing one datagram can poison). Every field is checked
here, at receive time, against what Fig. 3's sender can produce, so no value a
legitimate sender never sends reaches the cores' state (where it would be kept and
could block a channel later):

- ``ts`` in ``[1, 2^63)``: a clock reading in µs (SCMP's ``latest`` has the same
  bound); ``conn`` 1..255 bytes of UTF-8;
- the stamp against ``seq``: every message before ``seq`` has a smaller sequence
  number, and Fig. 3 counts them: the ``slot`` FR closing the earlier slots, the
  ``order`` R of an FR's slot, the ``order - 1`` F before an F in its slot. So
  ``slot <= seq``, ``slot + order <= seq`` for FR and ``slot + order - 1 <= seq``
  for F (an FR claiming 2^32 - 1 R, which would hold its slot open for ever, is
  dropped; pinned by ``tests/test_net_channel_hostile.py::
  test_out_of_range_fields_are_dropped_and_counted``);
- ACK: ``n <= 64``, the selective numbers increasing above ``cum``. ``cum`` and the
  selective numbers are checked against the sender's next sequence number by the
  sender (``ChannelSender.receive``), the one who knows it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from timebound.core.slotted import Kind, Stamp
from timebound.errors import MalformedDatagram, ProtocolUsageError

OPEN = 1
DATA = 2
ACK = 3
REFUSE = 4

#: Longest connection id, in UTF-8 bytes.
MAX_CONN_BYTES = 255
#: Most selective acknowledgments in one ACK.
MAX_SACK = 64

_U64 = struct.Struct(">Q")
_DATA_FIXED = struct.Struct(">QQQBI")  # seq, floor, slot, kind, order
_ACK_FIXED = struct.Struct(">QH")
_KIND_CODE = {Kind.FR: 1, Kind.R: 2, Kind.F: 3, Kind.N: 4}
_CODE_KIND = {code: kind for kind, code in _KIND_CODE.items()}
_U64_MAX = (1 << 64) - 1
_U32_MAX = (1 << 32) - 1
#: Largest session timestamp (µs): below 2^63, as SCMP's ``latest``.
MAX_TS = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class Segment:
    """An OPEN or DATA datagram."""

    conn: str
    ts: int
    seq: int
    floor: int
    stamp: Stamp
    data: bytes

    @property
    def opening(self) -> bool:
        return self.seq == 0


@dataclass(frozen=True, slots=True)
class Ack:
    conn: str
    ts: int
    cum: int
    sack: tuple[int, ...]


#: REFUSE reason of a segment whose session the receiver does not hold (it
#: restarted, or forgot the session: idle or evicted); the REFUSE names the segment.
UNKNOWN_SESSION = 5


@dataclass(frozen=True, slots=True)
class Refuse:
    conn: str
    ts: int
    reason: int  # the RPC's Reason values (1 stale, 2 early, 3 down, 4 overloaded) or 5
    seq: int | None = None  # reason 5: the sequence number of the segment refused


Body = Segment | Ack | Refuse


def _session(kind: int, conn: str, ts: int) -> bytes:
    raw = conn.encode("utf-8")
    if not 1 <= len(raw) <= MAX_CONN_BYTES:
        raise ProtocolUsageError(f"connection id must be 1..{MAX_CONN_BYTES} UTF-8 bytes")
    if not 1 <= ts <= MAX_TS:
        raise ProtocolUsageError(f"timestamp must be in [1, 2^63), got {ts}")
    return bytes((kind, len(raw))) + raw + _U64.pack(ts)


def encode_segment(conn: str, ts: int, seq: int, floor: int, stamp: Stamp,
                   data: bytes) -> bytes:
    order = stamp.order or 0
    if not 0 <= floor <= seq <= _U64_MAX or not stamp.slot <= _U64_MAX or order > _U32_MAX:
        raise ProtocolUsageError("sequence number, floor, slot or order out of range")
    head = _session(OPEN if seq == 0 else DATA, conn, ts)
    return head + _DATA_FIXED.pack(seq, floor, stamp.slot, _KIND_CODE[stamp.kind], order) + data


def encode_ack(conn: str, ts: int, cum: int, sack: tuple[int, ...]) -> bytes:
    if len(sack) > MAX_SACK:
        raise ProtocolUsageError(f"at most {MAX_SACK} selective acknowledgments")
    return (_session(ACK, conn, ts) + _ACK_FIXED.pack(cum, len(sack))
            + b"".join(_U64.pack(s) for s in sack))


def encode_refuse(conn: str, ts: int, reason: int, seq: int | None = None) -> bytes:
    """A REFUSE: of an opening (``reason`` 1-4, no ``seq``) or of the segment ``seq``
    of a session not held (``UNKNOWN_SESSION``)."""
    if (reason == UNKNOWN_SESSION) != (seq is not None) or not 1 <= reason <= UNKNOWN_SESSION:
        raise ProtocolUsageError("a REFUSE names a segment exactly when its reason is 5")
    tail = b"" if seq is None else _U64.pack(seq)
    return _session(REFUSE, conn, ts) + bytes((reason,)) + tail


def decode(body: bytes) -> Body:
    """The message in ``body``; ``MalformedDatagram`` if it is not a valid one."""
    size = len(body)
    if size < 2 or body[1] == 0:
        raise MalformedDatagram("channel body too short")
    kind = body[0]
    at = 2 + body[1]
    if size < at + 8:
        raise MalformedDatagram("channel session truncated")
    try:
        conn = body[2:at].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedDatagram("connection id is not UTF-8") from exc
    (ts,) = _U64.unpack_from(body, at)
    if not 1 <= ts <= MAX_TS:
        raise MalformedDatagram("timestamp 0 or not below 2^63")
    at += 8
    if kind in (OPEN, DATA):
        if size < at + _DATA_FIXED.size:
            raise MalformedDatagram("segment truncated")
        seq, floor, slot, code, order = _DATA_FIXED.unpack_from(body, at)
        skind = _CODE_KIND.get(code)
        if skind is None:
            raise MalformedDatagram(f"unknown send kind {code}")
        if floor > seq or (kind == OPEN) != (seq == 0):
            raise MalformedDatagram("sequence number below the floor, or OPEN not seq 0")
        if slot > seq:
            raise MalformedDatagram("slot above the sequence number")
        if skind is Kind.F:
            if order < 1 or slot + order - 1 > seq:
                raise MalformedDatagram("F order 0 or above what its sequence number allows")
            stamp = Stamp(slot, skind, order)
        elif skind is Kind.FR:
            if slot + order > seq:
                raise MalformedDatagram("FR order above what its sequence number allows")
            stamp = Stamp(slot, skind, order)
        else:
            if order:
                raise MalformedDatagram(f"{skind.value} with an order")
            stamp = Stamp(slot, skind)
        return Segment(conn, ts, seq, floor, stamp, body[at + _DATA_FIXED.size:])
    if kind == ACK:
        if size < at + _ACK_FIXED.size:
            raise MalformedDatagram("ack truncated")
        cum, n = _ACK_FIXED.unpack_from(body, at)
        at += _ACK_FIXED.size
        if n > MAX_SACK or size != at + 8 * n:
            raise MalformedDatagram("ack of the wrong length")
        sack = tuple(_U64.unpack_from(body, at + 8 * i)[0] for i in range(n))
        last = cum
        for s in sack:
            if s <= last:
                raise MalformedDatagram("selective acks not increasing above cum")
            last = s
        return Ack(conn, ts, cum, sack)
    if kind == REFUSE:
        if size == at + 1 and 1 <= body[at] < UNKNOWN_SESSION:
            return Refuse(conn, ts, body[at])
        if size == at + 9 and body[at] == UNKNOWN_SESSION:
            return Refuse(conn, ts, UNKNOWN_SESSION, _U64.unpack_from(body, at + 1)[0])
        raise MalformedDatagram("refusal of the wrong length or reason")
    raise MalformedDatagram(f"unknown channel message type {kind}")
