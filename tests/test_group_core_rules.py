"""The group core's rules one by one (``core/group/_member.py``), each pinned where a
one-line change would break it (mutants in ``scripts/mutate.py``, protocol ``group``):

- a Hypothesis property: under loss, duplication and reordering (any seed), every
  member delivers every sender's messages once and in order, no member releases a
  message another member has not delivered (checked at every ``Stable`` event by
  ``Net``), and every buffer drains;
- ``MAX_AHEAD``: a message that many past the next expected one is out of range, one
  less is held;
- ``max_buffer``: ``can_send`` is False with exactly ``max_buffer`` unstable messages;
- incarnations: a datagram of an older incarnation than the one a member knows is
  ignored (it neither rejoins nor resets the newer one).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_net_group_core import MS, Net
from timebound.core.group import MAX_AHEAD, GroupMember, Joined, Left
from timebound.core.group._wire import Head, encode_msg
from timebound.core.stability import AckMode, ClockMode
from timebound.core.wire import KIND_GROUP, FrameCodec
from timebound.errors import ProtocolUsageError


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(list(AckMode)),
       st.sampled_from(list(ClockMode)))
def test_stability_under_loss_duplication_and_reordering(seed: int, acks: AckMode,
                                                         clock: ClockMode) -> None:
    names = ["a", "b", "c"]
    rng = random.Random(seed)
    net = Net(names, seed=seed, loss=rng.choice((0.0, 0.1, 0.3)),
              dup=rng.choice((0.0, 0.2)), acks=acks, clock=clock)
    for i in range(40):
        net.send(rng.choice(names), b"%d" % i)
        net.run(rng.randint(0, 3) * MS)  # flights take 1-5 ms: they overtake each other
    net.run(2000 * MS)
    for name in names:
        for sender in names:
            seqs = [s for src, s in net.delivered[name] if src == sender]
            assert seqs == list(range(net.members[sender].statistics().sent))
        assert net.members[name].buffered == 0
        assert net.members[name].statistics().stable == net.members[name].statistics().sent


def _member(**options: int) -> GroupMember:
    return GroupMember("g", "b", ["a", "b"], FrameCodec(), incarnation=1, now=1000,
                       **options)  # type: ignore[arg-type]


def _msg(inc: int, seq: int, ts: int) -> bytes:
    return FrameCodec().seal(KIND_GROUP, encode_msg(Head("g", "a", inc), seq, ts, b"x"))


def test_a_message_max_ahead_past_the_next_is_out_of_range() -> None:
    member = _member()
    member.receive(_msg(5, MAX_AHEAD, 900), now=1000, source="a")
    assert member.statistics().out_of_range == 1
    member.receive(_msg(5, MAX_AHEAD - 1, 901), now=1000, source="a")
    assert member.statistics().out_of_range == 1  # held, waiting for 0..MAX_AHEAD-2
    assert member.peers["a"].ahead.keys() == {MAX_AHEAD - 1}


def test_can_send_is_false_with_max_buffer_unstable_messages() -> None:
    member = _member(max_buffer=2)
    member.send(b"1", now=1001)
    assert member.can_send()
    member.send(b"2", now=1002)
    assert not member.can_send() and member.buffered == 2
    with pytest.raises(ProtocolUsageError, match="buffer full"):
        member.send(b"3", now=1003)


def test_a_datagram_of_an_older_incarnation_is_ignored() -> None:
    member = _member()
    first = member.receive(_msg(5, 0, 900), now=1000, source="a")
    assert [type(e) for e in first.events] == [Joined, type(first.events[1])]
    restarted = member.receive(_msg(7, 0, 950), now=1001, source="a")  # a restarted
    assert any(isinstance(e, Left) for e in restarted.events)
    assert member.peers["a"].inc == 7 and member.peers["a"].expect == 1
    old = member.receive(_msg(5, 1, 960), now=1002, source="a")  # its old life's copy
    assert old.events == () and old.sends == ()
    assert member.peers["a"].inc == 7 and member.peers["a"].expect == 1
