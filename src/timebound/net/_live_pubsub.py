"""Live check of causal pub-sub with replicated mergers (``python -m timebound.net.live
pubsub``): publishers -> two mergers -> one subscriber on each, over loopback UDP
(causal merge paper, section 4: Theorem 4.4, Lemma 4.2).

One run per seed, ``publishers=<P>``, in this process on 127.0.0.1 (ports the system
picks): ``PUBLISHERS`` live ``Publisher``\\ s of ``ds(EPSILON, DELTA)`` (ms) send every
message to both replicated ``MergerServer``\\ s, each through its own ``FaultProxy``
(one per merger, seeded apart), so the two mergers get the same messages in different
orders; one ``SubscriberClient`` subscribes to each merger directly. The proxies
delay every datagram by a uniform draw in ``[0, JITTER]`` and ``REORDER`` of them by
``REORDER_DELAY`` x ``[0.5, 1.5]`` more, at most ``JITTER + 1.5 REORDER_DELAY``
(28 ms) < ``DELTA`` (200 ms): the paper's G2, with the rest of delta left for this
machine's scheduling. Every node's clock is the system clock in ms plus an integer
offset drawn per seed in ``[-EPSILON // 2, EPSILON - EPSILON // 2]``, so any two
clocks differ by at most ``EPSILON`` (G1) and the mergers deliver at different
instants. Each publisher publishes at exponential gaps of mean ``1 / RATE`` s for
``SECONDS`` (``QUICK_SECONDS``), drawn from ``random.Random`` of the seed, with a
payload drawn from it too. Then the run waits for the last deadlines and for the
subscribers to have every message their merger forwarded, and closes everything.

What is measured (``_ObservedMerger`` reads each datagram as it reaches the merger's
handler, before the merger's core, and each delivery as the merger hands it out; the
times are the merger's own clock, ms):

- per subscriber, the ``(proc, msg)`` sequence it delivered; ``order_mismatches``:
  positions at which the two sequences, restricted to the messages both delivered,
  differ (0 exactly when the common messages came in one order: Theorem 4.4);
- whether order was at stake: ``arrival_order_differs`` (the same count over the
  two mergers' arrival sequences, first copies) and ``out_of_order_arrivals``
  (arrivals whose deadline ``r + c + delta + epsilon`` is earlier than that of a
  message the merger got before), with the proxies' ``reordered`` counters;
- buffering at the mergers, arrival -> delivery: ``max_buffering`` (the largest over
  both mergers, ms), against ``buffering_bound`` = delta + 3 epsilon (Lemma 4.2);
  beside it ``max_to_deadline`` (the core's own statistic: deadline - arrival, what
  the program waits), ``max_lateness`` and ``median_lateness`` (delivery - deadline:
  how late the merger's timer ran) and ``over_bound`` (deliveries buffered longer
  than the bound);
- the hypotheses as they held: ``clock_spread`` (largest minus smallest offset)
  against epsilon, ``longest_delay`` (publish -> arrival at a merger, ms of the system
  clock) against delta and the proxies' own most (``proxy_max_delay``); ``late`` and
  ``early`` drops at the mergers;
- ``loop_lateness_max``: how late (ms) a bare timer beside the run, in the same event
  loop, woke up at worst while the publishers ran and the mergers drained (it sleeps
  ``PROBE_EVERY``, ``probe_every`` ms): the lateness of the machine and the loop,
  apart from any merger rule.

Wall-clock timing: deliveries and delays include this machine's scheduling.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from collections.abc import Sequence
from typing import Any

from timebound.core.pubsub import Published, decode
from timebound.core.wire import FrameCodec
from timebound.errors import MalformedDatagram
from timebound.net._loop import run as run_loop
from timebound.net._proxy import FaultProxy, Faults
from timebound.net._pubsub import Address, MergerServer, MsClock, SubscriberClient
from timebound.net._pubsub import Publisher as LivePublisher

#: the system ``ds(EPSILON, DELTA)``, ms (delta long against this machine's timer
#: lateness, about 1 ms idle and 4-6 ms with both cores busy: ``timebound.claims``
#: judges a live row only when the lateness is at most a tenth of it)
EPSILON = 5
DELTA = 200
PUBLISHERS = 4
#: publications per second per publisher (exponential gaps), payload bytes
RATE = 150.0
PAYLOAD_BYTES = 32
#: seconds of publishing per run
SECONDS = 2.0
QUICK_SECONDS = 0.6
#: the proxies' faults on the publisher -> merger legs (seconds)
JITTER = 0.010
REORDER = 0.25
REORDER_DELAY = 0.012
#: longest wait for the subscriptions and for the subscribers to catch up (seconds)
SETTLE_SECONDS = 3.0
#: the bare timer's period beside the run (seconds)
PROBE_EVERY = 0.001
HOST = "127.0.0.1"
MERGERS = ("A", "B")

Runs = dict[str, dict[str, float]]
Key = tuple[str, int]


class _HeldClock(MsClock):
    """An ``MsClock`` that can be held at one reading (``hold``) until ``release``."""

    def __init__(self, offset: int) -> None:
        super().__init__(offset)
        self.held: int | None = None

    def now(self) -> int:
        return super().now() if self.held is None else self.held


class _ObservedMerger(MergerServer):
    """A ``MergerServer`` whose arrivals (read from each datagram before the core
    takes it, with the clock held at that reading while the core takes it, so the
    arrival time is the core's) and deliveries are recorded with the merger's clock."""

    def __init__(self, name: str, offset: int) -> None:
        self.held_clock = _HeldClock(offset)
        super().__init__(name, epsilon=EPSILON, delta=DELTA, host=HOST,
                         clock=self.held_clock, on_deliver=self._delivered)
        self._opener = FrameCodec()
        #: first arrival of each message: clock (ms), deadline, system time (ns)
        self.arrived: dict[Key, tuple[int, int, int]] = {}
        self.arrival_order: list[Key] = []
        self.out_of_order = 0
        self._latest_deadline = -1
        #: deliveries in order, with the merger's clock at each
        self.delivered: list[tuple[Key, int]] = []

    def _datagram(self, data: bytes, addr: Any) -> None:
        now = self.held_clock.held = self.held_clock.now()
        try:
            self._observe(data, now)
            super()._datagram(data, addr)
        finally:
            self.held_clock.held = None

    def _observe(self, data: bytes, now: int) -> None:
        opened = self._opener.open(data, now=now)
        try:
            body = decode(opened.body, now=now) if opened is not None else None
        except MalformedDatagram:
            body = None
        if isinstance(body, Published):
            key = (body.proc, body.msg)
            if key not in self.arrived:
                deadline = body.stamp.r + body.stamp.c + DELTA + EPSILON
                self.arrived[key] = (now, deadline, time.time_ns())
                self.arrival_order.append(key)
                if deadline < self._latest_deadline:
                    self.out_of_order += 1
                self._latest_deadline = max(self._latest_deadline, deadline)

    def _delivered(self, message: Published) -> None:
        self.delivered.append(((message.proc, message.msg), self.clock.now()))


def _plan(seed: int, seconds: float) -> tuple[list[int], list[tuple[float, int, bytes]]]:
    """The clock offsets (ms: the publishers', then the mergers') and every
    publication (time from the start, s; publisher; payload) of a seed's run."""
    rng = random.Random(seed)
    low = -(EPSILON // 2)
    offsets = [rng.randint(low, low + EPSILON) for _ in range(PUBLISHERS + len(MERGERS))]
    plan: list[tuple[float, int, bytes]] = []
    for p in range(PUBLISHERS):
        t = rng.expovariate(RATE)
        while t < seconds:
            plan.append((t, p, rng.randbytes(PAYLOAD_BYTES)))
            t += rng.expovariate(RATE)
    plan.sort(key=lambda x: (x[0], x[1]))
    return offsets, plan


def _mismatches(a: Sequence[Key], b: Sequence[Key]) -> tuple[int, int]:
    """Positions at which ``a`` and ``b``, restricted to their common items, differ;
    and how many items they have in common."""
    common = set(a) & set(b)
    ca = [k for k in a if k in common]
    cb = [k for k in b if k in common]
    return sum(x != y for x, y in zip(ca, cb)), len(common)


async def _read(sub: SubscriberClient, into: list[Key]) -> None:
    async for d in sub:
        into.append((d.proc, d.msg))


async def _probe(into: list[float]) -> None:
    """A bare timer in the same event loop: how late (ms) each ``PROBE_EVERY`` sleep
    wakes up, until cancelled."""
    loop = asyncio.get_running_loop()
    while True:
        before = loop.time()
        await asyncio.sleep(PROBE_EVERY)
        into.append((loop.time() - before - PROBE_EVERY) * 1000)


async def _until(condition: Any, seconds: float) -> bool:
    """Poll ``condition()`` every ms until it holds (True) or ``seconds`` pass."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while not condition():
        if loop.time() >= end:
            return False
        await asyncio.sleep(0.001)
    return True


async def _run(seed: int, seconds: float) -> dict[str, float]:
    offsets, plan = _plan(seed, seconds)
    mergers = [_ObservedMerger(name, offsets[PUBLISHERS + i])
               for i, name in enumerate(MERGERS)]
    proxies: list[FaultProxy] = []
    subs: list[SubscriberClient] = []
    pubs: list[LivePublisher] = []
    readers: list[asyncio.Task[None]] = []
    probe_lateness: list[float] = []
    sequences: list[list[Key]] = [[] for _ in MERGERS]
    sent_at: dict[Key, int] = {}
    started: list[Any] = []
    try:
        for i, m in enumerate(mergers):
            await m.start()
            started.append(m)
            proxy = FaultProxy(m.address, Faults(jitter=JITTER, reorder=REORDER,
                                                 reorder_delay=REORDER_DELAY),
                               host=HOST, seed=seed * 100 + i)
            await proxy.start()
            started.append(proxy)
            proxies.append(proxy)
        for m, seq in zip(mergers, sequences):
            sub = SubscriberClient(m.address, name=f"sub-{m.core.name}")
            await sub.start()
            started.append(sub)
            subs.append(sub)
            readers.append(asyncio.ensure_future(_read(sub, seq)))
        if not await _until(lambda: all(m.core.statistics().subscribers == 1
                                        for m in mergers), SETTLE_SECONDS):
            raise RuntimeError("the subscribers' leases were not taken")
        proxied: list[Address] = [p.address for p in proxies]
        for p in range(PUBLISHERS):
            pub = LivePublisher(f"p{p}", proxied, epsilon=EPSILON, delta=DELTA,
                                clock=MsClock(offsets[p]))
            await pub.start()
            started.append(pub)
            pubs.append(pub)
        readers.append(asyncio.ensure_future(_probe(probe_lateness)))
        loop = asyncio.get_running_loop()
        start = loop.time()
        for at, p, payload in plan:
            wait = start + at - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            pub = pubs[p]
            key = (pub.core.name, pub.core.published)
            sent_at[key] = time.time_ns()
            await pub.publish(payload)
        # the last copies arrive within delta, and are delivered within delta + 3 eps
        await asyncio.sleep((2 * DELTA + 3 * EPSILON) / 1000)
        await _until(lambda: all(
            m.core.statistics().buffered == 0 and len(seq) + s.core.statistics().skipped
            >= m.core.statistics().forwarded
            for m, s, seq in zip(mergers, subs, sequences)), SETTLE_SECONDS)
        readers[-1].cancel()
        stats = [m.core.statistics() for m in mergers]
        sub_stats = [s.core.statistics() for s in subs]
        proxy_stats = [p.stats for p in proxies]
    finally:
        for x in reversed(started):
            x.close()
        for r in readers:
            if not r.done():
                r.cancel()
        await asyncio.gather(*readers, return_exceptions=True)

    mismatches, common = _mismatches(sequences[0], sequences[1])
    arrivals_differ, _ = _mismatches(mergers[0].arrival_order, mergers[1].arrival_order)
    buffering = [at - m.arrived[key][0] for m in mergers for key, at in m.delivered]
    lateness = [at - m.arrived[key][1] for m in mergers for key, at in m.delivered]
    delays = [(ns - sent_at[key]) / 1e6 for m in mergers
              for key, (_, _, ns) in m.arrived.items() if key in sent_at]
    return {
        "epsilon": float(EPSILON),
        "delta": float(DELTA),
        "published": float(len(sent_at)),
        "delivered_1": float(len(sequences[0])),
        "delivered_2": float(len(sequences[1])),
        "common_delivered": float(common),
        "order_mismatches": float(mismatches),
        "arrival_order_differs": float(arrivals_differ),
        "out_of_order_arrivals": float(sum(m.out_of_order for m in mergers)),
        "proxy_reordered": float(sum(s.reordered for s in proxy_stats)),
        "max_buffering": float(max(buffering, default=0)),
        "buffering_bound": float(DELTA + 3 * EPSILON),
        "max_to_deadline": float(max(s.max_buffering for s in stats)),
        "max_lateness": float(max(lateness, default=0)),
        "median_lateness": float(statistics.median(lateness)) if lateness else 0.0,
        "over_bound": float(sum(b > DELTA + 3 * EPSILON for b in buffering)),
        "merger_delivered": float(sum(s.delivered for s in stats)),
        "late": float(sum(s.late for s in stats)),
        "early": float(sum(s.early for s in stats)),
        "skipped": float(sum(s.skipped for s in sub_stats)),
        "clock_spread": float(max(offsets) - min(offsets)),
        "longest_delay": max(delays, default=0.0),
        "proxy_max_delay": (JITTER + 1.5 * REORDER_DELAY) * 1000,
        "loop_lateness_max": max(probe_lateness, default=0.0),
        "probe_every": PROBE_EVERY * 1000,
    }


def measure(seed: int, quick: bool) -> Runs:
    """The run ``publishers=<PUBLISHERS>`` and its measures."""
    seconds = QUICK_SECONDS if quick else SECONDS
    return {f"publishers={PUBLISHERS}": run_loop(_run(seed, seconds), use_uvloop=False)}
