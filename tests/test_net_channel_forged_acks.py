"""Forged and replayed ACKs at a channel's sending end, live on loopback.

The sending end's socket is connected to the listener's address, so only datagrams
from that address reach it; the attacker here holds that address (a socket bound
where the sender sends, standing for anyone who can forge the listener's source).
It reads the sender's segments (an on-path attacker: it learns the session and the
sequence numbers) and answers with ACKs of its own, acknowledging every reliable
message that never reached a listener.

- With a key, a forged ACK does not verify: it is counted ``unauthenticated`` and
  acknowledges nothing, and an authentic ACK replayed from another session of the
  same key is ignored (another session's). The sender keeps retransmitting, and
  reports the channel failed after ``give_up``: no reliable message is taken for
  delivered that was not.
- Without a key nothing tells a forged ACK from the listener's: the sender takes
  the messages for delivered. This is the rule that cannot hold without a key
  (docs/net.md says so; the listener refuses a non-loopback address without a key
  unless ``--insecure``, which warns).
- The sender answers nothing it receives, so forged ACKs draw no bytes at all.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from timebound.core.channel import Segment, decode, encode_ack
from timebound.core.wire import KIND_CHANNEL, FrameCodec, Key, Keyring
from timebound.net._channel import Channel, ChannelFailed

KEY = b"k" * 32
OTHER = b"o" * 32
LINES = 30


def _forged_acks(codec: FrameCodec, segments: list[bytes]) -> list[bytes]:
    """Every ACK an attacker can make of the ``segments`` it read: acknowledging all
    of them, sealed with ``codec`` (no key, or a key that is not the channel's)."""
    opened = [FrameCodec(Keyring(Key(KEY))).open(s) or FrameCodec().open(s) for s in segments]
    msgs = [decode(o.body) for o in opened if o is not None]
    segs = [m for m in msgs if isinstance(m, Segment)]
    assert segs, "the attacker read no segment"
    conn, ts, top = segs[0].conn, segs[0].ts, max(m.seq for m in segs)
    return [codec.seal(KIND_CHANNEL, encode_ack(conn, ts, top + 1, ()))]


async def _attack(key: bytes | None, forge_with: FrameCodec,
                  replay: list[bytes]) -> tuple[dict[str, int], str | None, int]:
    """A channel sends LINES reliable lines towards an address the attacker holds;
    the attacker forges ACKs (``forge_with``) and replays ``replay``. Returns the
    sender's statistics, why it failed (None: it took every line for delivered) and
    the bytes the attacker received after its first forged ACK."""
    loop = asyncio.get_running_loop()
    attacker = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    attacker.bind(("127.0.0.1", 0))
    attacker.setblocking(False)
    failed: str | None = None
    received_after = 0
    try:
        channel = Channel(attacker.getsockname(), key=key, give_up=0.6, min_rto=0.02)
        await channel.open()
        try:
            for i in range(LINES):
                await channel.send(b"line %d" % i, "R")
            segments = [await asyncio.wait_for(loop.sock_recv(attacker, 65536), 2.0)
                        for _ in range(LINES)]
            forged = _forged_acks(forge_with, segments) + replay
            target = channel._transport.get_extra_info("sockname")  # type: ignore[union-attr]
            for _ in range(20):
                for frame in forged:
                    attacker.sendto(frame, target)
                await asyncio.sleep(0.005)
            try:
                await channel.drain(timeout=5.0)
            except ChannelFailed as exc:
                failed = exc.reason
            while True:
                try:
                    attacker.recv(65536)
                except BlockingIOError:
                    break
                received_after += 1  # retransmissions (counted, not answers)
            return channel.statistics(), failed, received_after
        finally:
            channel.close()
    finally:
        attacker.close()


def _authentic_ack_of_another_session() -> bytes:
    """An ACK the real listener sealed with the key for an earlier session."""
    return FrameCodec(Keyring(Key(KEY))).seal(KIND_CHANNEL, encode_ack("old", 1, 10**6, ()))


@pytest.mark.parametrize("forger", ["no key", "another key"])
def test_with_a_key_forged_acks_acknowledge_nothing(forger: str) -> None:
    codec = FrameCodec() if forger == "no key" else FrameCodec(Keyring(Key(OTHER)))
    stats, failed, retransmitted = asyncio.run(
        _attack(KEY, codec, [_authentic_ack_of_another_session()]))
    print(f"keyed channel, ACKs forged with {forger}: unauthenticated "
          f"{stats['unauthenticated']}, acks taken {stats['acks']}, failed {failed!r}")
    assert failed == "timeout"  # nothing taken for delivered: the sender says so
    assert stats["acks"] == 0 and stats["unacked"] == LINES  # the replayed one ignored too
    assert stats["unauthenticated"] >= 10
    assert retransmitted > 0  # it kept retransmitting the lines


def test_without_a_key_a_forged_ack_is_taken_for_the_listeners() -> None:
    """The documented limit: keyless, an on-path forger acknowledges every line."""
    stats, failed, _ = asyncio.run(_attack(None, FrameCodec(), []))
    print(f"keyless channel, forged ACKs: failed {failed!r}, unauthenticated "
          f"{stats['unauthenticated']}")
    assert failed is None and stats["unacked"] == 0 and stats["acks"] >= 1
