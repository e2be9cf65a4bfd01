"""Causal pub-sub over datagrams: publishers, replicated mergers, subscribers (sans-IO).

Theory of operation
-------------------
Kulkarni and Ravikant's section 4 as a service. Time is in **milliseconds** here (the
⟨r, c, kn⟩ array has 2ε entries, one per clock tick of the ε window, so µs ticks would
make it thousands of entries long); ε and δ are the system's clock-sync and delay
bounds in ms (G1, G2).

- ``Publisher``: a ``CausalProcess``; each publication is a send event stamped
  ⟨r, c, kn⟩ and multicast to every merger in the bounded wire form
  (``WireCodec``: ``r mod B``, c, kn). Fig. 1 needs the clock to advance between a
  process's events (a kn counter counts events per tick and Lemma 3.4 bounds it by
  ``n``), so an event happens at ``max(now, r + 1)``: the driver paces publications
  to at most one per millisecond so this never runs ahead of the real clock.
  ``observe`` is a receive event, for a publisher that also reads messages (the
  causal dependency the merger must respect).
- ``MergerNode``: a ``Merger`` of ``ds(ε, δ)``; inputs are PUBs (level 1) or FWDs of
  lower mergers (level 2); every delivered message is forwarded, in delivery order
  and numbered, to the subscribers holding a lease (SUB, renewed every
  ``LEASE_RENEW``), stamped for the output system ``ds(ε, δ + 3ε)`` (Theorem 4.3):
  a level-2 merger is configured with that δ. Replicated mergers deliver common
  messages in the same order (Theorem 4.4) and causally (Theorem 4.5); duplicates
  from replicated lower mergers are dropped by the merger's ``(proc, msg)`` check. A
  frame whose ε, δ or n is not this merger's input system is dropped (``mismatched``),
  and so is one whose decoded ``r`` is above ``now + ε`` (``early``: G1 broken).
  A copy delayed beyond δ decodes to its true ``r`` (``_wire.MODULUS_FACTOR``) and is
  ``late``, so it is never placed differently by two mergers.
- ``Subscriber``: takes one merger's FWDs in their ``seq`` order (a reordered
  datagram waits for the gap at most ``gap_wait`` ms; a lost one is skipped) and
  keeps a running SHA-256 digest of the ``(proc, msg)`` order it delivered, so two
  subscribers can be compared line by line.

Verbs: ``publish``/``receive(datagram, peer, *, now)``, ``handle_timer(*, now)``,
``next_deadline()``, ``statistics()``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from timebound.core.causal import CausalProcess, Timestamp
from timebound.core.merge import Envelope, Merger, level_parameters
from timebound.core.pubsub._wire import (
    ROLE_MERGER,
    ROLE_SUBSCRIBER,
    Forwarded,
    Published,
    Subscribe,
    check_name,
    decode,
    encode_fwd,
    encode_pub,
    encode_sub,
)
from timebound.core.wire import KIND_PUBSUB, FrameCodec
from timebound.errors import MalformedDatagram, ProtocolUsageError

P = TypeVar("P", bound=Hashable)

#: A subscriber renews its lease every LEASE_RENEW ms; a merger drops it after LEASE.
LEASE_RENEW = 1000
LEASE = 3500
#: Most subscribers (and upper mergers) a merger forwards to.
MAX_SUBSCRIBERS = 1024


def _check_system(epsilon: int, delta: int, n: int) -> None:
    if epsilon < 1 or delta < 0 or n < 1:
        raise ProtocolUsageError("need epsilon >= 1, delta >= 0, n >= 1")


class Publisher:
    """One publishing process of ``ds(epsilon, delta)`` with at most ``n`` processes."""

    def __init__(self, name: str, epsilon: int, delta: int, n: int, codec: FrameCodec) -> None:
        _check_system(epsilon, delta, n)
        self.name = check_name(name)
        self.epsilon, self.delta, self.n = epsilon, delta, n
        self.codec = codec
        self.process = CausalProcess(epsilon, n)
        self.published = 0
        self.observed = 0

    def ready_at(self) -> int:
        """The first tick at which a publication stamps the real clock (``r + 1``)."""
        return self.process.r + 1

    def publish(self, data: bytes, *, now: int) -> tuple[int, Timestamp, bytes]:
        """A send event: the message id, its timestamp and the frame for every merger."""
        stamp = self.process.send(now=max(now, self.process.r + 1))
        msg = self.published
        self.published += 1
        frame = self.codec.seal(KIND_PUBSUB, encode_pub(
            self.name, msg, self.epsilon, self.delta, self.n, stamp, data))
        return msg, stamp, frame

    def observe(self, stamp: Timestamp, *, now: int) -> Timestamp:
        """A receive event of a message stamped ``stamp`` (causal dependency)."""
        self.observed += 1
        return self.process.receive(stamp, now=max(now, self.process.r + 1))

    def next_deadline(self) -> int | None:
        return None

    def handle_timer(self, *, now: int) -> tuple[bytes, ...]:
        return ()


@dataclass(frozen=True, slots=True)
class MergerNodeStatistics:
    received: int
    delivered: int
    late: int
    duplicates: int
    buffered: int
    max_buffered: int
    total_buffering: int
    max_buffering: int
    forwarded: int
    subscribers: int
    mismatched: int
    early: int
    malformed: int
    unauthenticated: int


@dataclass(frozen=True, slots=True)
class MergerOutput(Generic[P]):
    sends: tuple[tuple[P, bytes], ...] = ()
    delivered: tuple[Published, ...] = ()


class MergerNode(Generic[P]):
    """One merger of ``ds(epsilon, delta)`` (see the module docstring)."""

    def __init__(self, name: str, epsilon: int, delta: int, n: int, codec: FrameCodec, *,
                 max_subscribers: int = MAX_SUBSCRIBERS) -> None:
        _check_system(epsilon, delta, n)
        self.name = check_name(name)
        self.epsilon, self.delta, self.n = epsilon, delta, n
        self.out_delta = level_parameters(epsilon, delta)[1]
        self.codec = codec
        self.merger = Merger(epsilon, delta, retain=delta + 4 * epsilon)
        self.max_subscribers = max_subscribers
        self._subs: dict[P, int] = {}  # peer -> lease expiry
        self._messages: dict[tuple[str, str], Published] = {}
        self._seq = 0
        self._mismatched = self._malformed = self._early = 0

    def next_deadline(self) -> int | None:
        due = self.merger.next_deadline()
        if self._subs:
            expiry = min(self._subs.values())
            due = expiry if due is None else min(due, expiry)
        return due

    def statistics(self) -> MergerNodeStatistics:
        s = self.merger.statistics()
        return MergerNodeStatistics(
            received=s.received, delivered=s.delivered, late=s.late,
            duplicates=s.duplicates, buffered=s.buffered, max_buffered=s.max_buffered,
            total_buffering=s.total_buffering, max_buffering=s.max_buffering,
            forwarded=self._seq, subscribers=len(self._subs), mismatched=self._mismatched,
            early=self._early,
            malformed=self.codec.malformed + self._malformed,
            unauthenticated=self.codec.unauthenticated,
        )

    def receive(self, datagram: bytes, peer: P, *, now: int) -> MergerOutput[P]:
        opened = self.codec.open(datagram, now=now)
        if opened is None:
            return MergerOutput()
        if opened.kind != KIND_PUBSUB:
            self._malformed += 1
            return MergerOutput()
        try:
            body = decode(opened.body, now=now)
        except MalformedDatagram:
            self._malformed += 1
            return MergerOutput()
        if isinstance(body, Subscribe):
            if peer in self._subs or len(self._subs) < self.max_subscribers:
                self._subs[peer] = now + LEASE
            return MergerOutput()
        message = body.message if isinstance(body, Forwarded) else body
        if (message.epsilon, message.delta, message.n) != (self.epsilon, self.delta, self.n):
            self._mismatched += 1
            return MergerOutput()
        if message.stamp.r > now + self.epsilon:
            self._early += 1  # from the future: G1 broken, or a late copy (see _wire)
            return MergerOutput()
        key = (message.proc, str(message.msg))
        verdict = self.merger.receive(Envelope(message.proc, key[1], message.stamp), now=now)
        if verdict.value == "buffered":
            self._messages[key] = message
        return self._deliver(now - 1)

    def handle_timer(self, *, now: int) -> MergerOutput[P]:
        for peer in [p for p, until in self._subs.items() if until <= now]:
            del self._subs[peer]
        return self._deliver(now)

    def _deliver(self, now: int) -> MergerOutput[P]:
        deliveries = self.merger.handle_timer(now=now)
        if not deliveries:
            return MergerOutput()
        sends: list[tuple[P, bytes]] = []
        delivered: list[Published] = []
        for d in deliveries:
            message = self._messages.pop((d.envelope.proc, d.envelope.msg))
            delivered.append(message)
            frame = self.codec.seal(KIND_PUBSUB, encode_fwd(self.name, self._seq, message,
                                                            self.out_delta))
            self._seq += 1
            sends.extend((peer, frame) for peer in self._subs)
        return MergerOutput(tuple(sends), tuple(delivered))


@dataclass(frozen=True, slots=True)
class SubscriberDelivery:
    merger: str
    seq: int
    proc: str
    msg: int
    stamp: Timestamp
    data: bytes
    digest: str  # SHA-256 (hex) of the (proc, msg) order delivered so far
    at: int


@dataclass(frozen=True, slots=True)
class SubscriberStatistics:
    delivered: int
    skipped: int
    duplicates: int
    foreign: int
    waiting: int
    malformed: int
    unauthenticated: int


class Subscriber:
    """Reads one merger's output in its order; keeps a running digest."""

    def __init__(self, name: str, codec: FrameCodec, *, gap_wait: int = 50,
                 max_waiting: int = 4096, now: int = 0) -> None:
        self.name = check_name(name)
        self.codec = codec
        self.gap_wait = gap_wait
        self.max_waiting = max_waiting
        self.merger: str | None = None
        self._next = 0
        self._waiting: dict[int, tuple[Published, int]] = {}
        self._hash = hashlib.sha256()
        self._renew = now
        self._c = dict.fromkeys(("delivered", "skipped", "duplicates", "foreign",
                                 "malformed"), 0)

    @property
    def digest(self) -> str:
        return self._hash.hexdigest()

    def subscription(self) -> bytes:
        """The SUB frame (the driver sends it now and at every ``handle_timer``)."""
        return self.codec.seal(KIND_PUBSUB, encode_sub(ROLE_SUBSCRIBER, self.name))

    def next_deadline(self) -> int:
        due = self._renew
        if self._waiting:
            due = min(due, min(at for _, at in self._waiting.values()) + self.gap_wait)
        return due

    def statistics(self) -> SubscriberStatistics:
        c = self._c
        return SubscriberStatistics(c["delivered"], c["skipped"], c["duplicates"],
                                    c["foreign"], len(self._waiting),
                                    self.codec.malformed + c["malformed"],
                                    self.codec.unauthenticated)

    def receive(self, datagram: bytes, *, now: int) -> tuple[SubscriberDelivery, ...]:
        opened = self.codec.open(datagram, now=now)
        if opened is None:
            return ()
        if opened.kind != KIND_PUBSUB:
            self._c["malformed"] += 1
            return ()
        try:
            body = decode(opened.body, now=now)
        except MalformedDatagram:
            self._c["malformed"] += 1
            return ()
        if not isinstance(body, Forwarded):
            return ()
        if self.merger is None:
            self.merger = body.merger
            self._next = body.seq  # join the stream where it is
        if body.merger != self.merger:
            self._c["foreign"] += 1
            return ()
        if body.seq < self._next or body.seq in self._waiting:
            self._c["duplicates"] += 1
            return ()
        if len(self._waiting) >= self.max_waiting:
            return ()
        self._waiting[body.seq] = (body.message, now)
        return self._drain(now, skip=False)

    def handle_timer(self, *, now: int) -> tuple[tuple[SubscriberDelivery, ...], bytes | None]:
        """Deliveries past expired gaps, and the SUB renewal when it is due."""
        renew = None
        if now >= self._renew:
            self._renew = now + LEASE_RENEW
            renew = self.subscription()
        return self._drain(now, skip=True), renew

    def _drain(self, now: int, *, skip: bool) -> tuple[SubscriberDelivery, ...]:
        out: list[SubscriberDelivery] = []
        waiting = self._waiting
        while waiting:
            item = waiting.pop(self._next, None)
            if item is None:
                if not skip:
                    break
                oldest = min(at for _, at in waiting.values())
                if oldest + self.gap_wait > now:
                    break
                first = min(waiting)
                self._c["skipped"] += first - self._next
                self._next = first
                continue
            message, _ = item
            self._hash.update(f"{message.proc}\x00{message.msg}\n".encode())
            self._c["delivered"] += 1
            assert self.merger is not None
            out.append(SubscriberDelivery(self.merger, self._next, message.proc, message.msg,
                                          message.stamp, message.data, self.digest, now))
            self._next += 1
        return tuple(out)


def merger_subscription(codec: FrameCodec, name: str) -> bytes:
    """The SUB frame an upper-level merger sends to a lower one."""
    return codec.seal(KIND_PUBSUB, encode_sub(ROLE_MERGER, name))
