"""Frames and RPC messages of ``docs/wire.md``: round trips, every truncation and
split, every byte flipped, unknown versions, HMAC with key rotation."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from timebound.core.rpc import (
    Ack,
    Call,
    Reason,
    Reply,
    ReplyAck,
    RpcService,
    Status,
    encode_call_payload,
)
from timebound.core.rpc._live_messages import (
    decode_call_payload,
    decode_refusal,
    decode_result,
    encode_refusal,
    encode_result,
)
from timebound.core.wire import (
    HEADER_BYTES,
    KIND_RPC,
    MAX_DATAGRAM,
    TAG_BYTES,
    VERSION,
    FrameCodec,
    Key,
    Keyring,
)
from timebound.errors import MalformedDatagram, ProtocolUsageError

K1 = Key(b"1" * 32)
K2 = Key(b"2" * 32)
TS = 1_700_000_000_000_000
CONN = "0123456789abcdef.7"


def _messages() -> list[bytes]:
    payload = encode_call_payload("incr", b"41")
    return [
        Call(CONN, TS, payload).encode(),
        Call(CONN, TS, None).encode(),
        Ack(CONN, TS).encode(),
        Reply(CONN, TS, encode_result(Status.OK, b"42")).encode(),
        ReplyAck(CONN, TS).encode(),
        encode_refusal(CONN, TS, Reason.DOWN),
    ]


def _service(keyring: Keyring | None = None) -> RpcService[str]:
    return RpcService(FrameCodec(keyring), rho=10**9, gc_every=10**6)


@pytest.mark.parametrize("keyring", [None, Keyring(K1)], ids=["plain", "hmac"])
def test_round_trip_of_every_frame(keyring: Keyring | None) -> None:
    codec = FrameCodec(keyring)
    for message in _messages():
        frame = codec.seal(KIND_RPC, message)
        assert frame[0] == VERSION == 2 and frame[1] == KIND_RPC
        opened = codec.open(frame)
        assert opened is not None and opened.body == message and opened.kind == KIND_RPC
    assert codec.malformed == codec.unauthenticated == 0


@pytest.mark.parametrize("keyring", [None, Keyring(K1)], ids=["plain", "hmac"])
def test_every_split_of_every_frame_is_dropped_and_counted(keyring: Keyring | None) -> None:
    """Every prefix and every suffix (the two halves of each split, fed as datagrams)
    is dropped by the server, counted, and leaves no state; the whole frame then works."""
    codec = FrameCodec(keyring)
    for message in _messages():
        frame = codec.seal(KIND_RPC, message)
        service = _service(keyring)
        for cut in range(len(frame)):
            for part in (frame[:cut], frame[cut:]):
                if part == frame:
                    continue
                out = service.receive(part, "peer", now=TS)
                assert out.sends == () and out.runs == ()
        stats = service.statistics()
        assert stats.table_size == 0 and stats.executions == 0
        assert stats.malformed + stats.unauthenticated == 2 * len(frame) - 1
    # And the whole CALL frame is served.
    service = _service(keyring)
    out = service.receive(codec.seal(KIND_RPC, _messages()[0]), "peer", now=TS)
    assert [(r.proc, r.args) for r in out.runs] == [("incr", b"41")]


def test_client_drops_every_truncation_too() -> None:
    from timebound.core.rpc import Policy, RpcCaller

    codec = FrameCodec(None)
    caller = RpcCaller("c", Policy(interval=10, give_up_after=100), codec)
    caller.call("incr", b"1", now=TS, conn=CONN)
    for message in _messages()[2:]:
        frame = codec.seal(KIND_RPC, message)
        for cut in range(len(frame)):
            out = caller.receive(frame[:cut], now=TS)
            assert out.outcomes == ()
    assert caller.client.outstanding()


def test_every_byte_flip_of_an_authenticated_frame_is_dropped() -> None:
    codec = FrameCodec(Keyring(K1))
    frame = codec.seal(KIND_RPC, _messages()[0])
    service = _service(Keyring(K1))
    for i in range(len(frame)):
        for bit in (0x01, 0x80):
            bad = bytearray(frame)
            bad[i] ^= bit
            assert service.receive(bytes(bad), "p", now=TS).runs == ()
    stats = service.statistics()
    assert stats.executions == 0 and stats.table_size == 0
    assert stats.malformed + stats.unauthenticated == 2 * len(frame)


def test_versions_flags_kinds_and_sizes() -> None:
    codec = FrameCodec(None)
    body = _messages()[0]
    good = codec.seal(KIND_RPC, body)
    assert codec.open(bytes((1,)) + good[1:]) is None and codec.unknown_version == 1  # v1
    assert codec.open(good[:1] + b"\x00" + good[2:]) is None  # kind 0
    assert codec.open(good[:2] + b"\x02" + good[3:]) is None  # unknown flag bit
    assert codec.open(good[:3] + b"\x05" + good[4:]) is None  # key id without a tag
    assert codec.open(b"\x01\x01\x00\x00" + b"x" * (MAX_DATAGRAM - 3)) is None
    assert codec.oversized == 1
    assert codec.malformed == 5
    with pytest.raises(ProtocolUsageError):
        codec.seal(KIND_RPC, b"x" * MAX_DATAGRAM)
    with pytest.raises(ProtocolUsageError):
        Key(b"short")


def test_authentication_modes() -> None:
    plain, keyed, other = FrameCodec(None), FrameCodec(Keyring(K1)), FrameCodec(Keyring(K2))
    body = _messages()[2]
    assert keyed.open(plain.seal(KIND_RPC, body)) is None  # no tag at a keyed receiver
    assert plain.open(keyed.seal(KIND_RPC, body)) is None  # a tag at a keyless one
    assert other.open(keyed.seal(KIND_RPC, body)) is None  # wrong key
    assert keyed.unauthenticated == plain.unauthenticated == other.unauthenticated == 1
    assert len(keyed.seal(KIND_RPC, body)) == HEADER_BYTES + len(body) + TAG_BYTES


def test_key_rotation_previous_key_accepted_for_its_grace_period_only() -> None:
    server_ring = Keyring(K2, previous=K1, previous_until=TS + 1000)
    service = _service(server_ring)
    old_client = FrameCodec(Keyring(K1))
    new_client = FrameCodec(Keyring(K2))
    call_old = old_client.seal(KIND_RPC, Call("a", TS, encode_call_payload("p", b"")).encode())
    out = service.receive(call_old, "old-peer", now=TS)
    assert len(out.runs) == 1
    # The reply to the old-key client is sealed with the key it used.
    done = service.complete(out.runs[0], Status.OK, b"r", now=TS + 1)
    assert old_client.open(done.sends[0].datagram, now=TS) is not None
    assert new_client.open(done.sends[0].datagram, now=TS) is None
    call_new = new_client.seal(KIND_RPC, Call("b", TS, encode_call_payload("p", b"")).encode())
    run = service.receive(call_new, "new-peer", now=TS).runs[0]
    reply = service.complete(run, Status.OK, b"r", now=TS + 2).sends[0].datagram
    assert new_client.open(reply) is not None
    # After the grace period the previous key is refused.
    late = old_client.seal(KIND_RPC, Call("c", TS + 2000, encode_call_payload("p", b"")).encode())
    assert service.receive(late, "old-peer", now=TS + 2000).runs == ()
    assert service.statistics().unauthenticated == 1


def test_bodies() -> None:
    assert decode_call_payload(encode_call_payload("é", b"x")) == ("é", b"x")
    assert decode_result(encode_result(Status.NO_PROCEDURE, b"m")) == (Status.NO_PROCEDURE, b"m")
    assert decode_refusal(encode_refusal("c", 5, Reason.EARLY)) == ("c", 5, Reason.EARLY)
    for bad in (b"", b"\x00x", b"\x05ab", b"\x01\xff"):
        with pytest.raises(MalformedDatagram):
            decode_call_payload(bad)
    refusal = encode_refusal("c", 5, Reason.STALE)
    for cut in range(len(refusal)):
        with pytest.raises(MalformedDatagram):
            decode_refusal(refusal[:cut])
    with pytest.raises(MalformedDatagram):
        decode_refusal(refusal[:-1] + b"\x09")
    with pytest.raises(ProtocolUsageError):
        encode_call_payload("", b"")


@given(st.binary(max_size=200))
def test_random_datagrams_never_raise(data: bytes) -> None:
    for keyring in (None, Keyring(K1)):
        service = _service(keyring)
        service.receive(data, "p", now=TS)
        service.receive(bytes((1, 1, 0, 0)) + data, "p", now=TS)
        service.receive(os.urandom(4) + data, "p", now=TS)
