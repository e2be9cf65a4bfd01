"""Wire format of the RPC messages (``timebound.core.rpc._messages``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from timebound.core.rpc import MAX_TS, Ack, Call, Reply, ReplyAck, decode
from timebound.errors import MalformedDatagram, ProtocolUsageError

conns = st.text(min_size=1, max_size=20).filter(lambda s: len(s.encode("utf-8")) <= 255)
stamps = st.integers(min_value=1, max_value=MAX_TS)
bodies = st.binary(max_size=64)

messages = st.one_of(
    st.builds(Call, conns, stamps, st.one_of(st.none(), bodies)),
    st.builds(Ack, conns, stamps),
    st.builds(Reply, conns, stamps, bodies),
    st.builds(ReplyAck, conns, stamps),
)


@given(messages)
def test_round_trip(message: Call | Ack | Reply | ReplyAck) -> None:
    assert decode(message.encode()) == message


@given(messages, st.data())
def test_every_truncation_and_extension_is_rejected(message: object, data: st.DataObject) -> None:
    raw = message.encode()  # type: ignore[attr-defined]
    for cut in range(len(raw)):
        with pytest.raises(MalformedDatagram):
            decode(raw[:cut])
    extra = data.draw(st.binary(min_size=1, max_size=4))
    with pytest.raises(MalformedDatagram):
        decode(raw + extra)


@given(st.binary(max_size=40))
def test_garbage_raises_only_malformed(raw: bytes) -> None:
    try:
        decode(raw)
    except MalformedDatagram:
        pass


def test_exact_encoding() -> None:
    assert Call("c", 258, b"xy").encode() == b"\x01\x01c" + (258).to_bytes(8, "big") + b"\x00\x00\x00\x02xy"
    assert Call("c", 1, None).encode() == b"\x02\x01c" + (1).to_bytes(8, "big")
    assert Ack("c", 1).encode()[0] == 3
    assert Reply("c", 1, b"").encode() == b"\x04\x01c" + (1).to_bytes(8, "big") + b"\x00" * 4
    assert ReplyAck("c", 1).encode()[0] == 5


_GOOD_TS = (7).to_bytes(8, "big")


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\x01",
        b"\x00\x01c" + _GOOD_TS,  # type byte 0
        b"\x06\x01c" + _GOOD_TS,  # type byte 6
        b"\xff\x01c" + _GOOD_TS,
        b"\x03\x00" + _GOOD_TS,  # empty connection id
        b"\x03\x05c" + _GOOD_TS,  # conn length beyond the datagram
        b"\x03\x01\xff" + _GOOD_TS,  # not UTF-8
        b"\x03\x01c" + b"\x00" * 8,  # ts 0
        b"\x03\x01c" + _GOOD_TS + b"\x00",  # trailing byte
        b"\x04\x01c" + _GOOD_TS + b"\x00\x00\x00\x03ab",  # body length too long
        b"\x04\x01c" + _GOOD_TS + b"\x00\x00\x00\x01ab",  # body length too short
        b"\x01\x01c" + _GOOD_TS + b"\x00\x00",  # body length cut
    ],
)
def test_malformed(raw: bytes) -> None:
    with pytest.raises(MalformedDatagram):
        decode(raw)


@pytest.mark.parametrize(
    "make",
    [lambda: Ack("", 1), lambda: Ack("c", 0), lambda: Ack("c", MAX_TS + 1),
     lambda: Call("x" * 256, 1, b""), lambda: ReplyAck("c", -1)],
)
def test_constructors_validate(make: object) -> None:
    with pytest.raises(ProtocolUsageError):
        make()  # type: ignore[operator]
