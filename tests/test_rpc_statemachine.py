"""Clients and a server joined by an in-memory wire (SCMP section 3.1, Fig. 3-1).

The wire delivers, drops, duplicates and reorders datagrams; time advances; REPLY-ACKs
get lost; a resilient server crashes and recovers (MemoryStorage); client clocks are
skewed and step back. Invariants: the server never starts the same call ``(conn, ts)``
twice; a client never reuses a call id; a completed call's result is the one computed
for that very call; each call has at most one outcome. At teardown the wire turns
reliable and the server stays up: every call completes or gives up.
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from timebound.core.atmostonce import MemoryStorage, StableLatest
from timebound.core.rpc import (
    Client,
    ClientOutput,
    Completed,
    Outcome,
    Policy,
    ReplyAck,
    Server,
    ServerOutput,
    StartCall,
    decode,
)

CLIENTS = ("a", "b")
SERVER = "server"
#: Enough steps for any call to finish once the wire is reliable (give-up bounds it).
SETTLE_STEPS = 1_000


def result_of(call: StartCall) -> bytes:
    return b"r:" + call.payload


class RpcWire(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.t = 0
        self.wire: list[tuple[str, bytes]] = []  # (destination, datagram)
        self.history: list[tuple[str, bytes]] = []  # every datagram ever sent
        self.running: list[StartCall] = []
        self.started: set[tuple[str, int]] = set()
        self.double_starts: list[tuple[str, int]] = []
        self.sent: dict[tuple[str, int], bytes] = {}  # call id -> payload
        self.reused_ids: list[tuple[str, int]] = []
        self.outcomes: dict[tuple[str, int], list[Outcome]] = {}
        self.wrong_results: list[tuple[str, int]] = []
        self.serial = 0
        self.skew = dict.fromkeys(CLIENTS, 0)
        self.resilient = False

    @initialize(
        resilient=st.booleans(),
        kappa=st.sampled_from([0, 60]),
        capacity=st.sampled_from([None, 2, 4]),
        backoff=st.sampled_from([1, 2]),
        skews=st.tuples(st.integers(-15, 15), st.integers(-15, 15)),
    )
    def setup(
        self, resilient: bool, kappa: int, capacity: int | None, backoff: int,
        skews: tuple[int, int],
    ) -> None:
        self.resilient = resilient
        self.storage = MemoryStorage()
        resilience = StableLatest(self.storage, beta=40, latest_every=10) if resilient else None
        self.server: Server[str] = Server(
            rho=30, kappa=kappa, gc_every=10, resilience=resilience, capacity=capacity,
            high_water=capacity,
        )
        policy = Policy(interval=7, give_up_after=60, backoff=backoff, max_interval=20)
        self.clients = {name: Client(name, policy) for name in CLIENTS}
        self.skew = dict(zip(CLIENTS, skews, strict=True))

    # -- helpers -------------------------------------------------------------

    def clock(self, name: str) -> int:
        return max(0, self.t + self.skew[name])

    def server_out(self, out: ServerOutput) -> None:
        for send in out.sends:
            self.wire.append((send.peer, send.datagram))
            self.history.append((send.peer, send.datagram))
        for call in out.starts:
            key = (call.conn, call.ts)
            if key in self.started:
                self.double_starts.append(key)
            self.started.add(key)
            self.running.append(call)

    def client_out(self, out: ClientOutput) -> None:
        for datagram in out.datagrams:
            self.wire.append((SERVER, datagram))
            self.history.append((SERVER, datagram))
        for outcome in out.outcomes:
            key = (outcome.conn, outcome.ts)
            self.outcomes.setdefault(key, []).append(outcome)
            if isinstance(outcome, Completed) and outcome.result != b"r:" + self.sent[key]:
                self.wrong_results.append(key)

    def deliver_one(self, index: int) -> None:
        dest, datagram = self.wire.pop(index % len(self.wire))
        if dest == SERVER:
            # The peer is the client owning the connection (conn = name or name/k).
            peer = decode(datagram).conn.split("/")[0]
            self.server_out(self.server.receive(datagram, peer, now=self.t))
        else:
            self.client_out(self.clients[dest].receive(datagram, now=self.clock(dest)))

    def fire_timers(self) -> None:
        self.server.handle_timer(now=self.t)
        for name, client in self.clients.items():
            due = client.next_deadline()
            if due is not None and due <= self.clock(name):
                self.client_out(client.handle_timer(now=self.clock(name)))

    def next_time(self) -> int:
        """The next instant at which a client or the server has a timer due."""
        dues = [self.t + 1000]
        for name, client in self.clients.items():
            due = client.next_deadline()
            if due is not None:
                dues.append(due - self.skew[name])
        server_due = self.server.next_deadline()
        if server_due is not None:
            dues.append(server_due)
        return max(self.t + 1, min(dues))

    # -- rules ---------------------------------------------------------------

    @rule(client=st.sampled_from(CLIENTS), slot=st.sampled_from(["", "/1"]))
    def call(self, client: str, slot: str) -> None:
        conn = client + slot
        if any(c.conn == conn for c in self.clients[client].outstanding()):
            return
        self.serial += 1
        payload = str(self.serial).encode()
        calling = self.clients[client].call(payload, now=self.clock(client), conn=conn)
        key = (calling.id.conn, calling.id.ts)
        if key in self.sent:
            self.reused_ids.append(key)
        self.sent[key] = payload
        self.client_out(ClientOutput(calling.datagrams))

    @precondition(lambda self: self.wire)
    @rule(index=st.integers(0, 50))
    def deliver(self, index: int) -> None:
        self.deliver_one(index)

    @precondition(lambda self: self.wire)
    @rule(index=st.integers(0, 50))
    def drop(self, index: int) -> None:
        self.wire.pop(index % len(self.wire))

    @precondition(lambda self: self.wire)
    @rule(index=st.integers(0, 50))
    def duplicate(self, index: int) -> None:
        self.wire.append(self.wire[index % len(self.wire)])

    @precondition(lambda self: self.history)
    @rule(index=st.integers(0, 50))
    def late_copy(self, index: int) -> None:
        """A copy of any datagram ever sent turns up (a delayed duplicate)."""
        self.wire.append(self.history[-1 - index % len(self.history)])

    @rule()
    def flush(self) -> None:
        while self.wire:
            self.deliver_one(0)

    @precondition(lambda self: len(self.wire) > 1)
    @rule(index=st.integers(0, 50))
    def reorder(self, index: int) -> None:
        self.wire.append(self.wire.pop(index % len(self.wire)))

    @rule()
    def lose_reply_acks(self) -> None:
        self.wire = [(d, g) for d, g in self.wire if not isinstance(decode(g), ReplyAck)]

    @precondition(lambda self: self.running)
    @rule(index=st.integers(0, 50))
    def complete(self, index: int) -> None:
        call = self.running.pop(index % len(self.running))
        self.server_out(self.server.complete(call, result_of(call), now=self.t))

    @rule(dt=st.integers(1, 40))
    def advance(self, dt: int) -> None:
        self.t += dt
        self.fire_timers()

    @precondition(lambda self: self.resilient and not self.server.receiver.down)
    @rule(down=st.integers(1, 50))
    def crash(self, down: int) -> None:
        self.server.crash(now=self.t, down=down)

    @rule(client=st.sampled_from(CLIENTS), step=st.integers(-30, 30))
    def clock_step(self, client: str, step: int) -> None:
        self.skew[client] += step

    # -- invariants ----------------------------------------------------------

    @invariant()
    def never_started_twice(self) -> None:
        assert not self.double_starts, f"calls started twice: {self.double_starts}"

    @invariant()
    def call_ids_unique_and_results_right(self) -> None:
        assert not self.reused_ids, f"call ids reused: {self.reused_ids}"
        assert not self.wrong_results, f"wrong results: {self.wrong_results}"
        assert all(len(v) == 1 for v in self.outcomes.values()), self.outcomes

    def teardown(self) -> None:
        if not hasattr(self, "server"):
            return
        # The wire becomes reliable and the server stays up: every call ends.
        for _ in range(SETTLE_STEPS):
            while self.wire:
                self.deliver_one(0)
            while self.running:
                call = self.running.pop(0)
                self.server_out(self.server.complete(call, result_of(call), now=self.t))
            if not self.wire and not any(c.outstanding() for c in self.clients.values()):
                break
            self.t = self.next_time()
            self.fire_timers()
        self.never_started_twice()
        self.call_ids_unique_and_results_right()
        pending = [c.outstanding() for c in self.clients.values()]
        assert not any(pending), f"calls neither completed nor given up: {pending}"
        assert set(self.outcomes) == set(self.sent)


TestRpcWire = RpcWire.TestCase
