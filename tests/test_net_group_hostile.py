"""Groups on a hostile network: forged frames without a key, spoofed
NACKs, a fuzz of a live member, answers to unvalidated addresses, secure defaults.

- One forged heartbeat claiming incarnation 2^64-1 used to make a member ignore the
  real one for good and acknowledge messages it never got: every field is now
  range-checked at receive time (``out_of_range``) and the stability theorem holds
  (checked at every ``Stable`` event) whatever forged frame with an out-of-range field
  is injected where (a Hypothesis property over hostile executions).
- A NACK is answered only from its member's configured address (and at most once per
  half NACK period): a spoofed one gets nothing.
- 20,000 random and mutated frames at a live member: no traceback, bounded state, a
  correct group afterwards. Bytes sent back to an address that is no member: none
  (the ratio is 0, key or not).
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.test_net_group_core import MS, Net
from tests.test_net_support import fake_public
from timebound.core.group import (
    DEFAULT_MAX_SKEW,
    LAMPORT_SLACK,
    MAX_AHEAD,
    SEQ_LIMIT,
    Delivered,
    Event,
    GroupMember,
)
from timebound.core.group._wire import Head, encode_heartbeat, encode_msg, encode_nack
from timebound.core.stability import AckMode, ClockMode, TimestampAck, VectorAck
from timebound.core.wire import KIND_GROUP, FrameCodec, Key, Keyring
from timebound.errors import UsageError
from timebound.net import _group
from timebound.net._group import Group

U64 = (1 << 64) - 1
KEY = b"k" * 32


def settle_everything(net: Net) -> None:
    """Run until quiet; every member then has every message of every sender, in
    order, and every buffer is empty (stability reached everywhere)."""
    net.run(1500 * MS)
    for name in net.names:
        for sender in net.names:
            seqs = [s for src, s in net.delivered[name] if src == sender]
            assert seqs == list(range(net.members[sender].statistics().sent)), (name, sender)
        assert net.members[name].buffered == 0, name


def forge(net: Net, kind: str, claim: str, target: str, big: int) -> bytes:
    """A frame claiming to come from ``claim`` with one field out of range (``kind``
    names which); ``big`` is how far out. Other fields are the real ones (an attacker
    reading the traffic knows them)."""
    real = net.members[claim]
    inc = real.head.inc
    now = net.now
    limit = now + DEFAULT_MAX_SKEW  # incarnations, physical timestamps
    stamps = limit
    if net.clock is ClockMode.LAMPORT:
        stamps = net.members[target].node.clock + LAMPORT_SLACK
    head = Head("g", claim, inc)
    nxt = real.next_seq
    if kind == "inc":
        body = encode_heartbeat(Head("g", claim, min(U64, limit + big)), nxt, nxt, now,
                                TimestampAck(claim, now))
    elif kind == "msg_ts":
        expect = net.members[target].peers[claim].expect
        body = encode_msg(head, expect, min(U64, stamps + big), b"forged")
    elif kind == "msg_seq":
        body = encode_msg(head, min(U64, SEQ_LIMIT + big), now, b"forged")
    elif kind == "promise":
        body = encode_heartbeat(head, nxt, nxt, min(U64, stamps + big), TimestampAck(claim, now))
    elif kind == "ack":
        body = encode_heartbeat(head, nxt, nxt, now, TimestampAck(claim, min(U64, stamps + big)))
    elif kind == "vector":
        body = encode_heartbeat(head, nxt, nxt, now,
                                VectorAck(claim, dict.fromkeys(net.names, min(U64, stamps + big))))
    elif kind == "vector_name":
        body = encode_heartbeat(head, nxt, nxt, now,
                                VectorAck(claim, {**dict.fromkeys(net.names, now), "zz": now}))
    elif kind == "next":
        body = encode_heartbeat(head, min(U64, SEQ_LIMIT + big), min(U64, SEQ_LIMIT + big),
                                now, TimestampAck(claim, now))
    else:
        assert kind == "nack"
        body = encode_nack(head, target, net.members[target].head.inc,
                           min(U64, SEQ_LIMIT + big), 256)
    return FrameCodec().seal(KIND_GROUP, body)


def inject(net: Net, dest: str, frame: bytes) -> None:
    """A forged datagram reaching ``dest`` now, from no member's address."""
    out = net.members[dest].receive(frame, now=net.now, source=None)
    net.events(dest, out.events)
    net.put(dest, out.sends)


