"""Pub-sub frame bodies (frame kind ``KIND_PUBSUB``; ``docs/wire.md``).

::

    PUB   1  proc_len:u8 proc  msg:u64  eps:u16  delta:u32  n:u16  stamp  data
    FWD   2  from_len:u8 from  seq:u64  <the PUB body after its type byte>
    SUB   3  role:u8 (1 subscriber, 2 merger)  name_len:u8 name  [token:16]  (a lease)
    CHAL  4  token:16                        a merger's answer to a SUB without a valid token

Address validation (QUIC's token, DTLS's cookie): a SUB takes or renews a
lease only with a token the merger issued to that very source address (``CHAL``),
so a forged SUB cannot aim a merger's forwarding at a victim. ``token`` is
``issued:u32`` (the merger's ms clock mod 2^32) and the first 12 bytes of
HMAC-SHA256(merger secret, issued + the address).

``stamp`` is the bounded wire form of ⟨r, c, kn⟩ (``timebound.core.causal.WireCodec``
for ``ds(eps, delta)`` with ``n`` processes: ``brt = r mod B``, c, 2·eps counters),
``WireCodec(eps, delta, n).size`` bytes. A PUB is stamped in the publishers' system;
a merger forwards what it delivers in FWD frames stamped for the system its output
forms, ``ds(eps, delta + 3·eps)`` (Theorem 4.3), numbered ``seq`` per merger.
Times are milliseconds. Decoding is strict (``MalformedDatagram``); ``out_of_range``
then checks the decoded values (stamp counters ``0 <= c < eps`` and ``0 <= kn[i] <=
n``, message ids below ``MSG_LIMIT``, FWD ``seq`` below ``SEQ_LIMIT``): a receiver
drops and counts what it names, so nothing out of range is stored and later fails
when forwarded.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import lru_cache

from timebound.core.causal import Timestamp, WireCodec, min_modulus
from timebound.core.wire import MAX_NAME_BYTES as MAX_NAME_BYTES  # names: 1..64 UTF-8 bytes
from timebound.core.wire import check_name as check_name
from timebound.core.wire import encode_name, read_name
from timebound.errors import MalformedDatagram, ProtocolUsageError

PUB = 1
FWD = 2
SUB = 3
CHAL = 4
#: Bytes of an address-validation token (``issued:u32`` + 12 bytes of HMAC).
TOKEN_BYTES = 16
#: Message ids at or above this are out of range (a publisher numbers from 0).
MSG_LIMIT = 1 << 63
#: FWD sequence numbers at or above this are out of range.
SEQ_LIMIT = 1 << 62
ROLE_SUBSCRIBER = 1
ROLE_MERGER = 2
#: Largest epsilon (ms) and delta (ms) on the wire; largest process bound.
MAX_EPSILON = 1000
MAX_DELTA = 600_000
MAX_N = 4096

_MSG = struct.Struct(">QHIH")  # msg, eps, delta, n
_U64 = struct.Struct(">Q")


#: The modulus B is this many times Theorem 3.7's least ``6ε + δ + 1`` (4 more bits).
#: Choice: with the least B, a message delayed beyond ``2ε + δ`` (G2 broken, e.g. a
#: descheduled process) decodes to a plausible later ``r`` and two mergers could place
#: it differently. With 16 times that B the decoder reads ``r`` in the window
#: ``[now + 4ε - B + 1, now + 4ε]`` (the paper's window when no message is late, and
#: much further into the past), so a late copy decodes to its true ``r`` and the merger
#: classifies it ``late``: it is dropped, never misplaced.
MODULUS_FACTOR = 16


@lru_cache(maxsize=64)
def codec(epsilon: int, delta: int, n: int) -> WireCodec:
    return WireCodec(epsilon, delta, n, MODULUS_FACTOR * min_modulus(epsilon, delta))


@dataclass(frozen=True, slots=True)
class Published:
    """A PUB (or the inside of a FWD): ``stamp`` decoded against the receiver's clock."""

    proc: str
    msg: int
    epsilon: int
    delta: int
    n: int
    stamp: Timestamp
    data: bytes


@dataclass(frozen=True, slots=True)
class Forwarded:
    merger: str
    seq: int
    message: Published


@dataclass(frozen=True, slots=True)
class Subscribe:
    role: int
    name: str
    token: bytes = b""


@dataclass(frozen=True, slots=True)
class Challenge:
    token: bytes


Body = Published | Forwarded | Subscribe | Challenge


