"""Timestamp acknowledgments: Theorems 1 and 2 as invariants of a state machine over
reliable FIFO message channels and lossy, reordering ack channels; both ack schemes,
both clocks. Plus the membership failure of the paper's Fig. 4, reproduced with static
(wrong) groups and prevented by section 6's pairwise join rules."""

from __future__ import annotations

from collections import deque

from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from timebound.core.stability import Ack, AckMode, ClockMode, StabilityNode


class StabilityMachine(RuleBasedStateMachine):
    """Reference model: what each receiver has really got, and what each sender was
    told is stable. The theorems are the invariants."""

    @initialize(
        n_senders=st.integers(1, 3), n_receivers=st.integers(1, 3),
        everyone_both=st.booleans(),
        acks=st.sampled_from(list(AckMode)), clock=st.sampled_from(list(ClockMode)),
    )
    def setup(self, n_senders: int, n_receivers: int, everyone_both: bool,
              acks: AckMode, clock: ClockMode) -> None:
        if everyone_both:
            self.senders = self.receivers = [f"n{i}" for i in range(max(n_senders, n_receivers))]
        else:
            self.senders = [f"s{i}" for i in range(n_senders)]
            self.receivers = [f"r{i}" for i in range(n_receivers)]
        self.both = everyone_both
        self.acks, self.clock = acks, clock
        self.nodes = {
            name: StabilityNode(
                name, senders=self.senders if name in self.receivers else None,
                receivers=self.receivers if name in self.senders else None,
                acks=acks, clock=clock)
            for name in dict.fromkeys(self.senders + self.receivers)
        }
        self.now = 0
        self.channels: dict[tuple[str, str], deque[int]] = {
            (s, r): deque() for s in self.senders for r in self.receivers if s != r}
        self.ack_bag: list[tuple[str, Ack]] = []  # (destination sender, ack)
        self.got: dict[str, set[tuple[str, int]]] = {r: set() for r in self.receivers}
        self.sent: dict[str, list[int]] = {s: [] for s in self.senders}
        self.stable: dict[str, list[int]] = {s: [] for s in self.senders}

    def tick(self) -> int:
        self.now += 1
        return self.now

    def mark(self, sender: str, stable: list[int] | None) -> None:
        if stable:
            self.stable[sender].extend(stable)

    # -- rules -------------------------------------------------------------------

    @rule(data=st.data())
    def send(self, data: st.DataObject) -> None:
        self.send_from(data.draw(st.sampled_from(self.senders)))

    @rule(data=st.data())
    def deliver_message(self, data: st.DataObject) -> None:
        busy = [key for key, queue in self.channels.items() if queue]
        if not busy:
            return
        s, r = data.draw(st.sampled_from(busy))
        ts = self.channels[(s, r)].popleft()
        if self.nodes[r].receive(s, ts, now=self.tick()):
            self.got[r].add((s, ts))

    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        r = data.draw(st.sampled_from(self.receivers))
        acked = self.nodes[r].make_ack(now=self.tick())
        self.mark(r, acked.stable)
        self.ack_bag.extend((s, acked.ack) for s in self.senders if s != r)

    @precondition(lambda self: bool(self.ack_bag))
    @rule(data=st.data(), lose=st.booleans())
    def ack_arrives_or_is_lost(self, data: st.DataObject, lose: bool) -> None:
        index = data.draw(st.integers(0, len(self.ack_bag) - 1))  # any order
        s, ack = self.ack_bag.pop(index)
        if not lose:
            self.mark(s, self.nodes[s].receive_ack(ack, now=self.tick()))

    # -- the theorems --------------------------------------------------------------

    @invariant()
    def theorem_1a_stable_only_once_every_receiver_has_it(self) -> None:
        for s, stable in self.stable.items():
            assert len(stable) == len(set(stable)) and set(stable) <= set(self.sent[s])
            for ts in stable:
                for r in self.receivers:
                    assert (s, ts) in self.got[r], (s, ts, r)

    @invariant()
    def theorem_2a_any_senders_message_below_the_bound_is_everywhere(self) -> None:
        if not (self.both and self.acks is AckMode.TIMESTAMP):
            return
        for node in self.nodes.values():
            bound = node.stable_bound()
            assert bound is not None
            for s, stamps in self.sent.items():
                for ts in stamps:
                    if ts <= bound:
                        assert all((s, ts) in self.got[r] for r in self.receivers)

    def teardown(self) -> None:
        """Theorem 1(b)/2(b): keep sending (t_send), delivering and acking (t_ack),
        with no more loss: every message sent so far becomes stable."""
        if not hasattr(self, "nodes"):
            return
        pending = {s: set(ts) for s, ts in self.sent.items()}
        everywhere = self.both and self.acks is AckMode.TIMESTAMP  # Theorem 2(b) too
        top = max((max(ts) for ts in self.sent.values() if ts), default=0)

        def done() -> bool:
            if not all(p <= set(self.stable[s]) for s, p in pending.items()):
                return False
            return not everywhere or all(
                (n.stable_bound() or 0) >= top for n in self.nodes.values())

        for _ in range(500):
            if done():
                break
            for s in self.senders:
                self.send_from(s)
            for (s, r), queue in self.channels.items():
                while queue:
                    ts = queue.popleft()
                    if self.nodes[r].receive(s, ts, now=self.tick()):
                        self.got[r].add((s, ts))
            for r in self.receivers:
                acked = self.nodes[r].make_ack(now=self.tick())
                self.mark(r, acked.stable)
                for s in self.senders:
                    if s != r:
                        self.mark(s, self.nodes[s].receive_ack(acked.ack, now=self.tick()))
            self.theorem_1a_stable_only_once_every_receiver_has_it()
        assert done(), {s: p - set(self.stable[s]) for s, p in pending.items()}

    def send_from(self, s: str) -> None:
        sent = self.nodes[s].send(now=self.tick())
        self.sent[s].append(sent.ts)
        if sent.self_delivered:
            self.got[s].add((s, sent.ts))
        self.mark(s, sent.stable)
        for (src, _), queue in self.channels.items():
            if src == s:
                queue.append(sent.ts)


