"""Boundaries of the frame codec that the other wire tests do not pin, as properties
(each one written for a mutant of ``scripts/mutate.py`` that survived them):

- the previous key of a rotation is accepted at every tick before ``previous_until``
  and refused from that tick on (a grace period ``[.., previous_until)``);
- a tagged frame too short to hold its tag is *malformed*, never *unauthenticated*,
  with or without a keyring, whatever its body;
- a frame with any flag bit other than ``FLAG_AUTH`` is malformed;
- a sealed frame whose tag (or any byte it covers) was changed is unauthenticated.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from timebound.core.wire import (
    FLAG_AUTH,
    HEADER_BYTES,
    KIND_RPC,
    TAG_BYTES,
    VERSION,
    FrameCodec,
    Key,
    Keyring,
)

OLD = Key(b"o" * 16)
NEW = Key(b"n" * 16)


@given(until=st.integers(0, 10**6), offset=st.integers(-3, 3),
       body=st.binary(max_size=40))
def test_previous_key_is_accepted_exactly_before_previous_until(
    until: int, offset: int, body: bytes
) -> None:
    now = max(0, until + offset)
    receiver = FrameCodec(Keyring(NEW, previous=OLD, previous_until=until))
    frame = FrameCodec(Keyring(OLD)).seal(KIND_RPC, body)
    opened = receiver.open(frame, now=now)
    if now < until:
        assert opened is not None and opened.key == OLD and opened.body == body
    else:
        assert opened is None
        assert receiver.statistics().unauthenticated == 1


@given(size=st.integers(HEADER_BYTES, HEADER_BYTES + TAG_BYTES - 1),
       keyed=st.booleans(), data=st.data())
def test_a_tagged_frame_shorter_than_its_tag_is_malformed(
    size: int, keyed: bool, data: st.DataObject
) -> None:
    rest = data.draw(st.binary(min_size=size - HEADER_BYTES, max_size=size - HEADER_BYTES))
    datagram = bytes((VERSION, KIND_RPC, FLAG_AUTH, NEW.id)) + rest
    codec = FrameCodec(Keyring(NEW) if keyed else None)
    assert codec.open(datagram, now=0) is None
    stats = codec.statistics()
    assert (stats.malformed, stats.unauthenticated) == (1, 0)


@given(flags=st.integers(0, 255).filter(lambda f: f & ~FLAG_AUTH),
       body=st.binary(max_size=40), keyed=st.booleans())
def test_unknown_flag_bits_are_malformed(flags: int, body: bytes, keyed: bool) -> None:
    sealed = FrameCodec(Keyring(NEW) if keyed else None).seal(KIND_RPC, body)
    datagram = sealed[:2] + bytes((flags,)) + sealed[3:]
    codec = FrameCodec(Keyring(NEW) if keyed else None)
    assert codec.open(datagram, now=0) is None
    assert codec.statistics().malformed == 1


@given(body=st.binary(max_size=40), data=st.data())
def test_a_changed_byte_under_the_tag_is_unauthenticated(body: bytes,
                                                          data: st.DataObject) -> None:
    sealed = FrameCodec(Keyring(NEW)).seal(KIND_RPC, body)
    where = data.draw(st.sampled_from([1, *range(HEADER_BYTES, len(sealed))]), label="at")
    flip = data.draw(st.integers(1, 255), label="xor")
    changed = bytearray(sealed)
    changed[where] ^= flip
    codec = FrameCodec(Keyring(NEW))
    opened = codec.open(bytes(changed), now=0)
    assert opened is None
    assert codec.statistics().opened == 0
