"""A channel whose receiver lost it: the REFUSE of a session not held.

A receiver answers a segment of a session it does not hold with a REFUSE naming the
segment (``UNKNOWN_SESSION``). Its sender ends the channel ``lost`` only for a
segment sent after the OPEN's ACK came (the receiver held the session then, so it
lost it: a restart, an idle expiry, an eviction); a segment that overtook its OPEN
is refused too and must not end the channel (it is retransmitted once the OPEN is
in). Either way the reliable messages not acknowledged stay listed, and the sender
knows when the receiver last answered. Live: a listener restarted on the same
storage ends a channel ``lost`` at once, not after ``give_up``.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from tests.test_net_channel_core import scmp
from timebound.core.channel import (
    UNKNOWN_SESSION,
    ChannelReceiver,
    ChannelSender,
    Refuse,
    decode,
)
from timebound.core.slotted import Kind
from timebound.core.wire import FrameCodec
from timebound.net._channel import Channel, ChannelFailed, ChannelListener

MS = 1000


def _refusals(receiver: ChannelReceiver[str], frame: bytes, now: int) -> list[Refuse]:
    out = receiver.receive(frame, "s", now=now)
    codec = FrameCodec()
    msgs = []
    for o in out.sends:
        opened = codec.open(o.datagram)
        assert opened is not None
        msgs.append(decode(opened.body))
    return [m for m in msgs if isinstance(m, Refuse)]


def test_a_segment_that_overtook_its_open_does_not_end_the_channel() -> None:
    codec = FrameCodec()
    sender = ChannelSender("c", 1000 * MS, codec)
    receiver: ChannelReceiver[str] = ChannelReceiver(codec, scmp(start=0))
    _s0, open_frame = sender.send(b"first", Kind.R, now=1000 * MS)
    _s1, data = sender.send(b"second", Kind.R, now=1000 * MS)
    # The DATA arrives first: refused, naming it; the sender keeps going.
    (early,) = _refusals(receiver, data, 1001 * MS)
    assert early.reason == UNKNOWN_SESSION and early.seq == 1
    refuse_early = next(o.datagram for o in receiver.receive(data, "s", now=1001 * MS).sends)
    sender.receive(refuse_early, now=1002 * MS)
    assert sender.failed is None
    # The OPEN arrives, its ACK comes back; the late copy of the early REFUSE still
    # does not end the channel (its segment was sent before the OPEN's ACK came).
    for o in receiver.receive(open_frame, "s", now=1003 * MS).sends:
        sender.receive(o.datagram, now=1004 * MS)
    assert sender.opened
    sender.receive(refuse_early, now=1005 * MS)
    assert sender.failed is None and sender.heard == 1005 * MS
    assert sender.unacked_ids() == (1,)


def test_a_receiver_that_lost_the_session_ends_the_channel_lost() -> None:
    codec = FrameCodec()
    sender = ChannelSender("c", 1000 * MS, codec)
    receiver: ChannelReceiver[str] = ChannelReceiver(codec, scmp(start=0))
    _s0, open_frame = sender.send(b"first", Kind.R, now=1000 * MS)
    for o in receiver.receive(open_frame, "s", now=1001 * MS).sends:
        sender.receive(o.datagram, now=1002 * MS)
    restarted: ChannelReceiver[str] = ChannelReceiver(codec, scmp(start=2000 * MS))
    seqs = [sender.send(b"line %d" % i, Kind.R, now=1003 * MS) for i in range(3)]
    for seq, frame in seqs[:2]:
        (refusal,) = _refusals(restarted, frame, 2001 * MS)
        assert refusal.seq == seq
        out = restarted.receive(frame, "s", now=2001 * MS)
        for o in out.sends:
            sender.receive(o.datagram, now=2002 * MS)
    assert sender.failed == "lost"
    assert sender.unacked_ids() == (1, 2, 3)  # none of them acknowledged
    assert sender.handle_timer(now=10**9) == ()  # nothing sent after the end


def test_a_refuse_naming_a_segment_is_only_for_reason_5() -> None:
    import pytest

    from timebound.core.channel import encode_refuse
    from timebound.errors import MalformedDatagram, ProtocolUsageError

    assert decode(encode_refuse("c", 5, UNKNOWN_SESSION, 7)) == Refuse("c", 5, 5, 7)
    assert decode(encode_refuse("c", 5, 2)) == Refuse("c", 5, 2)
    for bad in ((2, 7), (UNKNOWN_SESSION, None), (6, None)):
        with pytest.raises(ProtocolUsageError):
            encode_refuse("c", 5, bad[0], bad[1])
    for body in (encode_refuse("c", 5, 2) + bytes(8),
                 encode_refuse("c", 5, UNKNOWN_SESSION, 7)[:-1]):
        with pytest.raises(MalformedDatagram):
            decode(body)


def test_live_a_listener_restarted_on_its_storage_ends_the_channel_lost(
        tmp_path: Path) -> None:
    """Lines sent through a listener that is closed and started again on the same
    port and storage: the channel ends ``lost`` within a second (not after its 10 s
    ``give_up``), listing the lines not acknowledged."""
    storage = str(tmp_path / "latest.json")

    async def main() -> tuple[ChannelFailed, float, int]:
        first = ChannelListener(storage=storage)
        await first.start()
        port = first.address[1]
        channel = Channel(first.address, give_up=10.0)
        await channel.open()
        try:
            for i in range(5):
                await channel.send(b"before %d" % i, "R")
            await channel.drain(timeout=5.0)
            await first.aclose()
            second = ChannelListener(port=port, storage=storage)
            await second.start()
            try:
                began = time.monotonic()
                try:
                    for i in range(5):
                        await channel.send(b"after %d" % i, "R")
                    await channel.drain(timeout=8.0)
                except ChannelFailed as exc:
                    return exc, time.monotonic() - began, second.statistics()[
                        "unknown_session"]
                raise AssertionError("the channel did not fail")
            finally:
                await second.aclose()
        finally:
            channel.close()

    failure, took, refused = asyncio.run(main())
    print(f"lost after {took:.3f} s; unacknowledged {failure.unacknowledged}; "
          f"heard {failure.heard_ago} s ago; the new listener refused {refused}")
    assert failure.reason == "lost" and took < 2.0
    assert failure.unacknowledged and set(failure.unacknowledged) <= set(range(5, 10))
    assert failure.heard_ago is not None and failure.heard_ago < 2.0


def test_a_listener_creating_its_storage_speaks_of_channel_openings(
        tmp_path: Path, capsys: object) -> None:
    """The one line a new storage file gets names what it refuses: a channel
    listener refuses openings, an RPC server calls."""
    from timebound.net._server import RpcServer

    ChannelListener(storage=str(tmp_path / "channel.json"))
    RpcServer({}, storage=str(tmp_path / "rpc.json"))
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    lines = err.splitlines()
    assert len(lines) == 2, err
    assert "channel.json: channel openings stamped before this start" in lines[0]
    assert "rpc.json: calls stamped before this start" in lines[1]