TestStabilityTheorems = StabilityMachine.TestCase


# -- the paper's Fig. 4 ---------------------------------------------------------------


def fig4_static() -> tuple[dict[str, StabilityNode], list[int]]:
    everyone = ["1", "2", "3"]
    nodes = {
        "1": StabilityNode("1", senders=everyone, receivers=everyone),
        "2": StabilityNode("2", senders=everyone, receivers=everyone),
        # node 3 lacks correct membership: in its view only 2 and itself send
        "3": StabilityNode("3", senders=["2", "3"], receivers=everyone),
    }
    stable: list[int] = []
    nodes["2"].send(now=22)  # A
    nodes["1"].receive("2", 22, now=23)
    nodes["3"].receive("2", 22, now=23)
    nodes["1"].send(now=27)  # B: node 3 misses it (network failure)
    nodes["2"].receive("1", 27, now=28)
    nodes["2"].send(now=33)  # C
    nodes["1"].receive("2", 33, now=34)
    nodes["3"].receive("2", 33, now=34)
    nodes["3"].send(now=34)  # D
    nodes["1"].receive("3", 34, now=35)
    nodes["2"].receive("3", 34, now=35)
    ack3 = nodes["3"].make_ack(now=36).ack
    ack2 = nodes["2"].make_ack(now=36).ack
    own = nodes["1"].make_ack(now=36)
    stable += own.stable or []
    stable += nodes["1"].receive_ack(ack3, now=37)
    stable += nodes["1"].receive_ack(ack2, now=38)
    return nodes, stable


def test_fig4_wrong_membership_makes_b_stable_wrongly() -> None:
    nodes, stable = fig4_static()
    assert nodes["3"].make_ack(now=40).ack.for_sender("1") == 33
    assert 27 in stable  # node 1 regards B as stable...
    receiver3 = nodes["3"].receiver
    assert receiver3 is not None and receiver3.last("1") is None  # ...node 3 never got it


