"""Fig. 1 and section 6 as properties over random membership changes and acks
(written for two mutants of ``scripts/mutate.py`` that the theorem tests missed):

- the sender's cached minimum is always the minimum of its members' entries, where
  a member's entry is the largest ack it sent while member or joining (so a receiver
  joining with a large ack never hides a slower member), and no message is stable
  before every current member acknowledged it, and is stable as soon as they all did;
- a receiver delivers a message stamped ``ts`` from a sender at most once (a copy
  with the same timestamp is ignored), in increasing timestamp order.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from timebound.core.stability import StabilityReceiver, StabilitySender, TimestampAck

NAMES = ("r1", "r2", "r3", "r4")


@given(data=st.data(), initial=st.sets(st.sampled_from(NAMES), max_size=3))
def test_sender_minimum_is_the_slowest_member(data: st.DataObject,
                                              initial: set[str]) -> None:
    sender = StabilitySender("s", sorted(initial))
    seen: dict[str, int] = dict.fromkeys(initial, 0)  # largest ack while member/joining
    now = ts = 0
    for _ in range(data.draw(st.integers(1, 60), label="steps")):
        now += data.draw(st.integers(0, 3), label="dt")
        action = data.draw(st.sampled_from(["send", "ack", "ack", "add", "remove"]))
        who = data.draw(st.sampled_from(NAMES), label="who")
        released: list[int] = []
        if action == "send":
            ts += data.draw(st.integers(1, 5), label="ts step")
            released = sender.send(ts, now=now)
        elif action == "ack":
            # an ack never exceeds the sender's last timestamp: a receiver's entry for
            # s is a timestamp s sent (Fig. 1), so min(entries) <= s's last one
            value = data.draw(st.integers(0, ts), label="ack")
            if who in sender.receivers or who in sender.joining:
                seen[who] = max(seen.get(who, 0), value)
            released = sender.receive_ack(TimestampAck(who, value), now=now)
        elif action == "add":
            if who not in sender.receivers and who not in sender.joining:
                seen.pop(who, None)
            sender.add_receiver(who)
        else:
            released = sender.remove_receiver(who, now=now)
            seen.pop(who, None)
        members = sender.receivers
        expected = min(seen[r] for r in members) if members else None
        assert sender.min_ack() == expected, (action, who)
        for stable in released:
            assert all(seen[r] >= stable for r in members), (stable, members)
        # and a message every member acknowledged is stable (no longer buffered)
        assert all(expected is not None and b > expected for b in sender.buffered())


@given(arrivals=st.lists(st.tuples(st.sampled_from(("a", "b")), st.integers(1, 12)),
                         max_size=40))
def test_receiver_delivers_each_message_once_in_order(
    arrivals: list[tuple[str, int]]
) -> None:
    receiver = StabilityReceiver("r", ["a", "b"])
    delivered: dict[str, list[int]] = {"a": [], "b": []}
    for sender, ts in arrivals:
        if receiver.receive(sender, ts):
            delivered[sender].append(ts)
    for stamps in delivered.values():
        assert all(x < y for x, y in zip(stamps, stamps[1:])), stamps
