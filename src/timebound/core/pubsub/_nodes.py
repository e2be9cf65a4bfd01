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
  datagram waits for the gap at most ``gap_wait`` ms; a lost one is skipped and
  counted, ``skipped``) and keeps a running SHA-256 digest of the ``(proc, msg)``
  order it delivered, so two subscribers can be compared line by line. It renews its
  lease every ``LEASE_RENEW`` ms until ``leave()``; ``next_deadline()`` is None when
  no renewal and no gap wait is pending.

On a hostile network:

- *Range checks.* Every decoded frame passes ``_wire.out_of_range`` (stamp counters
  ``c < eps`` and ``kn <= n``, message ids, FWD sequence numbers) before anything is
  stored: a frame that fails is dropped and counted (``out_of_range``), so nothing
  accepted can fail later when the merger forwards it (a PUB with ``c >= eps`` used
  to be buffered, then raised in ``encode_fwd`` and took the legitimate publications
  delivered in the same batch with it). A merger holds at most ``max_pending``
  messages (default ``MAX_PENDING``; beyond: dropped, ``overflow``); a subscriber
  drops a FWD numbered ``max_waiting`` or more beyond its next one (``out_of_range``).
  Pinned by ``tests/test_net_pubsub_hostile.py``.
- *Address validation* (QUIC's token, RFC 9000 section 8; DTLS's cookie). A merger
  built with a ``secret`` (the driver draws 32 random bytes; the core has no
  randomness) leases only to a SUB carrying a token it issued to that source
  address: HMAC(secret, issue time + address), valid ``TOKEN_LIFETIME`` ms. Any
  other SUB gets a CHAL with a fresh token, and only if the SUB was at least a third
  of the CHAL's size (so the answer to an unvalidated address is at most 3x what it
  sent); the subscriber echoes the token in its SUB at once and in every renewal
  (``Subscriber`` does it by itself). An upper merger does the same with the lower
  mergers it subscribes to (``upstream``: the only sources whose CHAL it answers).
  Leases are bounded (``max_subscribers``, default ``MAX_SUBSCRIBERS``). A merger
  answers nothing else: PUBs and FWDs get no reply. Without a ``secret`` (in-memory
  use only) every SUB takes a lease, as before.

Verbs: ``publish``/``receive(datagram, peer, *, now)``, ``handle_timer(*, now)``,
``next_deadline()``, ``statistics()``, a subscriber's ``leave()``. A merger's ``receive`` and ``handle_timer``
return a ``MergerOutput``, a subscriber's a ``SubscriberOutput`` (frames for its
merger, deliveries), as every other core returns its output record; the answer to a
CHAL is in the output of the ``receive`` that took it.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from timebound.core.causal import CausalProcess, Timestamp
from timebound.core.merge import Envelope, Merger, level_parameters
from timebound.core.pubsub._wire import (
    ROLE_MERGER,
    ROLE_SUBSCRIBER,
    TOKEN_BYTES,
    Challenge,
    Forwarded,
    Published,
    Subscribe,
    check_name,
    decode,
    encode_challenge,
    encode_fwd,
    encode_pub,
    encode_sub,
    out_of_range,
)
from timebound.core.wire import KIND_PUBSUB, FrameCodec
from timebound.errors import MalformedDatagram, ProtocolUsageError

P = TypeVar("P", bound=Hashable)

#: A subscriber renews its lease every LEASE_RENEW ms; a merger drops it after LEASE.
LEASE_RENEW = 1000
LEASE = 3500
#: Most subscribers (and upper mergers) a merger forwards to.
MAX_SUBSCRIBERS = 1024
#: Most messages a merger holds waiting for their deadline.
MAX_PENDING = 65536
#: How long (ms) a merger's address-validation token stays valid.
TOKEN_LIFETIME = 60_000
#: Shortest merger secret, bytes.
MIN_SECRET_BYTES = 16
_U32 = 0xFFFFFFFF


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
    out_of_range: int = 0
    overflow: int = 0
    challenges: int = 0  # CHALs sent
    unvalidated: int = 0  # SUBs without a valid token (challenged or not)
    refused: int = 0  # validated SUBs refused: max_subscribers leases held


@dataclass(slots=True)
class _MergerCounters:
    """A merger's own counters (the ``Merger``'s are read from it)."""

    mismatched: int = 0
    early: int = 0
    malformed: int = 0
    out_of_range: int = 0
    overflow: int = 0
    challenges: int = 0
    unvalidated: int = 0
    refused: int = 0


@dataclass(frozen=True, slots=True)
class MergerOutput(Generic[P]):
    sends: tuple[tuple[P, bytes], ...] = ()
    delivered: tuple[Published, ...] = ()


