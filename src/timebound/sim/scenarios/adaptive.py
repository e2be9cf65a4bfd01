"""Scenario ``adaptive``: self-tuning message lifetime (Fekete, Lynch, ... adaptive paper).

Every combination of a *load* and an *estimator* is one run over the same receiver
core (``Fixed``, ``UnlimitedHorizon``, ``LimitedHorizon``) and the same traffic
(common random numbers per load):

loads (``loads=``)
  ``bounded``  a (t, X)-bounded execution: every one-way delay uniform over
               ``bounded_values`` (so the lifetime is at most X = max delay + clock
               skew), no loss;
  ``spikes``   the same with rare spikes: with probability ``spike_p`` a delay of
               ``spike`` ticks (the limited-horizon algorithm's "occasional" outliers);
  ``daynight`` a load whose lifetime drifts: exponential delays whose mean follows a
               day/night cycle, ``mean * (1 + amplitude * sin(2 pi t / day))``;
  ``step``     a (t, X)-bounded execution whose bound falls at a known time: delays
               uniform over ``bounded_values`` until ``step_at`` after the traffic
               starts, then over ``step_values`` (Theorems 4 and 8);
  ``step-slow`` the same traffic up to the step, then every client sends ``slowdown``
               times slower (Theorem 11: the time to settle is not bounded by the
               state at the step);
  ``step-up``  the bound rises at the step, to ``step_up_values`` (losses to explain).
estimators (``estimators=``)
  ``small``    fixed rho far too small (``rho_small``);
  ``large``    fixed rho far too large (``rho_large``);
  ``unlimited`` Fig. 2, GC every ``gc_every``;
  ``limited``  Fig. 3 with ``window`` S, ``spikes`` H, ``p``.

Measured: the estimate over time, L/A (lost over accepted rows; lost = a first copy
refused ``stale`` or ``early``: ``timebound.contract``) over time, the table size, and against the true maximum lifetime the paper's
"not too high" claim (Theorems 4 and 8: estimate < 2X after some time): the largest
estimate in force while the second half of the traffic arrives
(``estimate_during_over_true``; the final estimate after the traffic ends is
``estimate_over_true``). L/A as a trend: ``lost_per_accepted_at_<k>pct`` after k% of
the expected messages. Theorem 2: ``out_of_order_accepted`` counts acceptances of a
timestamp not above the connection's last accepted one, beside
``out_of_order_arrivals`` (how often the network offered one) and
``duplicates_offered`` (copies of a datagram that had arrived already: with
``duplicate`` > 0 the network sends a second copy of a datagram with that
probability; an accepted copy counts in ``out_of_order_accepted``).

Step loads: ``step_x1``/``step_x2`` (the largest lifetime of a message sent before /
after the step), ``step_estimate_over_2x2`` (the estimate in force at the step over
2 X2), ``step_settle_s`` (seconds from the step to the last change after which the
estimate stays below 2 X2; ``step_settled`` 0 if it never does),
``step_messages_to_settle``, ``step_after_s``, ``step_final_over_2x2``. Unlimited
horizon, every load: ``lost_outside_lemma3``, losses Lemma 3 does not allow (a loss
neither within the new estimate after an increase of the estimate nor in the GC
period before one), beside ``estimate_increases``/``estimate_decreases``. Limited
horizon: ``spike_share`` (arrivals whose delay exceeds ``bounded_values``), ``groups``
of S arrivals and ``groups_over_h`` (groups with more than H of them: outside a
(t, X, S, H)-bounded execution), with ``window`` and ``horizon_spikes``.
Time unit: 1 tick = 1 microsecond.
"""

from __future__ import annotations

import math
import random
from typing import Any

from timebound.core.atmostonce import ReceiverConfig
from timebound.measures import AMO, finish
from timebound.sim._dataset import DatasetWriter
from timebound.sim._links import Delay, Empirical, Exponential
from timebound.sim._scenario import Param, Progress, Scenario, counted, in_run
from timebound.sim.scenarios._amo import (
    START,
    AmoRun,
    NetConfig,
    open_messages,
    option_params,
    shown,
    write_metrics,
)

#: checkpoints of the L/A trend, percent of the expected messages received
TREND = (10, 25, 50, 100)