class Net:
    """Section 6 harness: messages flow on open message channels (R_s and joining),
    acks from r to the members of S_r."""

    def __init__(self, names: list[str]) -> None:
        self.nodes = {n: StabilityNode(n, senders=[], receivers=[]) for n in names}
        self.got: dict[str, set[tuple[str, int]]] = {n: set() for n in names}
        self.addressed: dict[tuple[str, int], frozenset[str]] = {}
        self.stable: dict[str, list[int]] = {n: [] for n in names}
        self.now = 0

    def connect(self, s: str, r: str) -> None:
        """Steps 1 and 3: both channels opened (steps 2 and 4 happen by themselves)."""
        rx, tx = self.nodes[r].receiver, self.nodes[s].sender
        assert rx is not None and tx is not None
        rx.add_sender(s)
        tx.add_receiver(r)

    def send(self, s: str, lose_to: frozenset[str] = frozenset()) -> int:
        self.now += 1
        node = self.nodes[s]
        assert node.sender is not None
        sent = node.send(now=self.now)
        self.addressed[(s, sent.ts)] = node.sender.receivers
        if sent.self_delivered:
            self.got[s].add((s, sent.ts))
        for r in node.sender.receivers | node.sender.joining:
            if r != s and r not in lose_to and self.nodes[r].receive(s, sent.ts, now=self.now):
                self.got[r].add((s, sent.ts))
        return sent.ts

    def ack(self, r: str) -> None:
        self.now += 1
        node = self.nodes[r]
        acked = node.make_ack(now=self.now)
        self.stable[r] += acked.stable or []
        assert node.receiver is not None
        for s in node.receiver.senders - {r}:
            self.stable[s] += self.nodes[s].receive_ack(acked.ack, now=self.now)

    def check(self) -> None:
        """Theorem 1(a) under membership: every receiver the message was addressed to
        (R_s when it was sent) has received it."""
        for s, stable in self.stable.items():
            for ts in stable:
                for r in self.addressed[(s, ts)]:
                    assert (s, ts) in self.got[r], (s, ts, r)


def test_fig4_prevented_by_section_6_rules() -> None:
    net = Net(["1", "2", "3"])
    for s in "123":
        for r in "123":
            if not (s == "1" and r == "3"):  # node 3 never learns that node 1 sends
                net.connect(s, r)
    for r in "123":
        net.ack(r)
    for s in "123":
        net.send(s)  # every node now joins its receivers (ts above their first ack)
    sender1 = net.nodes["1"].sender
    assert sender1 is not None and sender1.receivers == {"1", "2"}  # 3 never confirmed
    net.send("2")
    b = net.send("1", lose_to=frozenset({"3"}))
    net.send("2")
    net.send("3")
    for r in "123":
        net.ack(r)
    net.check()
    assert b in net.stable["1"]  # stable for its real receivers 1 and 2 only
    # node 3 later joins node 1's group: B is covered by its first ack, not required
    net.connect("1", "3")
    net.ack("3")
    assert net.nodes["3"].receive("1", b, now=net.now) is False  # retransmitted B ignored
    e = net.send("1")
    assert sender1.receivers == {"1", "2", "3"}
    for _ in range(2):
        for s in "123":
            net.send(s)
        for r in "123":
            net.ack(r)
    net.check()
    assert e in net.stable["1"]


def test_leave_releases_messages_held_by_the_leaver() -> None:
    net = Net(["s", "a", "b"])
    for r in ("a", "b"):
        net.connect("s", r)
        net.ack(r)
    ts = net.send("s", lose_to=frozenset({"b"}))
    net.ack("a")
    assert net.stable["s"] == []
    sender = net.nodes["s"].sender
    assert sender is not None
    assert sender.remove_receiver("b", now=net.now + 1) == [ts]


def test_receiver_behind_a_slow_sender_cannot_make_its_message_stable() -> None:
    """The scenario the Theorem 1(a) invariant guards, pinned for both schemes."""
    for acks in AckMode:
        s0 = StabilityNode("s0", receivers=["r"], acks=acks)
        s1 = StabilityNode("s1", receivers=["r"], acks=acks)
        r = StabilityNode("r", senders=["s0", "s1"], acks=acks)
        slow = s0.send(now=1).ts  # delayed on its way to r
        r.receive("s1", s1.send(now=2).ts, now=3)
        assert s0.receive_ack(r.make_ack(now=4).ack, now=5) == []
        r.receive("s0", slow, now=6)
        assert s0.receive_ack(r.make_ack(now=7).ack, now=8) == [slow]
