"""Live check ``channel`` (``python -m timebound.net.live channel``): the slotted paper's
schemes on live slotted-FIFO channels over a lossy, jittered loopback link (slotted
paper section 6, Figs. 5 and 7).

What runs, all on 127.0.0.1 with ports the system picks, the four schemes of a slot
length at once, at ``TIME_SCALE`` times the link's and the slots' base times: for every
slot length of the size (``Size.slots_ms``) and every scheme, a ``ChannelListener``
and a ``Channel`` to it through a ``FaultProxy`` that loses ``LOSS`` of the datagrams
(both ways: data and acknowledgments), delays each by up to ``JITTER`` (uniform) and
holds ``REORDER`` of them ``REORDER_DELAY`` longer (0.5-1.5 times), its draws seeded
by the seed. The application sends as section 6 says: an FR every slot length, and
between two, other messages at the gaps of a Poisson process of rate ``RATE`` per ms,
for ``Size.seconds_for`` the slot length (the first and last messages are FR,
Definition 4.1). The other
messages' kind is the scheme's (section 6.1):

- (a) every message FR: a reliable FIFO channel;
- (b) N (neither FIFO nor reliable), (c) F (FIFO, unreliable), (d) R (reliable, not
  FIFO), with the FRs opening each slot.

The link is ``benchmarks/bench_channel.py``'s at ``TIME_SCALE`` times its times.
Every scheme of a seed sends at the same instants (one plan drawn from
``random.Random`` of the seed and the slot length; only the kinds differ) through a
proxy seeded alike. The run ends when every reliable message is delivered, plus the
proxy's longest hold, so late unreliable datagrams are counted too.

What is measured, per run ``X/Ts=<µs>`` (X the scheme), from the service itself: the
listener's ``Delivery`` records (``arrived``, ``delivered``: the receiver's clock at
the transport-receive event and at delivery, µs) and its public ``statistics()``;
send times on the same clock (one ``Clock`` for both ends):

- ``fr_delay_ms``: the paper's FR delivery delay T_d (arrival -> delivery, mean) and
  ``fr_waited_pct``: the share of FRs that waited at all (T_d > 0);
  ``fr_delay_typical_ms``: T_d robust to one episode: the run's FRs in send order
  split into ``FR_GROUPS`` consecutive groups (of ``FR_GROUP_MIN`` FRs at least),
  the median of the groups' mean T_d.
  Why: in (b) and (c) an FR waits only for a lost FR before it, so most of their
  FRs wait not at all, and one FR lost again and again (its retransmissions too)
  holds every FR after it until it gets through. On seeds 1-12 (full size) this
  happened in 2 of the 24 runs of (b) and (c) at 10 ms slots: an FR held 131-133 ms
  and 11-13 FRs behind it put the run's mean T_d at 1.3-1.5 times min((a), (d)),
  where the other runs stay at 0.02-0.3. Such an episode touches one or two groups
  and leaves the median (0.18 at most on the same runs); a scheme whose FRs wait in
  most groups (as (a)'s and (d)'s do, behind every lost reliable message) keeps a
  median near its mean;
- ``fr_latency_median_ms``: FR send -> delivery, median, and ``fr_latency_max_ms``
  the longest (how long the latest slot opening kept the next slot's messages);
- ``queue_mean``: the resequencing buffer's time average, from the deliveries: the sum
  of (delivered - arrived) over the run's span (first send to last delivery), exact by
  Little's law because without ``f_hold`` every message the receiver buffers is later
  delivered (late unreliable ones are discarded on arrival, never buffered) and the
  last FR empties the buffer (``buffered_end``, from ``statistics()``, says so);
  split as the simulated ``slotted`` job splits it: ``queue_slot_mean`` (D1, waiting
  for the FR that opens the message's slot: slot s opens when the FR closing slot
  s - 1 is delivered) and ``queue_order_mean`` (D2, waiting inside the open slot: an
  F behind a missing F of its slot, an FR behind its slot's R);
  ``queue_max``: ``statistics()``'s ``max_buffered``;
- ``discard_pct_unreliable``: discards in percent of the N/F arrivals at the slotted
  layer (delivered + discarded N and F), with ``unreliable_arrived``;
- counts: ``sent``, ``fr`` (FRs delivered), ``delivered``, ``discarded``,
  ``datagrams_lost`` (the proxy's), ``retransmissions`` and ``rto_ms`` (the sender's
  retransmission timeout at the end of the run, ``statistics()``);
- the machine: ``send_late_max_ms`` (the latest send after its planned instant) and
  ``send_late_pct`` (sends more than ``LATE`` late). A held-up event loop sends its
  backlog in one burst, whose messages the jitter then mixes with the FR among them
  (discards) and whose retransmission timers fire late (FR delay): these say when a
  run measured the machine rather than the channel.

Wall-clock timing: the delays include this machine's scheduling; the loss, the
retransmission timeout (``MIN_RTO``, 200 ms) and the jitter make the ordering the
receiver has to repair.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import statistics
from dataclasses import dataclass
from typing import Any

from timebound.core.channel import Delivery
from timebound.core.slotted import Kind
from timebound.net._channel import Address, Channel, ChannelListener
from timebound.net._clock import Clock
from timebound.net._loop import run as run_loop
from timebound.net._proxy import FaultProxy, Faults

HOST = "127.0.0.1"
#: Every time of the check (the link's delays, the message rate's gaps, the channel's
#: retransmission timeouts, the slots, the sending time) is ``TIME_SCALE`` times that
#: of a link with 1 ms jitter, 5 ms reorder holds, a 20 ms timeout and 10-40 ms slots:
#: the same ratios between them, so the same schedule of losses and repairs, but in
#: times long enough that this machine's timer lateness (about 1 ms idle, 4-6 ms with
#: both cores busy) stays below a tenth of the shortest slot (``timebound.claims``
#: judges a live row only then). Each run reports it (``time_scale``): the slotted
#: rows' paper lengths ("up to 40 ms") are read at this scale.
TIME_SCALE = 10
#: The link: share of datagrams lost (each way), uniform delay up to ``JITTER`` s, and
#: the share held ``REORDER_DELAY`` s (0.5-1.5 times) longer.
LOSS = 0.05
JITTER = 0.001 * TIME_SCALE
REORDER = 0.05
REORDER_DELAY = 0.005 * TIME_SCALE
#: Messages per ms between two FRs (section 6.1: lambda = 1, at the scale's ms).
RATE = 1.0 / TIME_SCALE
#: The channel's retransmission timeout: at least ``MIN_RTO``, at most ``MAX_RTO`` s;
#: it gives a message up after ``GIVE_UP`` s.
MIN_RTO = 0.02 * TIME_SCALE
MAX_RTO = 1.0 * TIME_SCALE
GIVE_UP = 10.0 * TIME_SCALE
#: Payload of every message, bytes.
PAYLOAD = b"x" * 64
#: The sender's window (sequence numbers in flight).
WINDOW = 1024
#: A send this much past its planned instant (s) counts as late: the event loop was
#: held up (a loaded machine), and the late sends leave in a burst.
LATE = 0.002 * TIME_SCALE
#: Longest wait for a run's reliable messages, s.
DRAIN_SECONDS = 60.0
#: ``fr_delay_typical_ms``: the FRs of a run are split into this many consecutive
#: groups, and the median of the groups' mean T_d is taken; fewer groups if a group
#: would hold fewer than ``FR_GROUP_MIN`` FRs (a group of (d)'s, whose FRs wait on
#: most slots, must not be empty of waits by chance; --quick's 10 FRs make two
#: groups, whose median is the mean).
FR_GROUPS = 5
FR_GROUP_MIN = 5
#: The other messages' kind per scheme (section 6.1 (a)-(d)).
SCHEMES = {"a": Kind.FR, "b": Kind.N, "c": Kind.F, "d": Kind.R}


@dataclass(frozen=True)
class Size:
    """One size of the check: the slot lengths (ms), the sending time per run (s), and
    the fewest slots a run holds (a longer slot sends for longer: ``seconds_for``)."""

    slots_ms: tuple[int, ...]
    seconds: float
    min_slots: int = 0

    def seconds_for(self, slot_ms: int) -> float:
        """Sending time of a run at ``slot_ms``: ``seconds``, or ``min_slots`` slots."""
        return max(self.seconds, self.min_slots * slot_ms / 1000)


#: 100 ms slots: 70 FRs in 7 s; 400 ms slots: 25 (10 s) rather than 18, so each of the
#: ``FR_GROUPS`` groups holds five FRs.
FULL = Size(slots_ms=(10 * TIME_SCALE, 40 * TIME_SCALE), seconds=0.7 * TIME_SCALE,
            min_slots=25)
QUICK = Size(slots_ms=(40 * TIME_SCALE,), seconds=0.4 * TIME_SCALE)

Runs = dict[str, dict[str, float]]


def plan(seed: int, slot_ms: int, seconds: float) -> list[tuple[float, bool]]:
    """(send time from the start, s; whether it is an FR) of every message of a run:
    an FR at 0 and every slot length, Poisson gaps of mean 1/``RATE`` ms between."""
    rng = random.Random(seed * 1000 + slot_ms)
    slot = slot_ms / 1000
    out = [(k * slot, True) for k in range(int(seconds / slot) + 1)]
    end = out[-1][0]
    t = rng.expovariate(RATE * 1000)
    while t < end:
        out.append((t, False))
        t += rng.expovariate(RATE * 1000)
    out.sort()
    return out


def typical_delay(delays: list[float]) -> float:
    """``delays`` (in send order) split into ``FR_GROUPS`` consecutive groups (fewer,
    at least one, if a group would hold fewer than ``FR_GROUP_MIN``): the median of
    the groups' means."""
    k = max(1, min(FR_GROUPS, len(delays) // FR_GROUP_MIN))
    n = len(delays)
    return statistics.median(statistics.fmean(delays[i * n // k:(i + 1) * n // k])
                             for i in range(k))


async def _run(scheme: str, slot_ms: int, seed: int, size: Size) -> dict[str, float]:
    other = SCHEMES[scheme]
    sends = plan(seed, slot_ms, size.seconds_for(slot_ms))
    reliable = sum(1 for _, fr in sends if fr or other.reliable)
    faults = Faults(loss=LOSS, jitter=JITTER, reorder=REORDER, reorder_delay=REORDER_DELAY)
    clock = Clock()
    sent_us: dict[int, int] = {}
    lateness: list[float] = []  # s each message left after its planned instant
    got: list[Delivery[Address]] = []
    done = asyncio.Event()
    async with ChannelListener(host=HOST, clock=clock) as listener:
        async with FaultProxy(listener.address, faults, seed=seed) as proxy:

            async def collect() -> None:
                count = 0
                async for d in listener:
                    got.append(d)
                    if d.kind.reliable:
                        count += 1
                        if count == reliable:
                            done.set()

            collector = asyncio.ensure_future(collect())
            try:
                async with Channel(proxy.address, clock=clock, window=WINDOW,
                                   min_rto=MIN_RTO, max_rto=MAX_RTO,
                                   give_up=GIVE_UP) as channel:
                    loop = asyncio.get_running_loop()
                    start = loop.time()
                    for at, fr in sends:
                        pause = start + at - loop.time()
                        if pause > 0:
                            await asyncio.sleep(pause)
                        now = clock.now()
                        seq = await channel.send(PAYLOAD, Kind.FR if fr else other)
                        sent_us[seq] = now
                        lateness.append(loop.time() - start - at)
                    await asyncio.wait_for(done.wait(), DRAIN_SECONDS)
                    sender = channel.statistics()
                # late unreliable datagrams: the proxy's longest hold
                await asyncio.sleep(JITTER + 1.5 * REORDER_DELAY + 0.005 * TIME_SCALE)
                stats = listener.statistics()
                lost = proxy.stats.lost
            finally:
                collector.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await collector
    return _measures(sends, sent_us, got, stats, lost, sender, lateness)


def _measures(sends: list[tuple[float, bool]], sent_us: dict[int, int],
              got: list[Delivery[Address]], stats: dict[str, Any], lost: int,
              sender: dict[str, Any], lateness: list[float]) -> dict[str, float]:
    frs = [d for d in got if d.kind is Kind.FR]  # in send order (FIFO)
    fr_delay = [(d.delivered - d.arrived) / 1000 for d in frs]
    latency = [(d.delivered - sent_us[d.id]) / 1000 for d in frs]
    first = min(sent_us.values())
    span = max(d.delivered for d in got) - first
    waited = sum(d.delivered - d.arrived for d in got)
    # slot s opens when the FR closing slot s - 1 is delivered (slot 0: at once)
    opened = {d.slot + 1: d.delivered for d in frs}
    d1 = d2 = 0
    for d in got:
        at = max(d.arrived, min(d.delivered, opened.get(d.slot, d.arrived)))
        d1 += at - d.arrived
        d2 += d.delivered - at
    delivered: dict[str, int] = stats["delivered"]
    thrown = sum(stats["discarded"].values())
    unreliable = delivered["N"] + delivered["F"] + thrown
    return {
        "fr_delay_ms": statistics.fmean(fr_delay),
        "fr_waited_pct": 100 * sum(1 for x in fr_delay if x > 0) / len(fr_delay),
        "fr_delay_typical_ms": typical_delay(fr_delay),
        "fr_latency_median_ms": statistics.median(latency),
        "fr_latency_max_ms": max(latency),
        "queue_mean": waited / max(span, 1),
        "queue_slot_mean": d1 / max(span, 1),
        "queue_order_mean": d2 / max(span, 1),
        "queue_max": float(stats["max_buffered"]),
        "buffered_end": float(stats["buffered"]),
        "discard_pct_unreliable": 100 * thrown / unreliable if unreliable else 0.0,
        "unreliable_arrived": float(unreliable),
        "sent": float(len(sends)),
        "fr": float(len(frs)),
        "delivered": float(len(got)),
        "discarded": float(thrown),
        "datagrams_lost": float(lost),
        "retransmissions": float(sender["retransmissions"]),
        "rto_ms": sender["rto"] / 1000,
        "send_late_max_ms": max(lateness) * 1000,
        "send_late_pct": 100 * sum(1 for x in lateness if x > LATE) / len(lateness),
        "time_scale": float(TIME_SCALE),
    }


async def _measure(seed: int, size: Size) -> Runs:
    """The four schemes of a slot length run at once (each its own listener, proxy
    and channel, at the same planned instants); the slot lengths one after another."""
    runs: Runs = {}
    for slot_ms in size.slots_ms:
        got = await asyncio.gather(*(_run(x, slot_ms, seed, size) for x in SCHEMES))
        runs.update({f"{x}/Ts={slot_ms * 1000}": v for x, v in zip(SCHEMES, got)})
    return runs


def measure(seed: int, quick: bool) -> Runs:
    """Runs ``X/Ts=<µs>`` for every scheme X of ``SCHEMES`` and slot length, their
    measures (module docstring)."""
    return run_loop(_measure(seed, QUICK if quick else FULL), use_uvloop=False)