class MergerNode(Generic[P]):
    """One merger of ``ds(epsilon, delta)`` (see the module docstring)."""

    def __init__(self, name: str, epsilon: int, delta: int, n: int, codec: FrameCodec, *,
                 max_subscribers: int = MAX_SUBSCRIBERS, max_pending: int = MAX_PENDING,
                 secret: bytes | None = None, upstream: Iterable[P] = ()) -> None:
        _check_system(epsilon, delta, n)
        if secret is not None and len(secret) < MIN_SECRET_BYTES:
            raise ProtocolUsageError(f"a merger secret needs {MIN_SECRET_BYTES}+ bytes")
        self.name = check_name(name)
        self.epsilon, self.delta, self.n = epsilon, delta, n
        self.out_delta = level_parameters(epsilon, delta)[1]
        self.codec = codec
        self.merger = Merger(epsilon, delta, retain=delta + 4 * epsilon)
        self.max_subscribers = max_subscribers
        self.max_pending = max_pending
        self.secret = secret
        self.upstream = set(upstream)
        self._subs: dict[P, int] = {}  # peer -> lease expiry
        self._messages: dict[tuple[str, str], Published] = {}
        self._tokens: dict[P, bytes] = {}  # upstream peer -> its latest token to us
        self._seq = 0
        self._c = _MergerCounters()

    def next_deadline(self) -> int | None:
        due = self.merger.next_deadline()
        if self._subs:
            expiry = min(self._subs.values())
            due = expiry if due is None else min(due, expiry)
        return due

    def statistics(self) -> MergerNodeStatistics:
        s = self.merger.statistics()
        c = self._c
        return MergerNodeStatistics(
            received=s.received, delivered=s.delivered, late=s.late,
            duplicates=s.duplicates, buffered=s.buffered, max_buffered=s.max_buffered,
            total_buffering=s.total_buffering, max_buffering=s.max_buffering,
            forwarded=self._seq, subscribers=len(self._subs), mismatched=c.mismatched,
            early=c.early, malformed=self.codec.malformed + c.malformed,
            unauthenticated=self.codec.unauthenticated, out_of_range=c.out_of_range,
            overflow=c.overflow, challenges=c.challenges, unvalidated=c.unvalidated,
            refused=c.refused,
        )

    def token(self, peer: P, *, now: int) -> bytes:
        """The address-validation token for ``peer`` issued at ``now``."""
        if self.secret is None:
            raise ProtocolUsageError("a merger without a secret issues no tokens")
        issued = (now & _U32).to_bytes(4, "big")
        mac = hmac.new(self.secret, issued + repr(peer).encode(), hashlib.sha256)
        return issued + mac.digest()[:TOKEN_BYTES - 4]

    def _valid(self, token: bytes, peer: P, now: int) -> bool:
        if len(token) != TOKEN_BYTES:
            return False
        issued = int.from_bytes(token[:4], "big")
        if (now - issued) & _U32 > TOKEN_LIFETIME:
            return False
        return hmac.compare_digest(token, self.token(peer, now=issued))

    def upstream_subscription(self, peer: P) -> bytes:
        """The SUB to send the lower merger ``peer`` (with its latest token)."""
        return self.codec.seal(KIND_PUBSUB, encode_sub(ROLE_MERGER, self.name,
                                                       self._tokens.get(peer, b"")))

    def _subscribe(self, body: Subscribe, size: int, peer: P, now: int
                   ) -> MergerOutput[P]:
        if self.secret is not None and not self._valid(body.token, peer, now):
            self._c.unvalidated += 1
            frame = self.codec.seal(KIND_PUBSUB, encode_challenge(self.token(peer, now=now)))
            if len(frame) > 3 * size:
                return MergerOutput()  # would amplify: a real SUB is never this short
            self._c.challenges += 1
            return MergerOutput(((peer, frame),))
        if peer in self._subs or len(self._subs) < self.max_subscribers:
            self._subs[peer] = now + LEASE
        else:
            self._c.refused += 1
        return MergerOutput()

    def receive(self, datagram: bytes, peer: P, *, now: int) -> MergerOutput[P]:
        opened = self.codec.open(datagram, now=now)
        if opened is None:
            return MergerOutput()
        if opened.kind != KIND_PUBSUB:
            self._c.malformed += 1
            return MergerOutput()
        try:
            body = decode(opened.body, now=now)
        except MalformedDatagram:
            self._c.malformed += 1
            return MergerOutput()
        if isinstance(body, Subscribe):
            return self._subscribe(body, len(datagram), peer, now)
        if isinstance(body, Challenge):
            if peer not in self.upstream:
                self._c.unvalidated += 1
                return MergerOutput()
            self._tokens[peer] = body.token
            return MergerOutput(((peer, self.upstream_subscription(peer)),))
        if out_of_range(body) is not None:
            self._c.out_of_range += 1
            return MergerOutput()
        message = body.message if isinstance(body, Forwarded) else body
        if (message.epsilon, message.delta, message.n) != (self.epsilon, self.delta, self.n):
            self._c.mismatched += 1
            return MergerOutput()
        if message.stamp.r > now + self.epsilon:
            self._c.early += 1  # from the future: G1 broken, or a late copy (see _wire)
            return MergerOutput()
        key = (message.proc, str(message.msg))
        if len(self._messages) >= self.max_pending and key not in self._messages:
            self._c.overflow += 1
            return MergerOutput()
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
class SubscriberOutput:
    """What a subscriber's verb gives: frames for its merger (a SUB: the first, a
    renewal, or the answer to a CHAL) and deliveries in the merger's order."""

    sends: tuple[bytes, ...] = ()
    delivered: tuple[SubscriberDelivery, ...] = ()


