"""Scenario ``stability``: timestamp vs vector acknowledgments (Berket et al.).

Two modes, both driving the core ``StabilityNode`` (Fig. 1) and writing the ``acks``
table (rows ``send``/``recv``/``ack``/``ackrecv``; ``at`` is true time, ``ts`` the
sender's clock) plus the core's answers (``sim_acks``):

- ``fig2`` (deterministic latency matrix, the paper's Fig. 2 network): senders s1, s2,
  receivers r1, r2; message latencies ``l(s1, r) = 2``, ``l(s2, r) = 5``, ack
  latencies ``l(r, s1) = 4``, ``l(r, s2) = 8`` (read off the worked example: 2 + 1 + 4
  = 7 and 5 + 1 + 8 = 14); every sender sends and every receiver acknowledges once per
  time unit, perfectly synchronized clocks. The paper's figures (vector: 7 at s1, 14
  at s2; timestamp: 11 at s1) are bounds ("no later than") that count one full period
  for every periodic wait: t_ack for the ack, and for timestamp acks also t_send for
  s2's next message. Runs ``fig2/vector``, ``fig2/timestamp`` (1 tick per unit) have
  every node act at the same instants, acks after that instant's arrivals, so no
  message waits for a period: 6, 13 and 9, each the paper's figure less t_ack (less
  t_send + t_ack for timestamp). Runs ``fig2/vector-worst``, ``fig2/timestamp-worst``
  (``FIG2_TICKS`` ticks per unit, in the run's name: ``.../ticks=8``) take the phases the figures assume: each ack fires
  just before the arrival it acknowledges (a full t_ack of wait) and, for timestamp
  acks, s2 sends one tick before s1. They give 7 and 14 exactly, and 11 less one tick:
  a message s2 sends at m1's instant carries m1's timestamp and covers it, so m1 waits
  at most t_send less one tick for s2 (the paper's t_send is a bound approached, never
  reached). Latencies are written in ticks.
- ``sweep``: N senders x N receivers for N in ``sizes``: each sender sends every
  ``t_send``, each receiver acknowledges every ``t_ack`` (jittered phases), channels
  FIFO and reliable (the protocol's assumption, section 3) with delay
  ``delay``; runs: timestamp/physical, vector/physical, timestamp/logical (Lamport,
  section 5) and timestamp/physical with skewed clocks (``skew``); with ``uneven`` > 1
  also timestamp/physical and timestamp/logical with uneven send rates (Fig. 3: s1
  sends ``uneven`` times as often as every other sender); ``variants`` picks which of
  the first four run (the ack-bandwidth runs at large N need only timestamp and
  vector). Measured: ack bytes per second, mean and max stability latency, mean and
  max send-buffer occupancy, and Theorem 1 (a) on every message made stable: each
  receiver's entry for its sender (FIFO: the largest timestamp delivered from it) at
  or above its timestamp (``stable_checked`` messages, ``stable_unreceived``
  (message, receiver) pairs where it is not).
Time unit: fig2, the paper's time unit; sweep, 1 tick = 1 microsecond.

Ack bytes, two ways: ``ack_bytes_per_s`` counts the core's ack objects (8 B per
timestamp value, the paper's count), ``ack_wire_bytes_per_s`` the bytes the live group
puts on the wire for the same acks (``timebound.core.group.encode_ack``: ``01
value:u64`` for a timestamp ack, ``02 n:u16 (name_len:u8 name value:u64)*n`` for a
vector ack; ``docs/wire.md``), so the bandwidth claim is measured on the encoding a
deployment sends, names and all.

Controlled skew: the skewed run's sender offsets are spread evenly over ``[-skew/2,
skew/2]`` (lowest ``-(skew // 2)``, highest exactly ``skew`` above it, so the spread is
``skew`` at every N >= 2 and every seed) and dealt to the senders in an order shuffled
per seed. Drawing each offset independently (as before) left the spread to chance: at
N = 2 it was sometimes a few ms of a 20 ms skew, and the latency it adds with it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from timebound.core.group import encode_ack
from timebound.core.stability import AckMode, ClockMode, StabilityNode, TimestampAck
from timebound.measures import STABILITY, finish
from timebound.sim._clocks import Clock
from timebound.sim._dataset import DatasetWriter
from timebound.sim._engine import LATE, URGENT, Engine
from timebound.sim._links import parse_delay
from timebound.sim._scenario import Param, Progress, Scenario, clocked, in_run
from timebound.sim.scenarios._amo import MetricRows, shown, write_metrics

#: the sweep's runs at every N (label, ack mode, clock mode, skewed clocks)
SWEEP: tuple[tuple[str, AckMode, ClockMode, bool], ...] = (
    ("timestamp", AckMode.TIMESTAMP, ClockMode.PHYSICAL, False),
    ("vector", AckMode.VECTOR, ClockMode.PHYSICAL, False),
    ("timestamp-logical", AckMode.TIMESTAMP, ClockMode.LAMPORT, False),
    ("timestamp-skewed", AckMode.TIMESTAMP, ClockMode.PHYSICAL, True),
)
VARIANTS = tuple(label for label, _, _, _ in SWEEP)

PARAMS = (
    Param("modes", "fig2 (deterministic Fig. 2 network) and/or sweep", "fig2,sweep", "list",
          choices=("fig2", "sweep")),
    Param("fig2_duration", "time units of the Fig. 2 run", "200", lo=20),
    Param("sizes", "N values of the sweep (N senders x N receivers)", "2,4,8,16",
          "intlist", lo=1, hi=256),
    Param("t_send", "sweep: sending period (ticks)", "1000", lo=1),
    Param("t_ack", "sweep: acknowledgment period (ticks)", "1000", lo=1),
    Param("delay", "sweep: one-way delay, messages and acks (ticks)",
          "exponential:5000:1000", "delay"),
    Param("skew", "sweep: the skew run's clock offsets, spread evenly over [-skew/2, "
          "skew/2] (spread exactly skew) and dealt to the senders in a per-seed order",
          "20000", lo=0),
    Param("duration", "sweep: simulated time per run (ticks)", "3000000", lo=10_000),
    Param("uneven", "sweep: runs with uneven send rates (section 5, Fig. 3): s1 sends every "
          "t_send, the other senders every uneven * t_send; 1 = no such runs", "5",
          lo=1, hi=1000),
    Param("variants", "sweep: which runs at every N (the uneven ones follow uneven)",
          ",".join(VARIANTS), "list", choices=VARIANTS),
)

CLAIMS = (
    {"paper": "stability", "claim": "Fig. 2: vector acks make m1 stable within 7 at s1 and "
     "14 at s2", "measure": "fig2 max latency (vector)",
     "expected": "worst phase s1 = 7, s2 = 14; aligned: t_ack less"},
    {"paper": "stability", "claim": "Fig. 2: timestamp acks make m1 stable within 11 at s1",
     "measure": "fig2 max latency (timestamp)",
     "expected": "worst phase s1 = 11 less one tick; aligned: t_send + t_ack less"},
    {"paper": "stability", "claim": "timestamp acks use O(N_r) bandwidth, vector acks "
     "O(N_r N_s)", "measure": "ack_bytes_per_s", "expected": "ratio ~ N"},
    {"paper": "stability", "claim": "latency only slightly larger with timestamp acks; "
     "logical clocks and clock skew increase it", "measure": "latency_mean",
     "expected": "vector <= timestamp/physical < logical, skewed"},
)


class _Net:
    """N senders, M receivers; drives StabilityNodes and records rows."""

    def __init__(self, ds: DatasetWriter, run: str, senders: list[str],
                 receivers: list[str], mode: AckMode, clock: ClockMode,
                 latency: Callable[[str, str], int], clocks: dict[str, Clock] | None) -> None:
        self.ds = ds
        self.run = run
        self.rows = ds.table("acks")
        self.answers = ds.table("sim_acks")
        self.engine = Engine()
        self.mode = mode
        self.senders = senders
        self.receivers = receivers
        self.latency = latency
        self.clocks = clocks
        self.opts = (mode.value, ",".join(senders), ",".join(receivers))
        self.nodes = {s: StabilityNode(s, receivers=receivers, acks=mode, clock=clock)
                      for s in senders}
        self.nodes.update({r: StabilityNode(r, senders=senders, acks=mode)
                           for r in receivers})
        self.seq = 0
        self.acks = 0
        self.fifo: dict[tuple[str, str], int] = {}
        self.ack_bytes = 0
        self.ack_wire_bytes = 0
        self.stable_checked = 0
        self.stable_unreceived = 0  # (stable message, receiver without it) pairs

    def _row(self, kind: str, node: str, frm: str | None, ts: int | None, ident: str | None,
             ack: str | None, delivered: bool | None, stable: list[int] | None) -> None:
        self.seq += 1
        self.rows.add((self.run, self.seq, kind, node, frm, ts, self.engine.now, ident, ack)
                      + self.opts)
        self.answers.add((self.run, self.seq, delivered, stable))

    def _later(self, src: str, dst: str) -> int:
        """FIFO channel: never arrive before the previous datagram of the channel."""
        when = self.engine.now + self.latency(src, dst)
        key = (src, dst)
        when = max(when, self.fifo.get(key, 0))
        self.fifo[key] = when
        return when

    def send(self, sender: str) -> None:
        node = self.nodes[sender]
        now = self.engine.now
        ts = None
        if self.clocks is not None:
            ts = self.clocks[sender].monotonic(now, strict=True)
        sent = node.send(now=now, ts=ts)
        self._row("send", sender, None, sent.ts, None, None, None, None)
        for r in self.receivers:
            self.engine.at(self._later(sender, r), self._recv, (r, sender, sent.ts))

    def _recv(self, arg: tuple[str, str, int]) -> None:
        r, s, ts = arg
        delivered = self.nodes[r].receive(s, ts, now=self.engine.now)
        self._row("recv", r, s, ts, None, None, delivered, None)

    def ack(self, receiver: str) -> None:
        acked = self.nodes[receiver].make_ack(now=self.engine.now)
        self.acks += 1
        ident = f"a{self.acks}"
        self.ack_bytes += acked.ack.nbytes
        self.ack_wire_bytes += len(encode_ack(acked.ack))
        self._row("ack", receiver, None, None, ident, None, None, acked.stable)
        for s in self.senders:
            self.engine.at(self._later(receiver, s), self._ackrecv, (s, ident, acked.ack))

    def _ackrecv(self, arg: tuple[str, str, Any]) -> None:
        s, ident, ack = arg
        stable = self.nodes[s].receive_ack(ack, now=self.engine.now)
        self._row("ackrecv", s, None, None, None, ident, None, stable)
        # Theorem 1 (a): a message stable at its sender has been delivered to every
        # receiver (FIFO channels: the receiver's entry for s is at or above it)
        for ts in stable:
            self.stable_checked += 1
            for r in self.receivers:
                have = self.nodes[r].receiver.last(s)  # type: ignore[union-attr]
                self.stable_unreceived += have is None or have < ts

    def periodic(self, node: str, first: int, period: int, until: int,
                 action: Callable[[str], None], priority: int = LATE) -> None:
        def fire(_: Any) -> None:
            action(node)
            if self.engine.now + period <= until:
                self.engine.schedule(period, fire, None, priority=priority)

        self.engine.at(first, fire, None, priority=priority)

    def stats(self) -> dict[str, float | None]:
        ss = [self.nodes[s].sender.statistics() for s in self.senders]  # type: ignore[union-attr]
        stable = sum(s.stable for s in ss)
        now = max(s.now for s in ss) or 1
        return {
            "latency_mean": finish(STABILITY, "latency_mean",
                                   sum(s.latency_sum for s in ss), stable),
            "latency_max": float(max(s.max_latency for s in ss)),
            "buffer_mean": sum(s.buffer_area for s in ss) / now / len(ss),
            "buffer_max": float(max(s.max_buffered for s in ss)),
            "stable": float(stable),
            "sent": float(sum(s.sent for s in ss)),
            "stable_checked": float(self.stable_checked),
            "stable_unreceived": float(self.stable_unreceived),
        }


FIG2_MSG = {"s1": 2, "s2": 5}
FIG2_ACK = {"s1": 4, "s2": 8}
#: ticks per time unit of the worst-phase Fig. 2 runs (the aligned runs use 1)
FIG2_TICKS = 8
#: the Fig. 2 runs: (name, ack mode, ticks per time unit, phase of s2's sends, phase of
#: the receivers' acks (ticks after s1's sends), ack priority). ``fig2/*``: every node
#: acts at the same instants, acks after the same instant's arrivals, so no message
#: waits for a send or an ack period. ``fig2/*-worst``: the phases the paper's
#: figures assume ("no later than"): the acks fire just before the arrivals they
#: acknowledge (a full t_ack of wait); for timestamp acks s2 also sends one tick
#: before s1 (m1 waits t_send minus one tick for a message of s2 with a timestamp at
#: least equal to its own).
FIG2_RUNS: tuple[tuple[str, AckMode, int, int, int, int], ...] = (
    ("fig2/vector", AckMode.VECTOR, 1, 0, 0, LATE),
    ("fig2/timestamp", AckMode.TIMESTAMP, 1, 0, 0, LATE),
    (f"fig2/vector-worst/ticks={FIG2_TICKS}", AckMode.VECTOR, FIG2_TICKS, 0, 0, URGENT),
    (f"fig2/timestamp-worst/ticks={FIG2_TICKS}", AckMode.TIMESTAMP, FIG2_TICKS,
     FIG2_TICKS - 1, FIG2_TICKS - 1, URGENT),
)


def _fig2(ds: DatasetWriter, p: dict[str, Any], summary: dict[str, Any],
          runs: list[dict[str, Any]]) -> None:
    """The Fig. 2 runs (``FIG2_RUNS``). Latencies are written in ticks; a worst-phase
    run's name ends with ``/ticks=K``, its ticks per time unit, so the rows convert them
    to the paper's time units and state how far each phase is from its figures."""
    for name, mode, ticks, send_phase, ack_phase, ack_priority in FIG2_RUNS:

        def latency(src: str, dst: str, k: int = ticks) -> int:
            return k * (FIG2_MSG[src] if src in FIG2_MSG else FIG2_ACK[dst])

        net = _Net(ds, name, ["s1", "s2"], ["r1", "r2"], mode, ClockMode.PHYSICAL,
                   latency, None)
        until = p["fig2_duration"] * ticks
        net.periodic("s1", ticks, ticks, until, net.send)
        net.periodic("s2", ticks + send_phase, ticks, until, net.send)
        for r in ("r1", "r2"):
            net.periodic(r, ticks + ack_phase, ticks, until, net.ack, ack_priority)
        net.engine.run()
        rows: MetricRows = []
        for s in ("s1", "s2"):
            st = net.nodes[s].sender.statistics()  # type: ignore[union-attr]
            rows.append((f"latency_max_{s}", float(st.max_latency), None))
            rows.append((f"latency_mean_{s}",
                         finish(STABILITY, "latency_mean", st.latency_sum, st.stable), None))
        write_metrics(ds, name, "stability", rows)
        runs.append({"run": name, "params": {"acks": mode.value, "senders": "s1,s2",
                                             "receivers": "r1,r2"}})
        got = {m: v for m, v, _ in rows}
        summary[name] = (f"max latency s1 {_per(got['latency_max_s1'], ticks, 'g')}, "
                         f"s2 {_per(got['latency_max_s2'], ticks, 'g')}"
                         + (" (time units)" if ticks > 1 else ""))


