"""Boundaries the papers define exactly, each tested on both sides of the comparison,
so that moving it by one tick or one position fails a test:

- stability, section 6 join rule (``core/stability/_sender.py``): a joining receiver
  whose first ack is A enters R_s at the sender's first message stamped *above* A,
  not at one stamped A (its ack does not cover what the sender sends at A);
- bounded ⟨r, c⟩, section 5.2 (``core/causal/_process.py``, ``BoundedRCProcess``): a
  term whose ``r`` is exactly 2ε old still counts, one 2ε + 1 old is dropped (Fig. 3's
  reset condition ``r + 2ε < rt``);
- the RPC's refusal reason at the end of the down period (``core/rpc/_live.py``):
  a refused call at the recovered bound itself is ``down`` (a call made now would be
  stamped at or below it and refused too: retry), one tick later ``stale``;
- slotted FIFO (``core/slotted/_receiver.py``): a second copy of an F whose first
  copy waits for a gap is a ``duplicate`` (kept once, delivered once), an F at the
  last delivered order is ``overtaken``, the next order is delivered.
"""

from __future__ import annotations

import pytest

from timebound.core.atmostonce import Fixed, MemoryStorage, Receiver, StableLatest
from timebound.core.causal import BoundedRCProcess
from timebound.core.causal._timestamp import RCTimestamp
from timebound.core.rpc import (
    Policy,
    Reason,
    RpcCaller,
    RpcService,
    _live_messages,
    split_incarnation,
)
from timebound.core.slotted import Deliver, Discard, DiscardReason, Kind, SlottedReceiver, Stamp
from timebound.core.stability import StabilitySender, TimestampAck
from timebound.core.wire import FrameCodec, Key, Keyring

# -- stability: the join rule at ts == ack --------------------------------------------


def _joined_at(ack: int, stamped: int) -> tuple[frozenset[str], frozenset[str]]:
    """A sender with member q adds r, hears r's first ack ``ack``, then sends a message
    stamped ``stamped``: (R_s, still joining) after that send."""
    sender = StabilitySender("s", ["q"])
    sender.send(1, now=1)
    sender.add_receiver("r")
    sender.receive_ack(TimestampAck("r", ack), now=2)
    sender.send(stamped, now=3)
    return sender.receivers, sender.joining


@pytest.mark.parametrize("ack", [5, 40])
def test_a_joining_receiver_enters_above_its_ack_not_at_it(ack: int) -> None:
    assert _joined_at(ack, ack) == (frozenset({"q"}), frozenset({"r"}))
    assert _joined_at(ack, ack + 1) == (frozenset({"q", "r"}), frozenset())


def test_a_message_stamped_at_the_ack_is_not_held_for_the_joiner() -> None:
    """Stamped at the joiner's ack: not addressed to it, stable once q acks it; stamped
    one above: held until the joiner acks it too."""
    sender = StabilitySender("s", ["q"])
    sender.send(1, now=1)
    sender.add_receiver("r")
    sender.receive_ack(TimestampAck("r", 5), now=2)
    sender.send(5, now=3)
    assert sender.receive_ack(TimestampAck("q", 5), now=4) == [1, 5]
    sender.send(6, now=5)
    assert sender.receive_ack(TimestampAck("q", 6), now=6) == []
    assert sender.receive_ack(TimestampAck("r", 6), now=7) == [6]


# -- bounded <r, c>: a term exactly 2 eps old -------------------------------------------

EPS, PERIOD = 2, 100


def _process_with_c(c: int, at: int) -> BoundedRCProcess:
    """A process that received, at clock ``at``, a message stamped ``(at - 1, c)``:
    its own ``c`` is then ``c`` and its ``r`` is ``at``."""
    process = BoundedRCProcess(EPS, PERIOD)
    stamp = process.receive(RCTimestamp(at - 1, c), now=at)
    assert stamp == RCTimestamp(at, c)
    return process


def test_own_term_exactly_two_eps_old_counts_one_more_is_dropped() -> None:
    assert _process_with_c(50, 10).send(now=10 + 2 * EPS) == RCTimestamp(14, 50 - 2 * EPS)
    assert _process_with_c(50, 10).send(now=10 + 2 * EPS + 1) == RCTimestamp(15, 0)


def test_own_term_at_a_receive_exactly_two_eps_old_counts_one_more_is_dropped() -> None:
    fresh = RCTimestamp(10 + 2 * EPS, 0)  # the message's own term: 1
    assert _process_with_c(50, 10).receive(fresh, now=10 + 2 * EPS) == \
        RCTimestamp(14, 50 - 2 * EPS)
    later = RCTimestamp(10 + 2 * EPS + 1, 0)
    assert _process_with_c(50, 10).receive(later, now=10 + 2 * EPS + 1) == RCTimestamp(15, 1)


