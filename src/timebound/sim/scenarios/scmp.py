"""Scenario ``scmp``: SCMP at-most-once messages (Liskov, Shrira, Wroclawski).

Experiments (``experiments=``, any subset, one or more runs each):

- ``once``: many clients each calling once (the paper's Fig. 3-3 set-up: 1000
  clients, one call each, one server);
- ``many``: one client calling many times (Fig. 3-2: 1000 calls);
- ``sweep``: the same traffic for every rho in ``rhos`` (common random numbers: the
  traffic does not depend on rho), measuring the lost-message rate (a ``stale`` or
  ``early`` verdict on the first delivered copy) and the connection-table size
  against the section 2.4 bound ``rho >= epsilon + delta + RT(N)``, where delta is the
  ``p_net`` quantile of the one-way delay and ``RT(N) = N * timeout``;
- ``skew``: section 2.3's slow and fast clocks, with a resilient server so that *too
  early* shows up. Five runs on the same traffic (common random numbers: the clocks'
  offsets change nothing else), so each differs from ``clients-synced`` (no offset)
  only by its skew: ``clients-slow`` (the ``skewed`` share of the clients ``skew``
  ticks behind, among synchronized ones: 2.3's slow G among other modules)
  and ``server-fast`` (the server ``skew`` ahead) are the cases where 2.3 says messages
  are flagged as duplicates; ``clients-fast`` (``skew_early`` ahead) and
  ``server-slow`` (the server ``skew_early`` behind) the cases where they are refused
  as too early. Section 2.3's statements are comparative ("more likely to be
  flagged", "may refuse"), about clocks that are not synchronized but still run the
  protocol as designed, so the defaults sit inside that window: ``skew`` beyond
  epsilon and within rho (a message is flagged only when it takes longer than
  rho - skew to arrive: a slow delivery or a retransmission; a skew beyond rho flags
  every first copy of a slow client), ``skew_early`` beyond beta - latest_every and within beta
  (a message is refused only when ``latest`` was written more than beta - skew_early
  ago; a skew beyond beta refuses every one);
- ``crash``: a resilient server (Fig. 2-2, ``latest`` on stable storage every
  ``latest_every``, ``beta`` ahead) crashes at ``crash_at`` for ``crash_down``;
  section 2.4 says every message sent after ``t_cr + beta`` is accepted, provided
  the server avoids "removing entries from the table until sufficient time has passed
  to process all pending messages": run ``crash`` uses the figures' GC (no pause),
  run ``crash-grace`` the receiver's ``recovery_grace`` of ``crash_grace`` ticks;
- ``reorder`` (our extension beyond the paper; not in the default set):
  ``reorder_clients`` clients each sending ``reorder_calls`` messages on one
  connection, ``reorder_gap`` apart, over links that give a datagram an extra delay
  (up to ``reorder_extra``) with probability ``reorder_p``, so later messages of a
  connection overtake earlier ones; the same traffic for every reorder window W in
  ``reorder_windows`` (W = 1 is SCMP), measuring the genuine messages refused
  (``refused_genuine_rate``) and the table's bytes (``table_bytes_mean``);
- ``restart`` (our extension beyond the paper; not in the default set): the
  resilient server of ``crash`` (Fig. 2-2, ``beta``, ``latest_every``; one server, the
  figures' GC) crashes at ``crash_at`` and restarts *immediately*, ``restart_down``
  ticks later, while ``restart_clients`` clients, each with ``restart_callers``
  callers, call continuously: a caller has one message in flight on its own
  connection and makes its next one (``restart_calls`` in all) as soon as the
  transport has the previous one acknowledged (or gives up on it). Two runs on the
  same traffic (common random numbers: the transport acknowledges every copy taken
  while the server is up, whatever the verdict): ``restart``, the paper's rule (no
  message is marked), and ``restart-marked``, with incarnation marks (``RestartRun``).

Incarnation marks (the ``restart-marked`` run). The simulator keeps each server's
incarnation number, raised at each crash. Every acknowledgment carries the number of
the incarnation that sent it (an RPC reply or refusal would carry its id), and each
client remembers, for all its callers, the newest incarnation it has heard of. A
client marks every *new* message with that number (none before its first
acknowledgment); a retransmission is the same message and keeps the mark of its first
copy, never the client's newer one (a caller's message sent before the restart and
retransmitted after another caller heard of the new incarnation may have been accepted
before the crash). A row is ``marked`` iff the message's mark equals the incarnation
deciding it (the receiver is told ``marked=True`` exactly then), so a message made
before its client heard of the running incarnation is decided by the paper's rule.

Restart measures (per run; times are true times, the restart is the crash plus
``restart_down``):

- ``refused_unknown``: messages never accepted and refused at least once with a lost
  verdict (``stale`` or ``early``, the contract's ``lost``); their sender is refused
  without being told whether an earlier copy ran, so the outcome is unknown to it.
  ``refused_unknown_rate`` = ``refused_unknown`` / ``messages_sent``;
- ``refused_after_restart``: of those, the messages sent at or after the restart;
  ``refused_after_heard``: the messages sent at or after their client first heard of
  the new incarnation (with marks, only a message whose mark is not the deciding
  incarnation can be refused, so this is 0 unless something else refuses);
- ``served_again_max`` / ``served_again_median`` (ticks, over clients): from the
  restart until the first message of the client (any caller) accepted by the new
  incarnation;
  ``served_after_heard_max`` / ``_median``: from the client's first acknowledgment by
  the new incarnation until that acceptance (0 when it came first);
  ``not_served_again``: clients with no message accepted by the new incarnation;
- ``round_trip``: twice delta, the ``p_net`` quantile of the one-way delay (the
  yardstick of "one round trip").

Time unit: 1 tick = 1 microsecond. Defaults: clock skews "typically less than 100
milliseconds" (section 1) give ``epsilon``; the NTP reference [2] gives the
resynchronisation; the delay, loss and timeout are ours (the paper measured an
Ethernet and gives no distribution) and are documented per parameter.
"""

