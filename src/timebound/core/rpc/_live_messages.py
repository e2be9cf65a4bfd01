"""The live RPC's own messages and payload formats (SCMP paper section 3.1 on a real
network; the service and the caller that use them: ``_live`` and ``_caller``).

Every datagram of the live RPC is a ``timebound.core.wire`` frame of kind
``KIND_RPC`` whose body is one RPC message followed, when a server sends it, by the
server's incarnation id (``incarnation:u64``; ``split_incarnation``). The message is
the CALL, truncated CALL, ACK, REPLY or REPLY-ACK of Fig. 3-1 (``_messages``, type
bytes 1-5), or one of three messages the paper's server does not have::

    6 REFUSE     type:u8  conn_len:u8  conn  ts:u64  reason:u8   (1 stale, 2 early,
                                                                  3 down, 4 overloaded)
    7 CHALLENGE  type:u8  conn_len:u8  conn  ts:u64  token:24    (server -> client)
    8 VALIDATE   type:u8  conn_len:u8  conn  ts:u64  token:24    (client -> server)

A token is ``issued:u64 mac:16``: what it proves is the service's rule ("No
amplification" in ``_live``). Inside the messages of Fig. 3-1 the live RPC gives the
opaque bodies a shape:

- *Procedures.* A CALL's payload is ``proc_len:u8 proc:UTF-8 budget_ms:u32 mark:u64
  args`` (``budget_ms`` 0: no deadline; ``mark`` 0: unmarked; the rules they carry
  are the service's, "Deadlines" and "Incarnations" in ``_live``). A CALL whose
  payload does not parse is malformed and dropped *before* SCMP sees it
  (``_call_procedure``), so it never takes an at-most-once slot.
- *Results.* A REPLY's result is ``status:u8 data`` (``Status``: 0 ok, 1 the
  handler raised: ``data`` is its UTF-8 message, 2 no such procedure, 3 expired).

Every decoder raises ``MalformedDatagram`` on anything else: a wrong length, an
unknown type or reason, an empty or non-UTF-8 connection id, ``ts = 0``. Pinned by
``tests/test_net_wire.py`` and ``tests/test_rpc_hostile.py``; ``docs/wire.md``
documents the formats for other implementations.
"""

from __future__ import annotations

import enum
import struct
from typing import Final

from timebound.core.rpc._messages import Call
from timebound.errors import MalformedDatagram, ProtocolUsageError

#: Type byte of a REFUSE message (after the five of ``_messages``).
REFUSE_TYPE: Final = 6
#: Type byte of a CHALLENGE (server -> client: validate your address).
CHALLENGE_TYPE: Final = 7
#: Type byte of a VALIDATE (client -> server: the challenge's token, echoed).
VALIDATE_TYPE: Final = 8
#: Bytes of an address-validation token: issue time (u64) and a 16-byte MAC.
TOKEN_BYTES: Final = 24
#: Largest time budget a CALL carries, in milliseconds (u32).
MAX_BUDGET_MS: Final = (1 << 32) - 1
#: Longest procedure name, in UTF-8 bytes.
MAX_PROC_BYTES: Final = 255
#: Bytes of the incarnation id that ends every message a server sends.
INCARNATION_BYTES: Final = 8
#: Largest incarnation id (u64); 0 is no incarnation (marks off, an unmarked call).
MAX_INCARNATION: Final = (1 << 64) - 1
#: The read-only built-in answering a server's counters as JSON.
STATS_PROCEDURE: Final = "timebound.stats"
#: Bytes of arguments a caller pads a read-only built-in's CALL to (its answer is at
#: most 3x the CALL, validated or not: "Read-only built-ins" in ``_live``).
READONLY_ARGS_BYTES: Final = 600
#: The read-only built-ins a caller pads (``RpcCaller.call``).
READONLY_PADDED: Final = frozenset({STATS_PROCEDURE})

_TS: Final = struct.Struct(">Q")
_U32: Final = struct.Struct(">I")
_NO_BUDGET: Final = bytes(4)
_NO_MARK: Final = bytes(8)
#: Bytes after a CALL payload's name: the budget (u32) and the mark (u64).
_AFTER_NAME: Final = 12


class Reason(enum.Enum):
    """Why a server refused a call (the REFUSE reason byte)."""

    STALE = 1
    EARLY = 2
    DOWN = 3
    OVERLOADED = 4

    def __str__(self) -> str:
        return self.name.lower()


class Status(enum.IntEnum):
    """The first byte of a REPLY's result."""

    OK = 0
    ERROR = 1
    NO_PROCEDURE = 2
    #: The call was not started: its deadline had passed by the server's clock.
    EXPIRED = 3


_STATUSES: Final = tuple(Status)
#: Each status's byte, by status value (``Status`` is an ``IntEnum``: it indexes).
_STATUS_BYTES: Final = tuple(bytes((status,)) for status in _STATUSES)
_LAST_STATUS: Final = len(_STATUSES) - 1


# -- bodies ----------------------------------------------------------------------