def _published(proc: str, msg: int, epsilon: int, delta: int, n: int, stamp: Timestamp,
               data: bytes) -> bytes:
    if not 1 <= epsilon <= MAX_EPSILON or not 0 <= delta <= MAX_DELTA or not 1 <= n <= MAX_N:
        raise ProtocolUsageError("epsilon, delta or n out of the wire's range")
    return (encode_name(proc) + _MSG.pack(msg, epsilon, delta, n)
            + codec(epsilon, delta, n).encode(stamp) + data)


def encode_pub(proc: str, msg: int, epsilon: int, delta: int, n: int, stamp: Timestamp,
               data: bytes) -> bytes:
    return bytes((PUB,)) + _published(proc, msg, epsilon, delta, n, stamp, data)


def encode_fwd(merger: str, seq: int, message: Published, delta: int) -> bytes:
    """``message`` forwarded by ``merger``, stamped for the output system (``delta``)."""
    return (bytes((FWD,)) + encode_name(merger) + _U64.pack(seq)
            + _published(message.proc, message.msg, message.epsilon, delta, message.n,
                         message.stamp, message.data))


def encode_sub(role: int, name: str, token: bytes = b"") -> bytes:
    if token and len(token) != TOKEN_BYTES:
        raise ProtocolUsageError(f"a token is {TOKEN_BYTES} bytes")
    return bytes((SUB, role)) + encode_name(name) + token


def encode_challenge(token: bytes) -> bytes:
    if len(token) != TOKEN_BYTES:
        raise ProtocolUsageError(f"a token is {TOKEN_BYTES} bytes")
    return bytes((CHAL,)) + token


def out_of_range(body: Body) -> str | None:
    """Why a decoded ``body`` is out of range (None: it is not)."""
    if isinstance(body, Forwarded):
        if body.seq >= SEQ_LIMIT:
            return "forward sequence number out of range"
        body = body.message
    if isinstance(body, Published):
        stamp = body.stamp
        if body.msg >= MSG_LIMIT:
            return "message id out of range"
        if not 0 <= stamp.c < body.epsilon:
            return "stamp counter c out of range"
        if len(stamp.kn) != 2 * body.epsilon or any(not 0 <= k <= body.n for k in stamp.kn):
            return "stamp counter kn out of range"
    return None


def _read_published(body: bytes, at: int, now: int) -> Published:
    proc, at = read_name(body, at)
    if at + _MSG.size > len(body):
        raise MalformedDatagram("message header truncated")
    msg, eps, delta, n = _MSG.unpack_from(body, at)
    at += _MSG.size
    if not 1 <= eps <= MAX_EPSILON or delta > MAX_DELTA or not 1 <= n <= MAX_N:
        raise MalformedDatagram("epsilon, delta or n out of range")
    c = codec(eps, delta, n)
    if at + c.size > len(body):
        raise MalformedDatagram("timestamp truncated")
    stamp = c.decode(body[at:at + c.size], now)
    if stamp.r > now + 4 * eps:  # read it in [now + 4ε - B + 1, now + 4ε] (see above)
        stamp = Timestamp(stamp.r - c.modulus, stamp.c, stamp.kn)
    return Published(proc, msg, eps, delta, n, stamp, body[at + c.size:])


def decode(body: bytes, *, now: int) -> Body:
    """The message in ``body`` (timestamps decoded against clock ``now``, ms)."""
    if not body:
        raise MalformedDatagram("empty pub-sub body")
    kind = body[0]
    if kind == PUB:
        return _read_published(body, 1, now)
    if kind == FWD:
        merger, at = read_name(body, 1)
        if at + 8 > len(body):
            raise MalformedDatagram("forward truncated")
        (seq,) = _U64.unpack_from(body, at)
        return Forwarded(merger, seq, _read_published(body, at + 8, now))
    if kind == SUB:
        if len(body) < 2 or body[1] not in (ROLE_SUBSCRIBER, ROLE_MERGER):
            raise MalformedDatagram("bad subscription role")
        name, at = read_name(body, 2)
        if len(body) - at not in (0, TOKEN_BYTES):
            raise MalformedDatagram("trailing bytes")
        return Subscribe(body[1], name, body[at:])
    if kind == CHAL:
        if len(body) != 1 + TOKEN_BYTES:
            raise MalformedDatagram("challenge of the wrong size")
        return Challenge(body[1:])
    raise MalformedDatagram(f"unknown pub-sub message type {kind}")