def _per(value: float | None, unit: float, spec: str) -> str:
    """``value / unit`` for a summary line (``-``: no value)."""
    return shown(None if value is None else value / unit, spec)


def skew_offsets(n: int, skew: int, rng: random.Random) -> list[int]:
    """N clock offsets spread evenly over ``[-(skew // 2), skew - skew // 2]`` (the
    spread is exactly ``skew`` for N >= 2; one clock has offset 0), in an order
    shuffled by ``rng`` (which sender gets the fast clock changes with the seed)."""
    if n < 2:
        return [0] * n
    low = -(skew // 2)
    offsets = [low + i * skew // (n - 1) for i in range(n)]
    rng.shuffle(offsets)
    return offsets


def _sweep(ds: DatasetWriter, p: dict[str, Any], seed: int, summary: dict[str, Any],
           runs: list[dict[str, Any]], progress: Progress | None) -> None:
    delay = parse_delay(p["delay"], "--set delay")
    variants = tuple(v for v in SWEEP if v[0] in p["variants"])
    if p["uneven"] > 1:
        variants += (("timestamp-uneven", AckMode.TIMESTAMP, ClockMode.PHYSICAL, False),
                     ("timestamp-logical-uneven", AckMode.TIMESTAMP, ClockMode.LAMPORT, False))
    plan = [(n, v) for n in p["sizes"] for v in variants]
    for index, (n, (label, mode, clock, skewed)) in enumerate(plan):
        uneven = p["uneven"] if label.endswith("-uneven") else 1
        name = f"N={n}/{label}"
        if progress:
            progress(f"stability {name}", index, len(plan))
        rng = random.Random(f"{seed}/stability/{n}")
        senders = [f"s{i + 1}" for i in range(n)]
        receivers = [f"r{i + 1}" for i in range(n)]
        lrng = random.Random(rng.getrandbits(64))
        clocks = None
        if clock is ClockMode.PHYSICAL:
            # offsets from their own stream: the skewed run sees the same traffic as
            # the synchronized one (common random numbers), only the clocks differ
            orng = random.Random(f"{seed}/stability/{n}/offsets")
            offsets = skew_offsets(n, p["skew"], orng) if skewed else [0] * n
            clocks = {s: Clock(offset=o) for s, o in zip(senders, offsets, strict=True)}
        def latency(_src: str, _dst: str, r: random.Random = lrng) -> int:
            return delay.sample(r)

        net = _Net(ds, name, senders, receivers, mode, clock, latency, clocks)
        until = p["duration"]
        start = p["skew"] + 1  # every clock reads >= 1 at the first send
        for i, s in enumerate(senders):
            period = p["t_send"] if i == 0 else p["t_send"] * uneven
            net.periodic(s, start + rng.randrange(p["t_send"]), period, until, net.send)
        for r in receivers:
            net.periodic(r, start + rng.randrange(p["t_ack"]), p["t_ack"], until, net.ack)
        net.engine.run(tick=in_run(progress, clocked(0, until), until, "ticks"))
        st = net.stats()
        seconds = (until - start) / 1_000_000
        rows: MetricRows = [(k, v, None) for k, v in st.items()]
        rows.append(("ack_bytes_per_s", net.ack_bytes / seconds, None))
        rows.append(("ack_wire_bytes_per_s", net.ack_wire_bytes / seconds, None))
        rows.append(("n", float(n), None))
        if clocks is not None and skewed:
            offsets = [c.offset for c in clocks.values()]
            rows.append(("offset_spread", float(max(offsets) - min(offsets)), None))
            # how far the senders' clocks run ahead of the slowest, on average: the wait
            # section 5 predicts for a message before the slowest sender's timestamps
            # catch up with it
            rows.append(("offset_above_slowest_mean",
                         sum(o - min(offsets) for o in offsets) / len(offsets), None))
        write_metrics(ds, name, "stability", rows)
        runs.append({"run": name, "params": {"acks": mode.value, "clock": clock.value,
                                             "n": n, "skewed": skewed, "uneven": uneven}})
        summary[name] = (f"ack B/s {net.ack_bytes / seconds:.0f}, latency mean "
                         f"{_per(st['latency_mean'], 1000, '.1f')} ms, buffer "
                         f"{shown(st['buffer_mean'], '.1f')}")


def run(ds: DatasetWriter, p: dict[str, Any], seed: int,
        progress: Progress | None = None) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    if "fig2" in p["modes"]:
        _fig2(ds, p, summary, runs)
    if "sweep" in p["modes"]:
        _sweep(ds, p, seed, summary, runs, progress)
    if progress:
        progress("stability", 1, 1)
    return {"runs": runs, "claims": list(CLAIMS), "summary": summary}


SCENARIO = Scenario(
    name="stability",
    summary="message stability: timestamp vs vector acks, physical vs logical clocks, "
            "skew; the paper's Fig. 2 latency matrix reproduced exactly",
    params=PARAMS,
    run=run,
    source="stability paper section 4 (Fig. 2 worked example) and section 5",
    claims=CLAIMS,
)
_ = TimestampAck