from __future__ import annotations

import random
from typing import Any

from timebound.core.atmostonce import ReceiverConfig
from timebound.measures import AMO, finish
from timebound.sim._dataset import DatasetWriter
from timebound.sim._engine import URGENT
from timebound.sim._links import parse_delay
from timebound.sim._scenario import Param, Progress, Scenario, counted, in_run
from timebound.sim._transport import NotingReliable, Packet
from timebound.sim.scenarios._amo import (
    START,
    AmoRun,
    Message,
    MetricRows,
    NetConfig,
    open_messages,
    option_params,
    shown,
    write_metrics,
)

MS = 1000

PARAMS = (
    Param("experiments", "which experiments to run", "once,many,sweep,skew,crash", "list",
          choices=("once", "many", "sweep", "skew", "crash", "reorder", "restart")),
    Param("clients", "clients of the once/sweep/skew/crash runs (Fig. 3-3: 1000)", "1000",
          lo=1, hi=1_000_000),
    Param("servers", "servers; client i talks to server i mod servers", "1", lo=1, hi=1000),
    Param("calls", "calls per client in the sweep/skew/crash runs", "10", lo=1, hi=1_000_000),
    Param("many_calls", "calls of the single client of the 'many' run (Fig. 3-2: 1000)",
          "1000", lo=1, hi=10_000_000),
    Param("gap", "time between a client's calls (ticks)", "exponential:1000000", "delay"),
    Param("spread", "first calls uniform over this window (ticks)", "1000000", lo=1),
    Param("delay", "one-way network delay (ticks)", "exponential:20000:5000", "delay"),
    Param("loss", "datagram loss probability", "0.01", "float", lo=0, hi=0.9),
    Param("duplicate", "datagram duplication probability", "0.01", "float", lo=0, hi=1),
    Param("reorder", "probability of an extra reordering delay", "0.01", "float", lo=0, hi=1),
    Param("reorder_extra", "maximum extra reordering delay (ticks)", "50000", lo=0),
    Param("timeout", "retransmission timeout (ticks)", "200000", lo=1),
    Param("retries", "N: retransmissions before giving up", "3", lo=0, hi=1000),
    Param("p_net", "delta is this quantile of the one-way delay (P_net, section 2.4)",
          "0.999", "float", lo=0.5, hi=0.999999),
    Param("epsilon", "clock synchronisation bound (ticks; section 1: < 100 ms)", "100000",
          lo=0),
    Param("drift_ppm", "clock drift bound (ppm, uniform per clock)", "50", "float",
          lo=0, hi=10_000),
    Param("resync", "clock resynchronisation period (ticks; NTP-like)", "16000000", lo=0),
    Param("rho", "rho of the once/many/skew/crash runs (ticks)", "1000000", lo=1),
    Param("rhos", "rho values of the sweep (ticks)",
          "50000,100000,200000,400000,800000,1600000,3200000", "intlist", lo=1),
    Param("gc_every", "GC period (ticks)", "50000", lo=1),
    Param("skew", "clock offset of the clients-slow and server-fast runs (ticks; section "
          "2.3, flagged as duplicates: beyond epsilon, within rho)", "900000", lo=0),
    Param("skew_early", "clock offset of the clients-fast and server-slow runs (ticks; "
          "section 2.3, refused as too early: beyond beta - latest_every, within beta)",
          "1500000", lo=0),
    Param("skewed", "fraction of clients with a skewed clock", "0.5", "float", lo=0, hi=1),
    Param("beta", "resilient: latest = time + beta (ticks)", "2000000", lo=0),
    Param("latest_every", "resilient: latest refresh period (ticks; 'every few seconds')",
          "1000000", lo=1),
    Param("crash_at", "server crash, ticks after the traffic starts", "5000000", lo=1),
    Param("crash_down", "crash duration (ticks)", "3000000", lo=1),
    Param("crash_retries", "retransmissions in the crash run (senders keep trying)", "60",
          lo=0),
    Param("crash_grace", "crash-grace run: GC pause after recovery (ticks; section 2.4)",
          "1000000", lo=0),
    Param("sample_every", "time-series bucket (ticks)", "500000", lo=1),
    Param("reorder_windows", "reorder runs: per-connection reorder windows W (ours)",
          "1,2,4,8,32", "intlist", lo=1, hi=4096),
    Param("reorder_clients", "reorder runs: clients, one connection each", "50",
          lo=1, hi=1_000_000),
    Param("reorder_calls", "reorder runs: messages per client", "200", lo=1, hi=1_000_000),
    Param("reorder_gap", "reorder runs: time between a client's messages (ticks)",
          "exponential:100000", "delay"),
    Param("reorder_p", "reorder runs: probability of an extra reordering delay", "0.05",
          "float", lo=0, hi=1),
    Param("restart_down", "restart runs: the server's down time at crash_at (ticks; an "
          "immediate restart, ours)", "1000", lo=1, only_for="restart"),
    Param("restart_clients", "restart runs: clients, each remembering the incarnation it "
          "heard of for its callers", "50", lo=1, hi=1_000_000, only_for="restart"),
    Param("restart_callers", "restart runs: callers per client, each calling continuously "
          "on its own connection (its next call once the last is acknowledged)", "2",
          lo=1, hi=1000, only_for="restart"),
    Param("restart_calls", "restart runs: calls per caller", "200", lo=1, hi=1_000_000,
          only_for="restart"),
)