_NO_OUTPUT = SubscriberOutput()


@dataclass(slots=True)
class _SubscriberCounters:
    delivered: int = 0
    skipped: int = 0
    duplicates: int = 0
    foreign: int = 0
    malformed: int = 0
    out_of_range: int = 0
    challenges: int = 0


@dataclass(frozen=True, slots=True)
class SubscriberStatistics:
    delivered: int
    skipped: int
    duplicates: int
    foreign: int
    waiting: int
    malformed: int
    unauthenticated: int
    out_of_range: int = 0
    challenges: int = 0  # CHALs answered


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
        self._renew: int | None = now  # the next SUB; None once it has left
        self._token = b""
        self._c = _SubscriberCounters()

    @property
    def digest(self) -> str:
        return self._hash.hexdigest()

    def subscription(self) -> bytes:
        """The SUB frame (the driver sends it now and at every ``handle_timer``), with
        the merger's latest token."""
        return self.codec.seal(KIND_PUBSUB, encode_sub(ROLE_SUBSCRIBER, self.name,
                                                       self._token))

    def next_deadline(self) -> int | None:
        """The next renewal, or the end of the oldest gap wait if sooner; None when
        neither is pending (after ``leave``, with no FWD waiting for a gap)."""
        due = self._renew
        if self._waiting:
            gap = min(at for _, at in self._waiting.values()) + self.gap_wait
            due = gap if due is None else min(due, gap)
        return due

    def leave(self) -> None:
        """Stop renewing the subscription (there is no unsubscribe frame: the merger
        drops the lease ``LEASE`` ms after the last renewal). FWDs that still come are
        delivered as before; a CHAL is no longer answered."""
        self._renew = None

    def statistics(self) -> SubscriberStatistics:
        c = self._c
        return SubscriberStatistics(c.delivered, c.skipped, c.duplicates, c.foreign,
                                    len(self._waiting), self.codec.malformed + c.malformed,
                                    self.codec.unauthenticated, c.out_of_range,
                                    c.challenges)

    def receive(self, datagram: bytes, *, now: int) -> SubscriberOutput:
        opened = self.codec.open(datagram, now=now)
        if opened is None:
            return _NO_OUTPUT
        if opened.kind != KIND_PUBSUB:
            self._c.malformed += 1
            return _NO_OUTPUT
        try:
            body = decode(opened.body, now=now)
        except MalformedDatagram:
            self._c.malformed += 1
            return _NO_OUTPUT
        if isinstance(body, Challenge):
            if self._renew is None:
                return _NO_OUTPUT  # left: no subscription to validate
            # the driver's socket is connected to the merger: only it (or a spoofer,
            # whose token the merger then refuses) reaches here; answer at once
            self._c.challenges += 1
            self._token = body.token
            self._renew = now + LEASE_RENEW
            return SubscriberOutput((self.subscription(),))
        if not isinstance(body, Forwarded):
            return _NO_OUTPUT
        if out_of_range(body) is not None or (
                self.merger is not None and body.seq >= self._next + self.max_waiting):
            self._c.out_of_range += 1
            return _NO_OUTPUT
        if self.merger is None:
            self.merger = body.merger
            self._next = body.seq  # join the stream where it is
        if body.merger != self.merger:
            self._c.foreign += 1
            return _NO_OUTPUT
        if body.seq < self._next or body.seq in self._waiting:
            self._c.duplicates += 1
            return _NO_OUTPUT
        if len(self._waiting) >= self.max_waiting:
            return _NO_OUTPUT
        self._waiting[body.seq] = (body.message, now)
        delivered = self._drain(now, skip=False)
        return SubscriberOutput((), delivered) if delivered else _NO_OUTPUT

    def handle_timer(self, *, now: int) -> SubscriberOutput:
        """Deliveries past expired gaps, and the SUB renewal when it is due."""
        sends: tuple[bytes, ...] = ()
        if self._renew is not None and now >= self._renew:
            self._renew = now + LEASE_RENEW
            sends = (self.subscription(),)
        delivered = self._drain(now, skip=True)
        return SubscriberOutput(sends, delivered) if sends or delivered else _NO_OUTPUT

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
                self._c.skipped += first - self._next
                self._next = first
                continue
            message, _ = item
            self._hash.update(f"{message.proc}\x00{message.msg}\n".encode())
            self._c.delivered += 1
            assert self.merger is not None
            out.append(SubscriberDelivery(self.merger, self._next, message.proc, message.msg,
                                          message.stamp, message.data, self.digest, now))
            self._next += 1
        return tuple(out)


def merger_subscription(codec: FrameCodec, name: str, token: bytes = b"") -> bytes:
    """The SUB frame an upper-level merger sends to a lower one (``MergerNode.
    upstream_subscription`` adds the lower merger's latest token)."""
    return codec.seal(KIND_PUBSUB, encode_sub(ROLE_MERGER, name, token))