def encode_call_payload(proc: str, args: bytes, budget_ms: int = 0, mark: int = 0) -> bytes:
    """``proc_len proc budget_ms:u32 mark:u64 args`` (``budget_ms`` 0: no deadline;
    ``mark`` 0: unmarked)."""
    raw = proc.encode("utf-8")
    if not 1 <= len(raw) <= MAX_PROC_BYTES:
        raise ProtocolUsageError(f"procedure name must be 1..{MAX_PROC_BYTES} UTF-8 bytes")
    if not 0 <= budget_ms <= MAX_BUDGET_MS:
        raise ProtocolUsageError(f"budget_ms must be in [0, {MAX_BUDGET_MS}], got {budget_ms}")
    if not 0 <= mark <= MAX_INCARNATION:
        raise ProtocolUsageError(f"mark must be in [0, {MAX_INCARNATION}], got {mark}")
    return bytes((len(raw),)) + raw + _U32.pack(budget_ms) + _TS.pack(mark) + args


def decode_call_payload(payload: bytes) -> tuple[str, bytes]:
    """``(proc, args)`` of a CALL payload; ``MalformedDatagram`` if it does not parse."""
    if not payload or payload[0] == 0 or len(payload) < 1 + _AFTER_NAME + payload[0]:
        raise MalformedDatagram("call payload does not hold a procedure name, budget "
                                "and mark")
    end = 1 + payload[0]
    try:
        proc = payload[1:end].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedDatagram("procedure name is not UTF-8") from exc
    return proc, payload[end + _AFTER_NAME:]


def call_budget_ms(payload: bytes) -> int:
    """The time budget (ms; 0: none) of a CALL payload that ``decode_call_payload``
    accepts."""
    return int(_U32.unpack_from(payload, 1 + payload[0])[0])


def call_mark(payload: bytes) -> int:
    """The incarnation mark (0: unmarked) of a CALL payload that
    ``decode_call_payload`` accepts."""
    return int(_TS.unpack_from(payload, 5 + payload[0])[0])


def split_incarnation(message: bytes) -> tuple[bytes, int]:
    """``(message, incarnation)`` of a message a server sent (its last
    ``INCARNATION_BYTES``); ``MalformedDatagram`` if it is too short to hold one."""
    if len(message) <= INCARNATION_BYTES:
        raise MalformedDatagram("server message without an incarnation")
    at = len(message) - INCARNATION_BYTES
    return message[:at], int(_TS.unpack_from(message, at)[0])


def token_message(kind: int, header: bytes, token: bytes) -> bytes:
    """A CHALLENGE or a VALIDATE (``kind``): a call's ``type conn_len conn ts``
    header with its type byte replaced by ``kind``, then the token."""
    return bytes((kind,)) + header[1:] + token


def _call_ids(message: bytes, kinds: tuple[int, ...], tail: int,
              what: str) -> tuple[str, int, int]:
    """``(conn, ts, end)`` of a live-only message (REFUSE, CHALLENGE, VALIDATE) of
    one of ``kinds``: ``type conn_len conn ts`` then exactly ``tail`` bytes from
    ``end``; ``MalformedDatagram`` otherwise."""
    size = len(message)
    if size < 2 or message[0] not in kinds or message[1] == 0:
        raise MalformedDatagram(f"not a {what}")
    at = 2 + message[1]
    end = at + _TS.size
    if size != end + tail:
        raise MalformedDatagram(f"{what} of the wrong length")
    try:
        conn = message[2:at].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedDatagram("connection id is not UTF-8") from exc
    (ts,) = _TS.unpack_from(message, at)
    if ts == 0:
        raise MalformedDatagram(f"{what} with timestamp 0")
    return conn, ts, end


def decode_challenge(message: bytes) -> tuple[str, int, bytes]:
    """``(conn, ts, token)`` of a CHALLENGE or VALIDATE; ``MalformedDatagram``
    otherwise."""
    conn, ts, end = _call_ids(message, (CHALLENGE_TYPE, VALIDATE_TYPE), TOKEN_BYTES,
                              "challenge")
    return conn, ts, message[end:]


def encode_result(status: Status, data: bytes) -> bytes:
    return bytes((status,)) + data


def decode_result(result: bytes) -> tuple[Status, bytes]:
    if not result or result[0] > Status.EXPIRED:
        raise MalformedDatagram("reply result has no valid status byte")
    return Status(result[0]), result[1:]


def encode_refusal(conn: str, ts: int, reason: Reason) -> bytes:
    Call(conn, ts, None)  # validates conn and ts
    raw = conn.encode("utf-8")
    return bytes((REFUSE_TYPE, len(raw))) + raw + _TS.pack(ts) + bytes((reason.value,))


def decode_refusal(message: bytes) -> tuple[str, int, Reason]:
    """``(conn, ts, reason)`` of a REFUSE message; ``MalformedDatagram`` otherwise."""
    conn, ts, end = _call_ids(message, (REFUSE_TYPE,), 1, "refusal")
    reason = message[end]
    if not 1 <= reason <= len(Reason):
        raise MalformedDatagram("refusal with an unknown reason")
    return conn, ts, Reason(reason)


def _call_procedure(message: bytes) -> str | None:
    """The procedure named by a CALL message's payload, or None if the payload does
    not start with a well-formed name and budget (the rest of the message is checked by
    ``_messages.parse``)."""
    size = len(message)
    if size < 2:
        return None
    at = 2 + message[1] + 8 + 4
    if size <= at:
        return None
    n = message[at]
    if n == 0 or size < at + 1 + _AFTER_NAME + n:  # the name, the budget and the mark
        return None
    try:
        return message[at + 1:at + 1 + n].decode("utf-8")
    except UnicodeDecodeError:
        return None
