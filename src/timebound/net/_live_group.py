"""Live check of stable multicast groups (``python -m timebound.net.live group``):
timestamp acks against vector acks on live ``Group`` members over loopback UDP
(stability paper, section 4).

For every size N (2, 4, 8; ``quick``: 2, 4) and both ack modes, one run at a time, N
members of one group run in this process, each on its own socket at 127.0.0.1 (ports the
system picks), with an ack period ``ACK_EVERY`` (100 ms, five times the ``Group``
default: long against this machine's timer lateness). They carry
the same traffic in both modes: ``RATE`` messages per second per member of
``PAYLOAD_BYTES`` bytes, sent by members drawn from ``random.Random`` of the seed and
N, at gaps drawn from it (uniform over half to one and a half times the mean gap),
for ``SECONDS`` (``QUICK_SECONDS``). Then every member waits until its messages are
stable (at most ``DRAIN_SECONDS``) and the members close.

What is measured, per run ``N=<n>/<mode>``:

- the acks at the socket: every heartbeat frame a member sends is opened and decoded
  as it goes out (``_CountingGroup``); one heartbeat multicast to the other members is
  one ack, counted once with the bytes of its encoded ack (``encode_ack``: the same
  count the simulated ``stability`` job makes, ``ack_wire_bytes_per_s``, so the two
  columns compare) and with the whole frames the fan-out puts on the sockets
  (``heartbeat_wire_bytes_per_s``); rates are over a whole number of ack periods
  covering the run (counting starts and ends halfway between two heartbeat instants,
  which every member shares: they are multiples of the period on the system clock),
  so a member whose timer keeps time sends exactly one ack per period counted;
- the stability latency, send -> the sender learns its message is stable (the
  members' ``Stable`` events, µs of the system clock): mean, p99 and max;
- the one-way delivery delay (``Delivered``: arrival minus the message's timestamp;
  every member reads the same system clock), which on loopback is this machine's
  scheduling, not a network's delay;
- the counts: sent, stable, left unstable at the end.

Wall-clock timing: the latencies include the event loop's scheduling on this machine.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from collections.abc import Mapping
from typing import Any

from timebound.core.group import (
    Delivered,
    Event,
    GroupOutput,
    Stable,
    decode,
    encode_ack,
)
from timebound.core.wire import FrameCodec
from timebound.errors import MalformedDatagram
from timebound.net._clock import TICKS_PER_SECOND
from timebound.net._group import Address, Group
from timebound.net._loop import run as run_loop

#: group sizes (members; every member sends and receives)
SIZES = (2, 4, 8)
QUICK_SIZES = (2, 4)
MODES = ("timestamp", "vector")
#: the members' ack and nack period (seconds): five times the ``Group`` default, so
#: that this machine's timer lateness (about 1 ms idle, 4-6 ms with both cores busy)
#: stays below a tenth of it (``timebound.claims`` judges a live row only then)
ACK_EVERY = 0.1
#: messages per second per member (one per ack period), and their size (bytes)
RATE = 1 / ACK_EVERY
PAYLOAD_BYTES = 32
#: seconds of traffic per run (40 ack periods; --quick: 15)
SECONDS = 40 * ACK_EVERY
QUICK_SECONDS = 15 * ACK_EVERY
#: longest wait for the last messages to become stable (seconds)
DRAIN_SECONDS = 5.0
HOST = "127.0.0.1"

Runs = dict[str, dict[str, float]]


class _CountingGroup(Group):
    """A ``Group`` member that counts the heartbeats it puts on its socket: each one
    decoded from the frame as sent, its ack once per multicast, its frame once per
    destination."""

    def __init__(self, group: str, name: str, members: Mapping[str, Address],
                 **options: Any) -> None:
        super().__init__(group, name, members, **options)
        self._opener = FrameCodec()
        self.acks = 0
        self.ack_bytes = 0
        self.heartbeat_wire_bytes = 0

    def _send(self, out: GroupOutput) -> None:
        if self._transport is not None:
            last: bytes | None = None
            for _, frame in out.sends:
                if frame is last:
                    self.heartbeat_wire_bytes += len(frame)
                    continue
                opened = self._opener.open(frame)
                try:
                    body = decode(opened.body) if opened is not None else None
                except MalformedDatagram:
                    body = None
                ack = getattr(body, "ack", None)  # only a heartbeat carries an ack
                if ack is not None:
                    last = frame
                    self.acks += 1
                    self.ack_bytes += len(encode_ack(ack))
                    self.heartbeat_wire_bytes += len(frame)
        super()._send(out)


def _plan(seed: int, n: int, seconds: float) -> list[tuple[float, int]]:
    """(time from the start, s; sending member) of every message of a run."""
    rng = random.Random(seed * 1000 + n)
    gap = 1.0 / (RATE * n)
    out: list[tuple[float, int]] = []
    t = rng.uniform(0, gap)
    while t < seconds:
        out.append((t, rng.randrange(n)))
        t += rng.uniform(gap / 2, gap * 3 / 2)
    return out


async def _mid_period() -> int:
    """Sleep until halfway between two heartbeat instants (every member acks at the
    multiples of the ack period of the system clock); that instant, µs. A wake-up
    later than the next heartbeat instant tries the following period."""
    period = round(ACK_EVERY * TICKS_PER_SECOND)
    while True:
        now = time.time_ns() // 1000
        target = (now // period + 1) * period + period // 2
        await asyncio.sleep((target - now) / TICKS_PER_SECOND)
        if time.time_ns() // 1000 < target + period // 2:
            return target


def _p99(xs: list[int]) -> float:
    ordered = sorted(xs)
    return float(ordered[int(0.99 * (len(ordered) - 1))])


async def _run(seed: int, n: int, acks: str, seconds: float) -> dict[str, float]:
    names = [f"m{i}" for i in range(n)]
    latencies: list[int] = []
    delays: list[int] = []

    def on_event(name: str, event: Event) -> None:
        if isinstance(event, Stable):
            latencies.append(event.latency)
        elif isinstance(event, Delivered) and event.sender != name:
            delays.append(event.at - event.ts)

    local: Mapping[str, Address] = {x: (HOST, 0) for x in names}
    members = [_CountingGroup("live", x, local, acks=acks, ack_every=ACK_EVERY,
                              nack_every=ACK_EVERY, on_event=on_event) for x in names]
    started: list[_CountingGroup] = []
    try:
        for m in members:
            await m.start()
            started.append(m)
        bound = {m.name: m.address for m in members}
        for m in members:
            m.addresses.update(bound)
            await m.resolve_members()
        for m in members:  # every member heard from: no join acks while counting
            await m.wait_members(n, timeout=DRAIN_SECONDS)
        loop = asyncio.get_running_loop()
        counted_from = await _mid_period()
        before = [(m.acks, m.ack_bytes, m.heartbeat_wire_bytes) for m in members]
        payload = bytes(PAYLOAD_BYTES)
        start = loop.time()
        for at, who in _plan(seed, n, seconds):
            wait = start + at - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            await members[who].send(payload)
        try:
            async with asyncio.timeout(DRAIN_SECONDS):
                for m in members:
                    await m.wait_stable()
        except TimeoutError:
            pass
        counted_to = await _mid_period()
        elapsed = (counted_to - counted_from) / TICKS_PER_SECOND
        acked = [(m.acks - a, m.ack_bytes - b, m.heartbeat_wire_bytes - w)
                 for m, (a, b, w) in zip(members, before)]
        stats = [m.core.statistics() for m in members]
    finally:
        for m in started:
            m.close(leave=False)
    return {
        "sent": float(sum(s.sent for s in stats)),
        "stable": float(len(latencies)),
        "unstable": float(sum(s.buffered for s in stats)),
        "seconds": elapsed,
        "ack_every": ACK_EVERY * TICKS_PER_SECOND,
        "acks_per_s": sum(a for a, _, _ in acked) / n / elapsed,
        "ack_wire_bytes_per_s": sum(b for _, b, _ in acked) / elapsed,
        "heartbeat_wire_bytes_per_s": sum(w for _, _, w in acked) / elapsed,
        "latency_mean": statistics.fmean(latencies) if latencies else float("nan"),
        "latency_p99": _p99(latencies) if latencies else float("nan"),
        "latency_max": float(max(latencies)) if latencies else float("nan"),
        "delivery_mean": statistics.fmean(delays) if delays else float("nan"),
    }


async def _measure(seed: int, quick: bool) -> Runs:
    """One run at a time: the members of every run heartbeat at the same instants
    (multiples of the period), so runs at once would add their bursts up."""
    seconds = QUICK_SECONDS if quick else SECONDS
    runs: Runs = {}
    for n in QUICK_SIZES if quick else SIZES:
        for acks in MODES:
            runs[f"N={n}/{acks}"] = await _run(seed, n, acks, seconds)
    return runs


def measure(seed: int, quick: bool) -> Runs:
    """Runs ``N=<n>/timestamp`` and ``N=<n>/vector`` at every size, their measures."""
    return run_loop(_measure(seed, quick), use_uvloop=False)