CLAIMS = (
    {"paper": "SCMP", "claim": "no duplicate is ever accepted, whatever rho and the clocks",
     "measure": "at_most_once_violations", "expected": "0"},
    {"paper": "SCMP", "claim": "rho >= epsilon + delta + RT(N) (section 2.4) loses ~no "
     "message; smaller rho loses more", "measure": "lost_rate", "expected": "~0 at the bound"},
    {"paper": "SCMP", "claim": "table size grows with rho (section 2.4)",
     "measure": "table_mean", "expected": "increasing in rho"},
    {"paper": "SCMP", "claim": "a slow client clock (within rho) gets its messages flagged "
     "as duplicates more often; a fast one (within beta) gets them refused as too early "
     "(section 2.3)", "measure": "lost_rate", "expected": "above clients-synced"},
    {"paper": "SCMP", "claim": "a fast server clock flags more messages as duplicates; a "
     "slow one refuses them as too early (section 2.3)", "measure": "lost_rate",
     "expected": "above clients-synced"},
    {"paper": "SCMP", "claim": "after a crash all messages sent after t_cr + beta are accepted",
     "measure": "lost_after_crash_plus_beta", "expected": "0"},
)

#: The restart experiment's claim (ours), in the manifest of a dataset that runs it.
RESTART_CLAIM = {
    "paper": "ours", "claim": "with incarnation marks, after an immediate restart only "
    "messages sent before their client heard of the new incarnation are refused",
    "measure": "refused_after_heard", "expected": "0 (restart-marked)"}

