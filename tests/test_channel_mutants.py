"""Channel cores (``timebound.core.channel``): boundaries the pair harness of
``tests/test_net_channel_core.py`` does not reach, as properties (each written for a
mutant of ``scripts/mutate.py`` that survived it, or that only hung it):

- a sender that restarts under the same connection id with a newer timestamp opens a
  new session (through SCMP): its messages are delivered, in order, and nothing of
  the old session -- not even its frames replayed afterwards -- is delivered into it;
- a sender with unacknowledged data and no ack progress fails with ``timeout``
  exactly ``give_up`` ticks after its last progress, not a tick earlier, and
  ``next_deadline`` never lies beyond that tick;
- back-pressure: with nothing acknowledged, exactly ``window`` messages can be sent.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from timebound.core.atmostonce import Fixed, MemoryStorage, Receiver, StableLatest
from timebound.core.channel import ChannelReceiver, ChannelSender
from timebound.core.slotted import Kind
from timebound.core.wire import FrameCodec

MS = 1000
KINDS = [Kind.FR, Kind.R, Kind.F, Kind.N]


def scmp() -> Receiver:
    return Receiver(Fixed(60_000 * MS), gc_every=1000 * MS,
                    resilience=StableLatest(MemoryStorage(), 2000 * MS, 1000 * MS))


@given(first=st.lists(st.sampled_from(KINDS), min_size=1, max_size=12),
       second=st.lists(st.sampled_from(KINDS), min_size=1, max_size=12),
       gap=st.integers(1, 50))
def test_restarted_sender_opens_a_new_session(first: list[Kind], second: list[Kind],
                                              gap: int) -> None:
    receiver: ChannelReceiver[str] = ChannelReceiver(FrameCodec(), scmp())
    old = ChannelSender("c", 5 * MS, FrameCodec(), window=64)
    now = 5 * MS
    old_frames = []
    for i, kind in enumerate(first):
        _, frame = old.send(b"old%d" % i, kind, now=now)
        old_frames.append(frame)
        receiver.receive(frame, "p", now=now)
    now += gap
    new = ChannelSender("c", 5 * MS + gap, FrameCodec(), window=64)
    delivered = []
    for i, kind in enumerate(second):
        _, frame = new.send(b"new%d" % i, kind, now=now)
        delivered.extend(receiver.receive(frame, "p", now=now).deliveries)
    for frame in old_frames:  # the old session's frames, replayed
        delivered.extend(receiver.receive(frame, "p", now=now).deliveries)
    assert [d.data for d in delivered] == [b"new%d" % i for i in range(len(second))]
    assert receiver.statistics().opens == 2


@given(give_up=st.integers(1, 500), start=st.integers(0, 10**6),
       min_rto=st.integers(1, 50), kind=st.sampled_from([Kind.R, Kind.FR, Kind.F]))
def test_sender_gives_up_exactly_give_up_ticks_after_progress(
    give_up: int, start: int, min_rto: int, kind: Kind
) -> None:
    sender = ChannelSender("c", 1, FrameCodec(), min_rto=min_rto, max_rto=max(min_rto, 60),
                           give_up=give_up)
    sender.send(b"x", kind, now=start)
    now = start
    for _ in range(give_up + 2):  # every deadline up to the give-up tick, bounded
        due = sender.next_deadline()
        assert due is not None and due <= start + give_up
        now = due
        sender.handle_timer(now=now)
        if now == start + give_up:
            break
        assert sender.failed is None
    assert now == start + give_up
    assert sender.failed == "timeout" and sender.next_deadline() is None


@given(window=st.integers(1, 64), kinds=st.lists(st.sampled_from(KINDS), min_size=70,
                                                max_size=70))
def test_window_admits_exactly_window_unacknowledged_messages(window: int,
                                                              kinds: list[Kind]) -> None:
    sender = ChannelSender("c", 1, FrameCodec(), window=window)
    sent = 0
    for kind in kinds:
        if not sender.can_send():
            break
        sender.send(b"x", kind, now=1)
        sent += 1
    assert sent == window  # the opening (seq 0) is never acknowledged here
    assert sender.statistics().in_flight == window
