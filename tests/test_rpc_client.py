"""The RPC client: exact retransmission schedule, truncation after ACK, give-up."""

from __future__ import annotations

import pytest

from timebound.core.rpc import (
    Ack,
    Call,
    CallId,
    Client,
    ClientOutput,
    Completed,
    GaveUp,
    Policy,
    Reply,
    ReplyAck,
    decode,
)
from timebound.errors import ProtocolUsageError


def timeline(client: Client, until: int) -> list[tuple[int, object]]:
    """Fire every deadline up to ``until``: [(time, decoded datagram or outcome)]."""
    events: list[tuple[int, object]] = []
    while (due := client.next_deadline()) is not None and due <= until:
        out = client.handle_timer(now=due)
        events += [(due, decode(d)) for d in out.datagrams]
        events += [(due, o) for o in out.outcomes]
    return events


def test_fixed_schedule_and_give_up() -> None:
    client = Client("a", Policy(interval=10, give_up_after=45))
    calling = client.call(b"x", now=100)
    assert calling.id == CallId("a", 100)
    assert [decode(d) for d in calling.datagrams] == [Call("a", 100, b"x")]
    assert client.next_deadline() == 110
    full = Call("a", 100, b"x")
    assert timeline(client, 10**6) == [
        (110, full), (120, full), (130, full), (140, full), (145, GaveUp("a", 100, False)),
    ]
    assert client.next_deadline() is None


def test_backoff_schedule() -> None:
    client = Client("a", Policy(interval=10, give_up_after=100, backoff=2, max_interval=30))
    client.call(b"x", now=0)
    times = [t for t, _ in timeline(client, 10**6)]
    assert times == [10, 30, 60, 90, 100]


def test_ack_truncates_and_postpones_give_up() -> None:
    client = Client("a", Policy(interval=10, give_up_after=45))
    client.call(b"x", now=100)
    assert timeline(client, 110) == [(110, Call("a", 100, b"x"))]
    assert client.receive(Ack("a", 100).encode(), now=115) == ClientOutput()
    probe = Call("a", 100, None)
    assert timeline(client, 10**6) == [
        (120, probe), (130, probe), (140, probe), (150, probe), (160, GaveUp("a", 100, True)),
    ]
    assert client.statistics().truncated == 4


def test_ack_for_another_call_is_ignored() -> None:
    client = Client("a", Policy(interval=10, give_up_after=45))
    client.call(b"x", now=100)
    client.receive(Ack("a", 99).encode(), now=105)
    client.receive(Ack("b", 100).encode(), now=105)
    assert timeline(client, 110) == [(110, Call("a", 100, b"x"))]


def test_reply_completes_and_is_acked() -> None:
    client = Client("a", Policy(interval=10, give_up_after=45))
    client.call(b"x", now=100)
    out = client.receive(Reply("a", 100, b"r").encode(), now=105)
    assert out == ClientOutput((ReplyAck("a", 100).encode(),), (Completed("a", 100, b"r"),))
    assert client.next_deadline() is None
    # A repeated reply is acked again (the server missed the first REPLY-ACK).
    again = client.receive(Reply("a", 100, b"r").encode(), now=106)
    assert again == ClientOutput((ReplyAck("a", 100).encode(),), ())


def test_late_timer_sends_once_and_keeps_the_schedule() -> None:
    client = Client("a", Policy(interval=10, give_up_after=100))
    client.call(b"x", now=0)
    out = client.handle_timer(now=35)
    assert len(out.datagrams) == 1
    assert client.next_deadline() == 40
    assert client.handle_timer(now=39) == ClientOutput()


def test_timestamps_never_go_backwards_on_a_connection() -> None:
    client = Client("a", Policy(interval=10, give_up_after=45))
    stamps = []
    for now in (100, 90, 90, 200, 0):
        calling = client.call(b"x", now=now)
        stamps.append(calling.id.ts)
        client.receive(Reply("a", calling.id.ts, b"").encode(), now=now)
    assert stamps == [100, 101, 102, 200, 201]
    assert client.statistics().clock_bumps == 3
    # Another connection has its own sequence; ts is at least 1.
    assert client.call(b"x", now=0, conn="a/2").id == CallId("a/2", 1)


def test_concurrent_calls_need_distinct_connections() -> None:
    client = Client("a", Policy(interval=10, give_up_after=45))
    client.call(b"x", now=1)
    with pytest.raises(ProtocolUsageError):
        client.call(b"y", now=2)
    client.call(b"y", now=2, conn="a/1")
    assert len(client.outstanding()) == 2
    assert client.next_deadline() == 11


def test_garbage_and_wrong_direction_are_counted() -> None:
    client = Client("a", Policy(interval=10, give_up_after=45))
    client.receive(b"", now=0)
    client.receive(Call("a", 1, b"").encode(), now=0)
    client.receive(ReplyAck("a", 1).encode(), now=0)
    stats = client.statistics()
    assert stats.malformed == 1 and stats.ignored == 2


@pytest.mark.parametrize(
    "kw",
    [dict(interval=0, give_up_after=1), dict(interval=1, give_up_after=0),
     dict(interval=1, give_up_after=1, backoff=0),
     dict(interval=5, give_up_after=1, max_interval=4)],
)
def test_policy_checks(kw: dict[str, int]) -> None:
    with pytest.raises(ProtocolUsageError):
        Policy(**kw)