def test_forged_heartbeat_with_incarnation_2_64_minus_1_is_dropped() -> None:
    """The finding: a's 3 messages are late to b (held back 25 ms, acks went on);
    then a heartbeat claiming a's incarnation is 2^64-1 reaches b. It used to make b
    take a's "new incarnation" with its current ack as entry (section 6), ignore the
    real a for good, and acknowledge the 3 messages it never got: a released them."""
    net = Net(["a", "b", "c"], seed=5)
    net.run(30 * MS)
    for i in range(3):
        net.send("a", b"%d" % i)
    for _ in range(25):  # a -> b held back (retransmissions too) while acks go on
        net.flights = [f for f in net.flights if not (f[4] == "a" and f[2] == "b")]
        net.run(1 * MS)
    inject(net, "b", forge(net, "inc", "a", "b", U64))
    for i in range(3, 6):
        net.send("a", b"%d" % i)
        net.run(2 * MS)
    settle_everything(net)  # Net.events checked the theorem at every Stable event
    assert net.members["b"].statistics().out_of_range == 1
    assert net.members["b"].peers["a"].inc == net.members["a"].head.inc


KINDS = ["inc", "msg_ts", "msg_seq", "promise", "ack", "vector", "vector_name", "next",
         "nack"]
step = st.one_of(
    st.tuples(st.just("send"), st.sampled_from(["a", "b", "c"])),
    st.tuples(st.just("run"), st.integers(0, 15)),
    st.tuples(st.just("forge"), st.sampled_from(KINDS), st.sampled_from(["a", "b", "c"]),
              st.sampled_from(["a", "b", "c"]), st.sampled_from([1, 1 << 20, U64])),
    st.tuples(st.just("junk"), st.sampled_from(["a", "b", "c"]), st.integers(5, 255),
              st.binary(max_size=60)),
)


@given(steps=st.lists(step, min_size=1, max_size=40),
       acks=st.sampled_from(list(AckMode)), clock=st.sampled_from(list(ClockMode)))
def test_forged_frames_never_break_stability(steps: list[tuple[Any, ...]], acks: AckMode,
                                             clock: ClockMode) -> None:
    """Hostile executions: forged frames (no key; one field out of range, the others
    real) and junk injected anywhere. At every Stable event every other member has
    delivered the message (``Net.events``); afterwards every message is delivered
    everywhere in order and stable: the forgeries changed nothing."""
    net = Net(["a", "b", "c"], seed=len(steps), acks=acks, clock=clock)
    net.run(25 * MS)
    forged = 0
    for s in steps:
        if s[0] == "send":
            if net.members[s[1]].can_send():
                net.send(s[1], b"m")
        elif s[0] == "run":
            net.run(s[1] * MS)
        elif s[0] == "forge":
            _, kind, claim, target, big = s
            if claim == target:
                continue
            inject(net, target, forge(net, kind, claim, target, big))
            forged += 1
        else:
            inject(net, s[1], FrameCodec().seal(KIND_GROUP, bytes((s[2],)) + s[3]))
    settle_everything(net)
    dropped = sum(m.statistics().out_of_range for m in net.members.values())
    assert dropped == forged


def _b_missed_three() -> tuple[Net, Any, bytes]:
    """a sent 3 messages b never got: the net, a, and b's NACK for them."""
    net = Net(["a", "b"])
    net.cut = {"b"}
    for i in range(3):
        net.send("a", b"%d" % i)
    a = net.members["a"]
    nack = FrameCodec().seal(KIND_GROUP, encode_nack(Head("g", "b", 1), "a", a.head.inc, 0, 3))
    return net, a, nack


def test_spoofed_nack_is_not_answered() -> None:
    net, a, nack = _b_missed_three()
    assert a.receive(nack, now=net.now, source=None).sends == ()  # no member's address
    assert a.receive(nack, now=net.now, source="a").sends == ()  # another member's
    out = a.receive(nack, now=net.now, source="b")
    assert [dest for dest, _ in out.sends] == ["b"] * 3  # to b's configured address
    assert a.receive(nack, now=net.now + 1, source="b").sends == ()  # at most once per
    assert a.statistics().unanswered == 3                          # half NACK period
    assert len(a.receive(nack, now=net.now + 6 * MS, source="b").sends) == 3