#: Bytes of the table model behind ``table_bytes_*`` (contract measures).
CONN_BYTES, TS_BYTES, FLOOR_BYTES = 16, 8, 8


class ReorderRun(AmoRun):
    """An ``AmoRun`` that also counts the genuine messages refused and the table's
    bytes (the ``reorder`` experiment; no protocol rule here either)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.judged: set[tuple[str, int]] = set()
        self.bytes_sum = self.bytes_peak = self.bytes_rows = 0
        per_conn = CONN_BYTES + (FLOOR_BYTES if self.opts.reorder_window > 1 else 0)
        receivers = dict(zip(self.server_names, self.servers))
        decide = self.adapter.decide

        def counted(source: str, line: int, name: str, conn: str, ts: int,
                    at: int, *, marked: bool = False) -> tuple[str, int | None, int | None]:
            verdict, rho, entries = decide(source, line, name, conn, ts, at, marked=marked)
            if entries is not None:
                self.judged.add((conn, ts))
                size = per_conn * receivers[name].connections + TS_BYTES * entries
                self.bytes_sum += size
                self.bytes_rows += 1
                self.bytes_peak = max(self.bytes_peak, size)
            return verdict, rho, entries

        self.adapter.decide = counted  # type: ignore[method-assign]

    def reorder_metrics(self) -> MetricRows:
        judged = [m for m in self.msgs if (m.conn, m.ts) in self.judged]
        refused = sum(1 for m in judged if m.accepted == 0)
        return [
            ("reorder_window", float(self.opts.reorder_window), None),
            ("refused_genuine", float(refused), None),
            ("refused_genuine_rate", finish(AMO, "refused_genuine_rate", refused, len(judged)),
             None),
            ("table_bytes_mean",
             finish(AMO, "table_bytes_mean", self.bytes_sum, self.bytes_rows), None),
            ("table_bytes_peak", float(self.bytes_peak), None),
        ]


class RestartRun(AmoRun):
    """The ``restart`` experiment (module docstring): clients whose ``callers`` each
    call continuously on a connection of their own (``c<client>.<caller>``), over a
    ``NotingReliable`` transport whose acknowledgments carry the server's incarnation
    number, which the client remembers for all its callers; with ``marks`` every new
    message is marked with it. Counts the restart measures; no protocol rule here (the
    receiver is told ``marked=`` by the shared adapter, ``AmoRun._arrive``)."""

    def __init__(self, *args: Any, marks: bool, callers: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.marks = marks
        self.callers = callers
        net = self.net
        self.transport = NotingReliable(self.engine, net.timeout, net.retries,
                                        note=self._note, on_ack=self._ack,
                                        on_give_up=self._next)
        n = net.clients
        #: the newest incarnation each client has heard of (None: no ack yet)
        self.heard: list[int | None] = [None] * n
        #: when each client first heard of an incarnation after the crash
        self.heard_new_at: list[int | None] = [None] * n
        #: when a message of each client was first accepted after the crash
        self.served_at: list[int | None] = [None] * n
        #: each caller's message in flight and the calls it has left after it
        self.current: list[Message | None] = [None] * (n * callers)
        self.left = [0] * (n * callers)
        self.restart_at: int | None = None

    def start(self) -> None:
        net = self.net
        for caller in range(net.clients * self.callers):
            first = self.work_rng.randrange(max(net.spread, 1))
            self.engine.at(START + first, self._send, (caller, net.calls))
        if net.crash_at is not None:
            self.engine.at(START + net.crash_at, self._crash, 0, priority=URGENT)

    def _send(self, arg: tuple[int, int]) -> None:
        caller, left = arg
        client, lane = divmod(caller, self.callers)
        engine = self.engine
        ts = self.client_clocks[client].monotonic(engine.now, strict=True)
        msg = Message(client, f"c{client + 1}.{lane + 1}", 0, ts, engine.now,
                      mark=self.heard[client] if self.marks else None)
        self.msgs.append(msg)
        self.current[caller] = msg
        self.left[caller] = left - 1
        self.transport.send(Packet(msg, self.up[0], self.down_link, self._arrive))

    def _next(self, packet: Packet) -> None:
        """A caller's message in flight is done with (acknowledged or given up): the
        caller's next call, at once."""
        msg: Message = packet.payload
        caller = msg.client * self.callers + int(msg.conn.rpartition(".")[2]) - 1
        if self.current[caller] is msg:
            self.current[caller] = None
            if self.left[caller] > 0:
                self._send((caller, self.left[caller]))

    def _note(self, packet: Packet) -> int:
        msg: Message = packet.payload
        return self.incarnations[msg.server]

    def _ack(self, packet: Packet, incarnation: int, first: bool) -> None:
        client = packet.payload.client
        heard = self.heard[client]
        if heard is None or incarnation > heard:
            self.heard[client] = incarnation
            if incarnation > 0 and self.heard_new_at[client] is None:
                self.heard_new_at[client] = self.engine.now
        if first:
            self._next(packet)

    def _crash(self, index: int) -> None:
        super()._crash(index)
        if self.crashed and self.restart_at is None:
            self.restart_at = self.engine.now + self.net.crash_down

    def _arrive(self, packet: Packet) -> bool:
        msg: Message = packet.payload
        accepted = msg.accepted
        taken = super()._arrive(packet)
        if (msg.accepted > accepted and self.incarnations[msg.server] > 0
                and self.served_at[msg.client] is None):
            self.served_at[msg.client] = self.engine.now
        return taken

    def restart_metrics(self, round_trip: float) -> MetricRows:
        restart = self.restart_at if self.restart_at is not None else self.engine.now
        refused = [m for m in self.msgs if m.accepted == 0 and m.refused]
        heard = self.heard_new_at
        after_heard = sum(1 for m in refused
                          if (h := heard[m.client]) is not None and m.sent >= h)
        served = sorted(t - restart for t in self.served_at if t is not None)
        waits = sorted(max(0, t - h) for t, h in zip(self.served_at, heard)
                       if t is not None and h is not None)
        sent = len(self.msgs)
        return [
            ("incarnation_marks", 1.0 if self.marks else 0.0, None),
            ("refused_unknown", float(len(refused)), None),
            ("refused_unknown_rate", finish(AMO, "refused_unknown_rate", len(refused), sent),
             None),
            ("refused_after_restart", float(sum(1 for m in refused if m.sent >= restart)),
             None),
            ("refused_after_heard", float(after_heard), None),
            ("served_again_max", float(served[-1]) if served else 0.0, None),
            ("served_again_median", _median(served), None),
            ("served_after_heard_max", float(waits[-1]) if waits else 0.0, None),
            ("served_after_heard_median", _median(waits), None),
            ("not_served_again", float(self.served_at.count(None)), None),
            ("round_trip", round_trip, None),
        ]