class _Tracked(AmoRun):
    """An AmoRun that also watches every arrival (no protocol rule): the estimate in
    force during the second half of the traffic, L/A at the TREND checkpoints, and
    acceptances out of timestamp order per connection (Theorem 2)."""

    def __init__(self, *args: Any, expected: int, bound: int = 0, step: int | None = None,
                 slowdown: float = 1.0, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.expected = max(1, expected)
        #: the load's bound on a one-way delay: a longer one is a spike
        self.bound = bound
        #: limited horizon: arrivals in the current group of S, spikes among them, and
        #: how many groups held more than H spikes (outside (t, X, S, H)-bounded)
        self.group = self.group_spikes = self.groups = self.groups_over_h = 0
        self.spike_arrivals = 0
        #: step loads: the step's time, the largest lifetime before it (X1) and of the
        #: messages sent after it (X2), the estimate in force at the step, every later
        #: change of the estimate (time, value), and arrivals after the step
        self.step = step
        self.x1 = self.x2 = 0
        self.at_step: int | None = None
        self.changes: list[tuple[int, int]] = []
        self.after_step = 0
        self.last_arrival = 0
        #: Lemma 3 (unlimited horizon): the last increase of the estimate (time, new
        #: value; the start counts as one, to 1), losses not yet explained (waiting for
        #: the next change), the losses Lemma 3 does not allow, and the increases
        self.estimate = 1
        self.increase = (0, 1)
        self.pending: list[int] = []
        self.previous = 0
        self.lost_outside = self.increases = self.decreases = 0
        #: step-slow: at the step every client's gap (exponential) becomes ``slowdown``
        #: times longer; a client's first turn after the step, drawn before it, is
        #: taken with probability 1/slowdown, else redrawn from the slower gap (both
        #: exact for a memoryless gap), so every client sends that many times slower at
        #: once while the traffic before the step stays the same
        self.slowdown = slowdown
        self.thin_rng = random.Random(self.rng.getrandbits(64))
        self.slowed: set[int] = set()
        if step is not None and slowdown > 1:
            self.engine.at(step, self._slow_down, None)
        self.arrivals = 0
        self.estimate_late_max = 0
        self.trend: dict[int, float | None] = {}
        self.last_accepted: dict[str, int] = {}
        self.highest_seen: dict[str, int] = {}
        self.out_of_order_accepted = 0
        self.out_of_order_arrivals = 0
        self.duplicates_offered = 0

    def _arrive(self, packet: Any) -> bool:
        msg = packet.payload
        before = msg.accepted
        lost_before = self.lost
        if msg.ts < self.highest_seen.get(msg.conn, 0):
            self.out_of_order_arrivals += 1
        if packet.arrivals > 1:  # a copy of a datagram that already arrived
            self.duplicates_offered += 1
        self.highest_seen[msg.conn] = max(msg.ts, self.highest_seen.get(msg.conn, 0))
        taken = super()._arrive(packet)
        self.last_arrival = self.engine.now
        if self.opts.estimator == "unlimited":
            self._lemma3(self.lost > lost_before, self.servers[msg.server].estimate)
        if msg.accepted > before:
            if msg.ts <= self.last_accepted.get(msg.conn, 0):
                self.out_of_order_accepted += 1
            self.last_accepted[msg.conn] = msg.ts
        if packet.arrivals == 1:
            self._watch(msg)
            self.arrivals += 1
            if 2 * self.arrivals > self.expected:
                self.estimate_late_max = max(self.estimate_late_max,
                                             self.servers[msg.server].estimate)
            for pct in TREND:
                if pct not in self.trend and 100 * self.arrivals >= pct * self.expected:
                    self.trend[pct] = finish(AMO, "lost_per_accepted", self.lost,
                                             self.accepted)
        return taken

    def _slow_down(self, _: None) -> None:
        self.net.gap = Exponential(self.net.gap.mean() * self.slowdown)

    def _send(self, arg: tuple[int, int]) -> None:
        if self.slowdown > 1 and self.step is not None and self.engine.now >= self.step:
            client = arg[0]
            if client not in self.slowed:
                self.slowed.add(client)
                if self.thin_rng.random() * self.slowdown >= 1:
                    self.engine.schedule(max(1, self.net.gap.sample(self.work_rng)),
                                         self._send, arg)
                    return
        super()._send(arg)

    def _watch(self, msg: Any) -> None:
        """Spike groups (limited horizon) and the step's lifetimes and estimates."""
        now = self.engine.now
        opts = self.opts
        if opts.estimator == "limited" and opts.window:
            self.group += 1
            if now - msg.sent > self.bound:
                self.group_spikes += 1
                self.spike_arrivals += 1
            if self.group == opts.window:
                self.groups += 1
                self.groups_over_h += self.group_spikes > (opts.spikes or 0)
                self.group = self.group_spikes = 0
        if self.step is None:
            return
        server = self.servers[msg.server]
        lifetime = self.server_clocks[msg.server].read(now) - msg.ts
        if msg.sent < self.step:
            self.x1 = max(self.x1, lifetime)
        else:
            self.x2 = max(self.x2, lifetime)
        if now < self.step:
            return
        self.after_step += 1
        if self.at_step is None:
            self.at_step = server.estimate
            self.changes.append((self.step, server.estimate))
        elif server.estimate != self.changes[-1][1]:
            self.changes.append((now, server.estimate))

    def _lemma3(self, lost: bool, estimate: int) -> None:
        """Lemma 3 (on which Theorems 4 and 6 rest): with t1 an increase of the estimate
        to B and the estimate not increased again up to a GC t2, no message is
        summary-rejected in [t1 + B, t2]. So a loss at time u lies within B of the last
        increase, or in the GC period just before the next increase. Counted in
        ``lost_outside``: losses in neither (none, if the estimator is right); the
        slack is the clock bound epsilon (GC periods are read on the server's clock)."""
        now = self.engine.now
        slack = self.net.epsilon
        if estimate != self.estimate:
            # a GC ran after the previous arrival, at the latest at this one (then
            # before its decision): a loss waiting since then is explained by an
            # increase when it came at most one GC period before the earliest such GC
            if estimate > self.estimate:
                period = self.opts.gc_every or 0
                self.lost_outside += sum(1 for u in self.pending
                                         if u < self.previous - period - slack)
                self.increase = (now, estimate)
                self.increases += 1
            else:
                self.lost_outside += len(self.pending)
                self.decreases += 1
            self.pending = []
            self.estimate = estimate
        if lost:
            at, value = self.increase
            if now > at + value + slack:
                self.pending.append(now)
        self.previous = now

    def lemma_metrics(self) -> list[tuple[str, float, None]]:
        """Lemma 3's count (a loss still waiting at the end counts when a whole GC
        period followed it without an increase) and the estimate's increases and
        decreases."""
        if self.opts.estimator != "unlimited":
            return []
        end = self.last_arrival - (self.opts.gc_every or 0) - self.net.epsilon
        waiting = sum(1 for u in self.pending if u < end)
        return [("lost_outside_lemma3", float(self.lost_outside + waiting), None),
                ("estimate_increases", float(self.increases), None),
                ("estimate_decreases", float(self.decreases), None)]

    def step_metrics(self) -> list[tuple[str, float, None]]:
        """The step's X1, X2, the estimate at the step over 2 X2, and the settling
        time: from the step to the last change after which the estimate stays below
        2 X2 (``step_settled`` 0: it never does before the traffic ends)."""
        if self.step is None or self.at_step is None or not self.x2:
            return []
        limit = 2 * self.x2
        settle = self.step
        for at, value in self.changes:
            if value >= limit:
                settle = -1
            elif settle < 0:
                settle = at
        settled = settle >= 0
        if not settled:
            settle = self.last_arrival
        before = sum(1 for m in self.msgs if self.step <= m.sent < settle)
        out: list[tuple[str, float, None]] = [
            ("step_x1", float(self.x1), None), ("step_x2", float(self.x2), None),
            ("step_estimate_over_2x2", self.at_step / limit, None),
            ("step_final_over_2x2", self.changes[-1][1] / limit, None),
            ("step_settled", float(settled), None),
            ("step_settle_s", (settle - self.step) / 1e6, None),
            ("step_after_s", (self.last_arrival - self.step) / 1e6, None),
            ("step_messages_to_settle", float(before), None),
        ]
        return out


class Spiky(Delay):
    """``base``, except with probability ``p`` a spike of ``spike`` ticks."""

    def __init__(self, base: Delay, p: float, spike: int) -> None:
        self.base = base
        self.p = p
        self.spike = spike
        self.spec = f"{base.spec} + spikes({p}, {spike})"

    def sample(self, rng: random.Random) -> int:
        if rng.random() < self.p:
            return self.spike
        return self.base.sample(rng)

    def quantile(self, q: float) -> float:
        return self.base.quantile(q)

    def mean(self) -> float:
        return (1 - self.p) * self.base.mean() + self.p * self.spike


PARAMS = (
    Param("loads", "loads to run", "bounded,spikes,daynight", "list",
          choices=("bounded", "spikes", "daynight", "step", "step-slow", "step-up")),
    Param("estimators", "estimators to run", "small,large,unlimited,limited", "list",
          choices=("small", "large", "unlimited", "limited")),
    Param("messages", "messages per run (about)", "20000", lo=10, hi=10_000_000),
    Param("clients", "clients (one connection each)", "1000", lo=1, hi=100_000),
    Param("rate", "messages per second, all clients together", "1000", "float",
          lo=0.001, hi=1e6),
    Param("bounded_values", "bounded load: delays drawn uniformly from 1..X ms (X ticks)",
          "40000", lo=1000),
    Param("spike_p", "spikes load: spike probability per datagram", "0.002", "float",
          lo=0, hi=0.5),
    Param("spike", "spikes load: spike delay (ticks)", "2000000", lo=0),
    Param("step_at", "step loads: the step's time after the traffic starts (ticks)",
          "5000000", lo=0),
    Param("step_values", "step loads: after the step, delays drawn uniformly from "
          "1..X ms (X ticks)", "10000", lo=1000),
    Param("step_up_values", "step-up load: after the step, delays drawn uniformly from "
          "1..X ms (X ticks)", "200000", lo=1000),
    Param("slowdown", "step-slow load: after the step every client sends this many "
          "times slower", "10", "float", lo=1, hi=1000),
    Param("day", "daynight load: cycle length (ticks)", "10000000", lo=1000),
    Param("mean", "daynight load: mean one-way delay (ticks)", "20000", "float", lo=1),
    Param("amplitude", "daynight load: relative amplitude of the cycle", "0.8", "float",
          lo=0, hi=0.99),
    Param("duplicate", "probability that the network delivers a second copy of a "
          "datagram (Theorem 2's duplicates)", "0", "float", lo=0, hi=1),
    Param("epsilon", "clock synchronisation bound (ticks)", "10000", lo=0),
    Param("drift_ppm", "clock drift bound (ppm)", "20", "float", lo=0, hi=10_000),
    Param("resync", "clock resynchronisation period (ticks)", "16000000", lo=0),
    Param("rho_small", "fixed rho, too small (ticks)", "5000", lo=1),
    Param("rho_large", "fixed rho, too large (ticks)", "10000000", lo=1),
    Param("gc_every", "GC period of fixed and unlimited (ticks)", "100000", lo=1),
    Param("window", "limited: S, lifetimes per period", "200", lo=1),
    Param("spikes", "limited: H, spikes ignored per period (< S)", "4", lo=0),
    Param("p", "limited: p, lost/accepted target 1/p", "10", lo=1),
    Param("sample_every", "time-series bucket (ticks)", "500000", lo=1),
)

CLAIMS = (
    {"paper": "adaptive", "claim": "in a (t, X)-bounded execution the estimate converges "
     "and is at most twice the true maximum lifetime", "measure": "estimate_over_true",
     "expected": "<= 2"},
    {"paper": "adaptive", "claim": "unlimited horizon: lost/accepted tends to 0",
     "measure": "lost_per_accepted", "expected": "-> 0"},
    {"paper": "adaptive", "claim": "limited horizon: lost/accepted tends to about 1/p, "
     "tolerating spikes", "measure": "lost_per_accepted", "expected": "<~ 1/p"},
    {"paper": "adaptive", "claim": "too small a fixed rho loses many messages; too large "
     "keeps a large table", "measure": "lost_per_accepted / table_mean",
     "expected": "small: high L/A; large: largest table"},
)


def _load(p: dict[str, Any], name: str) -> tuple[Delay, Any]:
    values = list(range(1000, p["bounded_values"] + 1, 1000))
    if name == "bounded":
        return Empirical(values), None
    if name == "spikes":
        return Spiky(Empirical(values), p["spike_p"], p["spike"]), None
    if name.startswith("step"):
        step = START + p["step_at"]
        before = Empirical(values)
        top = p["step_up_values"] if name == "step-up" else p["step_values"]
        after = Empirical(list(range(1000, top + 1, 1000)))

        def step_at(t: int) -> Delay:
            return before if t < step else after

        return before, step_at
    day, mean, amp = p["day"], p["mean"], p["amplitude"]

    def delay_at(t: int) -> Delay:
        return Exponential(mean * (1 + amp * math.sin(2 * math.pi * t / day)))

    return Exponential(mean), delay_at


def _options(p: dict[str, Any], name: str) -> ReceiverConfig:
    if name == "small":
        return ReceiverConfig(estimator="fixed", rho=p["rho_small"], gc_every=p["gc_every"])
    if name == "large":
        return ReceiverConfig(estimator="fixed", rho=p["rho_large"], gc_every=p["gc_every"])
    if name == "unlimited":
        return ReceiverConfig(estimator="unlimited", gc_every=p["gc_every"])
    return ReceiverConfig(estimator="limited", window=p["window"], spikes=p["spikes"], p=p["p"])


def run(ds: DatasetWriter, p: dict[str, Any], seed: int,
        progress: Progress | None = None) -> dict[str, Any]:
    from timebound.errors import UsageError

    if p["spikes"] >= p["window"]:
        raise UsageError("--set spikes", f"must be < window ({p['window']}), got {p['spikes']}")
    clients = p["clients"]
    calls = max(1, p["messages"] // clients)
    per_client_gap = clients / p["rate"] * 1_000_000  # mean ticks between a client's calls
    plan = [(load, est) for load in p["loads"] for est in p["estimators"]]
    open_messages(ds, [_options(p, est) for _, est in plan])
    runs = []
    summary: dict[str, Any] = {}
    for index, (load, est) in enumerate(plan):
        delay, delay_fn = _load(p, load)
        net = NetConfig(clients=clients, servers=1, calls=calls,
                        gap=Exponential(per_client_gap), spread=int(per_client_gap),
                        delay=delay, loss=0.0, duplicate=p["duplicate"], reorder=0.0,
                        reorder_extra=0,
                        timeout=10**12, retries=0, epsilon=p["epsilon"],
                        drift_ppm=p["drift_ppm"], resync=p["resync"], delay_fn=delay_fn)
        opts = _options(p, est)
        name = f"{load}/{est}"
        if progress:
            progress(f"adaptive {name}", index, len(plan))
        step = START + p["step_at"] if load.startswith("step") else None
        sim = _Tracked(ds, name, net, opts,
                       random.Random(f"{seed}/adaptive/{load.split('-')[0]}"),
                       p["sample_every"], expected=clients * calls,
                       bound=p["bounded_values"], step=step,
                       slowdown=p["slowdown"] if load == "step-slow" else 1.0)
        sim.execute(tick=in_run(progress, counted(sim.msgs), clients * calls, "calls"))
        rows = sim.metrics()
        got = {m: v for m, v, t in rows if t is None}
        true_max = float(sim.max_lifetime)
        if load == "spikes":
            true_max = p["bounded_values"] + p["epsilon"]  # X: spikes are not the bound
        final = float(sim.servers[0].estimate)
        rows.append(("true_max_lifetime", float(true_max), None))
        rows.append(("estimate_over_true", finish(AMO, "estimate_over_true", final, true_max),
                     None))
        rows.append(("estimate_during_over_true",
                     finish(AMO, "estimate_during_over_true", sim.estimate_late_max, true_max),
                     None))
        for pct in TREND:
            if pct in sim.trend:
                rows.append((f"lost_per_accepted_at_{pct}pct", sim.trend[pct], None))
        rows.append(("messages_expected", float(clients * calls), None))
        rows.append(("out_of_order_accepted", float(sim.out_of_order_accepted), None))
        rows.append(("out_of_order_arrivals", float(sim.out_of_order_arrivals), None))
        rows.append(("duplicates_offered", float(sim.duplicates_offered), None))
        rows.append(("p", float(opts.p or 0), None))
        if est == "limited":
            rows += [("window", float(opts.window or 0), None),
                     ("horizon_spikes", float(opts.spikes or 0), None),
                     ("spike_share", finish(AMO, "spike_share", sim.spike_arrivals,
                                            sim.arrivals), None),
                     ("groups", float(sim.groups), None),
                     ("groups_over_h", float(sim.groups_over_h), None)]
        rows += sim.lemma_metrics() + sim.step_metrics()
        if load == "step-slow":
            rows.append(("slowdown", float(p["slowdown"]), None))
        write_metrics(ds, name, "atmostonce", rows)
        runs.append({"run": name, "params": {**option_params(opts), "load": load}})
        ratio = finish(AMO, "estimate_over_true", final, true_max)
        summary[name] = (f"L/A {shown(got['lost_per_accepted'], '.4f')}, final estimate "
                         f"{final:.0f} ({shown(ratio, '.2f')} x true), table mean "
                         f"{shown(got['table_mean'], '.1f')}")
    if progress:
        progress("adaptive", len(plan), len(plan))
    return {"runs": runs, "claims": list(CLAIMS), "summary": summary}


SCENARIO = Scenario(
    name="adaptive",
    summary="adaptive lifetime estimation: fixed rho too small/large vs unlimited and "
            "limited horizon, on bounded, spiky and day/night loads",
    params=PARAMS,
    run=run,
    source="adaptive paper sections 2-3 (Figs. 2, 3; Theorems on convergence)",
    claims=CLAIMS,
)