def test_a_nack_flood_from_a_members_address_draws_one_answer_per_half_period() -> None:
    """10,000 NACKs forged from b's own configured address over 100 ms (what an
    attacker who spoofs a member sends): a answers them at most once per half NACK
    period, so the bytes sent to b are bounded by time, not by the flood."""
    net, a, nack = _b_missed_three()
    half = a.nack_every // 2
    span = 100 * MS
    rounds = sent = 0
    for i in range(10_000):
        out = a.receive(nack, now=net.now + i * span // 10_000, source="b")
        rounds += bool(out.sends)
        sent += sum(len(datagram) for _dest, datagram in out.sends)
    assert 1 <= rounds <= span // half + 1
    assert a.statistics().unanswered == 10_000 - rounds
    assert sent <= rounds * 3 * 200  # three retransmissions of small messages a round
    print(f"NACK flood: 10,000 NACKs ({10_000 * len(nack):,} B) over 100 ms drew "
          f"{rounds} answers ({sent:,} B)")


# -- live ---------------------------------------------------------------------------


def mutate(rng: random.Random, frame: bytes, start: int) -> bytes:
    """A blind mutation of a valid frame: truncation, random bytes, a flipped bit in
    the header or names (``frame[:start]``; ``start``: where the incarnation begins)
    or in the top byte of a u64 field (so the value leaves its range), or a field
    after the incarnation overwritten with an absurd value. (A key is what stops
    forgeries whose every field is in range: see ``_member``.)"""
    choice = rng.randrange(5)
    if choice == 0:
        return frame[:rng.randrange(len(frame))]
    if choice == 1:
        return bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 80)))
    data = bytearray(frame)
    if choice == 2:
        i = rng.randrange(start)
        data[i] ^= 1 << rng.randrange(8)
    elif choice == 3 and len(data) >= start + 8:
        field = start + 8 * rng.randrange(max(1, (len(data) - start) // 8))
        if field < len(data):
            data[field] ^= 0x80 >> rng.randrange(2)
    else:
        at = start + 8 * rng.randrange(1, max(2, (len(data) - start) // 8))
        data[at:at + 8] = struct.pack(">Q", rng.choice([U64, SEQ_LIMIT, 1 << 63]))
    return bytes(data)


def collect_errors(loop: asyncio.AbstractEventLoop) -> list[Any]:
    errors: list[Any] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    return errors


async def started(names: list[str], **kwargs: Any) -> dict[str, Group]:
    local = {n: ("127.0.0.1", 0) for n in names}
    members = {n: Group("g", n, local, ack_every=0.01, nack_every=0.01, **kwargs)
               for n in names}
    for m in members.values():
        await m.start()
    real = {n: m.address for n, m in members.items()}
    for m in members.values():
        m.addresses.update(real)
    return members


def test_live_member_survives_a_fuzz_and_serves_afterwards(
        capfd: pytest.CaptureFixture[str]) -> None:
    count = 20_000
    names = ["a", "b", "c"]

    async def main() -> None:
        errors = collect_errors(asyncio.get_running_loop())
        members = await started(names)
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setblocking(False)
        try:
            await members["a"].send(b"before")
            await members["a"].wait_stable(timeout=10)
            rng = random.Random(7)
            a = members["a"].core
            templates = []  # (frame, where its u64 fields start)
            for claim in ("a", "c", "nobody"):
                head = Head("g", claim, a.head.inc if claim == "a" else 5)
                start = 1 + 2 + len("g") + len(claim) + 4  # frame header + names
                templates += [
                    (FrameCodec().seal(KIND_GROUP, encode_msg(head, 10**6, 1000,
                                                              b"x" * 20)), start),
                    (FrameCodec().seal(KIND_GROUP, encode_heartbeat(
                        head, 2, 1, 1000, TimestampAck(claim, 1000))), start),
                    (FrameCodec().seal(KIND_GROUP, encode_nack(head, "b", 9, 0, 4)),
                     start),
                ]
            b = members["b"]
            for i in range(count):
                frame, start = rng.choice(templates)
                try:
                    sock.sendto(mutate(rng, frame, start), b.address)
                except BlockingIOError:
                    pass
                if i % 50 == 0:  # paced: the point is what is read, not dropped
                    await asyncio.sleep(0.001)
            await asyncio.sleep(0.2)
            core = b.core
            stats = core.statistics()
            assert stats.malformed + stats.strangers + stats.out_of_range > count // 10
            for peer in core.peers.values():
                assert len(peer.ahead) <= MAX_AHEAD
            assert core.buffered <= core.max_buffer
            for i in range(20):
                await members["a"].send(b"after %d" % i)
            await members["a"].wait_stable(timeout=10)
            for n in ("b", "c"):
                got = [e.seq for e in drain(members[n]) if isinstance(e, Delivered)
                       and e.sender == "a"]
                assert got == list(range(21)), (n, got)
        finally:
            sock.close()
            for m in members.values():
                m.close(leave=False)
        assert errors == []

    asyncio.run(asyncio.wait_for(main(), 60))
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception" not in err


def drain(member: Group) -> list[Event]:
    queue = member._queue
    assert queue is not None
    events = []
    while not queue.empty():
        item = queue.get_nowait()
        if item is not None:
            events.append(item)
    return events


@pytest.mark.parametrize("key", [None, KEY])
def test_nothing_goes_back_to_an_address_that_is_no_member(key: bytes | None) -> None:
    """Every message type (and junk), sent to a live member from a socket that is no
    member (a spoofed victim): the bytes that reach that socket, per type, over the
    bytes it sent. The bound is 3; a group sends to members only: 0."""

    async def main() -> dict[str, float]:
        members = await started(["a", "b"], key=key)
        victim = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        victim.bind(("127.0.0.1", 0))
        victim.setblocking(False)
        ratios: dict[str, float] = {}
        try:
            await members["a"].send(b"y" * 1000)
            await members["a"].send(b"y" * 1000)
            a = members["a"].core
            codec = FrameCodec(Keyring(Key(key))) if key else FrameCodec()
            head = Head("g", "b", members["b"].core.head.inc)
            frames = {
                "MSG": codec.seal(KIND_GROUP, encode_msg(head, 0, 5, b"z")),
                "HB": codec.seal(KIND_GROUP, encode_heartbeat(head, 0, 0, 5,
                                                              TimestampAck("b", 5))),
                "NACK": codec.seal(KIND_GROUP, encode_nack(head, "a", a.head.inc, 0, 256)),
                "LEAVE": codec.seal(KIND_GROUP, bytes((4,)) + head_bytes(head)),
                "junk": b"\x01\x03\x00\x00junk",
            }
            for kind, frame in frames.items():
                for _ in range(20):
                    victim.sendto(frame, members["a"].address)
                await asyncio.sleep(0.1)
                back = 0
                while True:
                    try:
                        back += len(victim.recv(65536))
                    except BlockingIOError:
                        break
                ratios[kind] = back / (20 * len(frame))
        finally:
            victim.close()
            for m in members.values():
                m.close(leave=False)
        return ratios

    ratios = asyncio.run(asyncio.wait_for(main(), 30))
    assert max(ratios.values()) <= 3
    assert max(ratios.values()) == 0, ratios


def head_bytes(head: Head) -> bytes:
    from timebound.core.wire import encode_name
    return encode_name(head.group) + encode_name(head.member) + struct.pack(">Q", head.inc)


def test_group_refuses_a_public_address_without_a_key(
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    fake_public(monkeypatch, _group)

    async def main() -> None:
        members = {"a": ("192.0.2.1", 0), "b": ("127.0.0.1", 9)}
        g = Group("g", "a", members)
        with pytest.raises(UsageError, match="--host"):
            await g.start()
        assert g._transport is None  # closed
        g = Group("g", "a", members, insecure=True)
        await g.start()
        g.close(leave=False)
        g = Group("g", "a", members, key=KEY)
        await g.start()
        g.close(leave=False)

    asyncio.run(main())
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("timebound: warning: group listens on")


def test_service_id_separates_groups_sharing_a_key() -> None:
    def member(name: str, service: str) -> GroupMember:
        return GroupMember("g", name, ["a", "b"], FrameCodec(Keyring(Key(KEY)), service),
                           incarnation=1, now=10)

    a = member("a", "alpha")
    frame = a.send(b"x", now=20).sends[0][1]
    other = member("b", "beta")
    assert other.receive(frame, now=21, source="a").events == ()
    assert other.statistics().unauthenticated == 1
    same = member("b", "alpha")
    assert any(isinstance(e, Delivered) for e in same.receive(frame, now=21,
                                                              source="a").events)
    g = Group("g", "a", {"a": ("127.0.0.1", 0), "b": ("127.0.0.1", 9)}, key=KEY,
              service="alpha")
    assert g.core.codec.service == "alpha"