def _ms(ticks: float | None) -> str:
    """Ticks shown in whole milliseconds (``-``: no value)."""
    return shown(None if ticks is None else ticks / MS, ".0f")


def _median(values: list[int]) -> float:
    """The median of sorted ``values`` (0 for none)."""
    if not values:
        return 0.0
    mid = len(values) // 2
    return float(values[mid]) if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def _net(p: dict[str, Any], **over: Any) -> NetConfig:
    cfg = dict(
        clients=p["clients"], servers=p["servers"], calls=p["calls"],
        gap=parse_delay(p["gap"]), spread=p["spread"], delay=parse_delay(p["delay"]),
        loss=p["loss"], duplicate=p["duplicate"], reorder=p["reorder"],
        reorder_extra=p["reorder_extra"], timeout=p["timeout"], retries=p["retries"],
        epsilon=p["epsilon"], drift_ppm=p["drift_ppm"], resync=p["resync"],
    )
    cfg.update(over)
    return NetConfig(**cfg)


def bound(p: dict[str, Any]) -> int:
    """Section 2.4: epsilon + delta + RT(N)."""
    delta = parse_delay(p["delay"]).quantile(p["p_net"])
    return int(p["epsilon"] + delta + p["retries"] * p["timeout"])


def run(ds: DatasetWriter, p: dict[str, Any], seed: int,
        progress: Progress | None = None) -> dict[str, Any]:
    fixed = dict(estimator="fixed", gc_every=p["gc_every"])
    plan: list[tuple[str, str, NetConfig, ReceiverConfig]] = []
    exps = p["experiments"]
    if "once" in exps:
        plan.append(("once", "once", _net(p, calls=1), ReceiverConfig(rho=p["rho"], **fixed)))
    if "many" in exps:
        plan.append(("many", "many", _net(p, clients=1, calls=p["many_calls"],
                                           spread=1), ReceiverConfig(rho=p["rho"], **fixed)))
    if "sweep" in exps:
        for rho in p["rhos"]:
            plan.append((f"rho={rho}", "sweep", _net(p), ReceiverConfig(rho=rho, **fixed)))
    resilient = dict(resilient=True, beta=p["beta"], latest_every=p["latest_every"])
    if "skew" in exps:
        late, early = p["skew"], p["skew_early"]
        for name, over in (("clients-synced", {}),
                           ("clients-slow", dict(client_offset=-late, skewed=p["skewed"])),
                           ("clients-fast", dict(client_offset=early, skewed=p["skewed"])),
                           ("server-slow", dict(server_offset=-early)),
                           ("server-fast", dict(server_offset=late))):
            plan.append((name, "skew", _net(p, **over),
                         ReceiverConfig(rho=p["rho"], **fixed, **resilient)))
    if "crash" in exps:
        plan.append(("crash", "crash",
                     _net(p, crash_at=p["crash_at"], crash_down=p["crash_down"],
                          retries=p["crash_retries"]),
                     ReceiverConfig(rho=p["rho"], **fixed, **resilient)))
        plan.append(("crash-grace", "crash",
                     _net(p, crash_at=p["crash_at"], crash_down=p["crash_down"],
                          retries=p["crash_retries"]),
                     ReceiverConfig(rho=p["rho"], **fixed, **resilient,
                                recovery_grace=p["crash_grace"])))
    if "reorder" in exps:
        for w in p["reorder_windows"]:
            plan.append((f"reorder W={w}", "reorder",
                         _net(p, clients=p["reorder_clients"], calls=p["reorder_calls"],
                              gap=parse_delay(p["reorder_gap"]), reorder=p["reorder_p"]),
                         ReceiverConfig(rho=p["rho"], **fixed, reorder_window=w)))
    if "restart" in exps:
        restart = _net(p, clients=p["restart_clients"], calls=p["restart_calls"], servers=1,
                       crash_at=p["crash_at"], crash_down=p["restart_down"],
                       retries=p["crash_retries"])
        for name in ("restart", "restart-marked"):
            plan.append((name, "restart", restart,
                         ReceiverConfig(rho=p["rho"], **fixed, **resilient)))
    open_messages(ds, [opts for _, _, _, opts in plan], marks="restart" in exps)
    runs = []
    summary: dict[str, Any] = {"bound_rho_min": bound(p)}
    for index, (name, traffic, net, opts) in enumerate(plan):
        rng = random.Random(f"{seed}/scmp/{traffic}")
        sim: AmoRun
        if traffic == "restart":
            sim = RestartRun(ds, name, net, opts, rng, p["sample_every"],
                             marks=name == "restart-marked", callers=p["restart_callers"])
        elif traffic == "reorder":
            sim = ReorderRun(ds, name, net, opts, rng, p["sample_every"])
        else:
            sim = AmoRun(ds, name, net, opts, rng, p["sample_every"])
        if progress:
            progress(f"scmp {name}", index, len(plan))
        calls = net.clients * net.calls * (p["restart_callers"] if traffic == "restart" else 1)
        sim.execute(tick=in_run(progress, counted(sim.msgs), calls, "calls"))
        rows = sim.metrics()
        if isinstance(sim, ReorderRun):
            rows += sim.reorder_metrics()
        if isinstance(sim, RestartRun):
            rows += sim.restart_metrics(2 * parse_delay(p["delay"]).quantile(p["p_net"]))
        rows.append(("bound_rho_min", float(bound(p)), None))
        rows.append(("rho", float(opts.rho or 0), None))
        if name in ("crash", "crash-grace"):
            t_cr = START + p["crash_at"]
            late = [m for m in sim.msgs if m.sent > t_cr + p["beta"] + p["epsilon"]]
            rows.append(("lost_after_crash_plus_beta",
                         float(sum(1 for m in late if m.accepted == 0 and m.refused)), None))
            rows.append(("sent_after_crash_plus_beta", float(len(late)), None))
        write_metrics(ds, name, "atmostonce", rows)
        runs.append({"run": name, "params": {**option_params(opts), "clients": net.clients,
                                             "calls": net.calls, "servers": net.servers,
                                             "client_offset": net.client_offset,
                                             "server_offset": net.server_offset}})
        got = {m: v for m, v, t in rows if t is None}
        summary[name] = (f"lost {shown(got['lost_rate'], '.4f')}, table mean "
                         f"{shown(got['table_mean'], '.1f')} "
                         f"peak {shown(got['table_peak'], '.0f')}, violations "
                         f"{shown(got['at_most_once_violations'], '.0f')}")
        if "refused_unknown_rate" in got:
            summary[name] += (f", refused (outcome unknown) "
                              f"{shown(got['refused_unknown_rate'], '.4f')}"
                              f", after hearing {shown(got['refused_after_heard'], '.0f')}, "
                              f"served again median {_ms(got['served_again_median'])} ms max "
                              f"{_ms(got['served_again_max'])} ms")
        if "refused_genuine_rate" in got:
            summary[name] += (f", refused genuine {shown(got['refused_genuine_rate'], '.4f')}"
                              f", table bytes mean {shown(got['table_bytes_mean'], '.0f')}")
    if progress:
        progress("scmp", len(plan), len(plan))
    claims = list(CLAIMS) + ([RESTART_CLAIM] if "restart" in exps else [])
    return {"runs": runs, "claims": claims, "summary": summary}


SCENARIO = Scenario(
    name="scmp",
    summary="SCMP at-most-once: clients once/many, rho sweep vs the section 2.4 bound, "
            "slow/fast clocks, resilient crash and restart (ours: reorder window, "
            "immediate restart with incarnation marks)",
    params=PARAMS,
    run=run,
    source="SCMP paper sections 2.3-2.4 and 3.1 (Figs. 3-2, 3-3)",
    claims=CLAIMS,
)