def test_message_term_exactly_two_eps_old_counts_one_more_is_dropped() -> None:
    process = BoundedRCProcess(EPS, PERIOD)
    process.send(now=10)
    # the message was stamped at r = rt - 2 eps: its term r + c - rt + 1 counts
    assert process.receive(RCTimestamp(20 - 2 * EPS, 30), now=20) == \
        RCTimestamp(20, 30 - 2 * EPS + 1)
    process = BoundedRCProcess(EPS, PERIOD)
    process.send(now=10)
    assert process.receive(RCTimestamp(20 - 2 * EPS - 1, 30), now=20) == RCTimestamp(20, 0)


# -- the RPC: down or stale at exactly the recovered bound ----------------------------

KEY = b"k" * 32


def test_refusal_is_down_at_the_recovered_bound_and_stale_one_tick_later() -> None:
    storage = MemoryStorage()
    receiver = Receiver(Fixed(60), gc_every=10, start=1_000,
                        resilience=StableLatest(storage, 200, 40))
    service: RpcService[str] = RpcService(FrameCodec(Keyring(Key(KEY))), receiver=receiver,
                                          incarnation=0)
    caller = RpcCaller("a", Policy(interval=7, give_up_after=10**9),
                       FrameCodec(Keyring(Key(KEY))))
    _ts, frames = caller.call("p", b"", now=1_020, conn="x")
    service.crash(now=1_021)
    service.restart(now=1_022, incarnation=0)
    bound = service.down_until
    assert bound > 1_022

    def reason(now: int) -> Reason:
        out = service.receive(frames[0], "c", now=now)
        assert out.runs == ()
        opened = FrameCodec(Keyring(Key(KEY))).open(out.sends[0].datagram)
        assert opened is not None
        return _live_messages.decode_refusal(split_incarnation(opened[1])[0])[2]

    assert reason(bound - 1) is Reason.DOWN
    assert reason(bound) is Reason.DOWN
    assert reason(bound + 1) is Reason.STALE


# -- slotted: a second copy of a waiting F --------------------------------------------


def _acts(receiver: SlottedReceiver[str], message: str, stamp: Stamp,
          now: int) -> list[tuple[str, str]]:
    return [(a.message, "deliver" if isinstance(a, Deliver) else a.reason.value)
            for a in receiver.receive(message, stamp, now=now)
            if isinstance(a, Deliver | Discard)]


def test_second_copy_of_a_waiting_f_is_a_duplicate_and_it_is_delivered_once() -> None:
    receiver: SlottedReceiver[str] = SlottedReceiver()
    f1, f2, f3 = (Stamp(0, Kind.F, k) for k in (1, 2, 3))
    assert _acts(receiver, "f3", f3, 0) == []                     # waits for 1 and 2
    assert _acts(receiver, "f3 again", f3, 1) == [("f3 again", DiscardReason.DUPLICATE.value)]
    assert _acts(receiver, "f1", f1, 2) == [("f1", "deliver")]
    # f1 is now the last delivered: a copy of it is overtaken, f2 is next in order
    assert _acts(receiver, "f1 again", f1, 3) == [("f1 again", DiscardReason.OVERTAKEN.value)]
    assert _acts(receiver, "f2", f2, 4) == [("f2", "deliver"), ("f3", "deliver")]
    assert receiver.statistics().discarded == {"slot_closed": 0, "overtaken": 1,
                                               "duplicate": 1}


# -- the at-most-once RPC service: a call's deadline (rpc/_live.py) -----------------------


@pytest.mark.parametrize(("after", "starts"), [(0, True), (1, False)])
def test_a_call_arriving_at_its_deadline_starts_one_tick_later_it_expires(
        after: int, starts: bool) -> None:
    """A call's deadline is ``ts + budget_ms`` on its caller's clock; a call is late only
    past it, on arrival as at start."""
    service: RpcService[str] = RpcService(FrameCodec(None), rho=10**9, gc_every=10**6,
                                          secret=b"s" * 32)
    caller = RpcCaller("cl", Policy(interval=1000, give_up_after=10**9), FrameCodec(None))
    ts, (call,) = caller.call("echo", b"x", now=9_000, conn="cl.1", budget_ms=5)
    out = service.receive(call, "client", now=ts + 5 * service.ticks_per_ms + after)
    assert len(out.runs) == (1 if starts else 0)
    assert service.statistics().expired == (0 if starts else 1)
