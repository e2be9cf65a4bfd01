"""At-most-once network shared by the ``scmp`` and ``adaptive`` scenarios.

Clients send messages ``(conn, ts)`` -- ``ts`` from the client's guarded clock, one
connection per client -- to servers through the retransmitting transport; every copy
the network delivers is handed to the shared row adapter
(``timebound.adapters.atmostonce.AtMostOnceAdapter.decide``, the replay's own path:
the server's core ``Receiver`` runs its timers to ``at``, the server's guarded clock,
then decides), and recorded as a ``messages`` row (with ``original`` = first copy
delivered) plus a ``sim_messages`` row with the core's verdict, estimate and table
size. Crashes are ``crash`` rows fed to the same adapter. The loss measures are the
contract's (``timebound.contract``: ``lost`` = original rows refused ``stale`` or
``early``; ``lost_per_accepted`` = lost / accepted rows), tallied and finished by their
one declaration (``timebound.measures``), as the pipeline's are. The transport
acknowledges every copy taken while the server is up, whatever the verdict (the
acknowledgment is the transport's, not SCMP's), so the network trace does not depend
on the receiver's decisions: runs that differ only in rho see identical traffic.
No protocol rule lives here.

Incarnations (our extension): each server's incarnation number is a counter
the simulator keeps, raised at each crash. A message may carry a ``mark`` (the
incarnation its client had heard of when it made the message, set by a run that marks,
``scmp``'s restart experiment); its row is ``marked`` iff the mark equals the
incarnation deciding it, and the adapter passes that to the core
(``receive(..., marked=)``). Messages of runs that do not mark carry no mark, and the
``marked`` column is written only when some run of the dataset marks.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from timebound.adapters import Row
from timebound.adapters.atmostonce import AtMostOnceAdapter, AtMostOnceOptions
from timebound.contract import EXTENSION_COLUMNS, LOST_VERDICTS
from timebound.core.atmostonce import ClassifiedReceiver, ReceiverConfig, crc32_classifier
from timebound.measures import AMO, Tally, finish
from timebound.sim._clocks import Clock
from timebound.sim._dataset import DatasetWriter
from timebound.sim._engine import URGENT, Engine
from timebound.sim._links import Delay, Link
from timebound.sim._transport import Packet, Reliable

#: (measure, value, t) rows of one run's metrics: a null value is a measure without a
#: value (a ratio over zero), written as no row.
MetricRows = list[tuple[str, "float | None", "int | None"]]
#: The declared measures each run tallies over its decided rows.
TALLIED = ("originals", "lost", "accepted", "entries_sum", "entries_n", "table_size_max",
           "at_most_once_violations")

#: Traffic starts at this true time (10 s in microsecond ticks): every clock, even one
#: set seconds slow, then reads well above 1 (the contract's ``ts >= 1``).
START = 10_000_000


#: The option columns of ``messages``, in table order (the core's ReceiverConfig fields).
OPTION_FIELDS = ("estimator", "rho", "gc_every", "window", "spikes", "p", "resilient",
                 "beta", "latest_every", "recovery_grace", "reorder_window")

#: Options written as null when they hold their default (the figures' behaviour).
_NULL_DEFAULTS = {"recovery_grace": 0, "reorder_window": 1}


def option_values(opts: ReceiverConfig) -> tuple[Any, ...]:
    """A run's option columns; a recovery pause of 0 and a reorder window of 1 are the
    defaults, written as null."""
    values = (getattr(opts, name) for name in OPTION_FIELDS)
    return tuple(None if _NULL_DEFAULTS.get(name, object()) == value else value
                 for name, value in zip(OPTION_FIELDS, values))


def open_messages(ds: DatasetWriter, configs: Sequence[ReceiverConfig], *,
                  marks: bool = False) -> None:
    """Create the ``messages`` table before a scenario's runs: its extension columns
    (beyond the papers) are written only when some run uses them -- ``reorder_window``
    when a run uses a window, ``marked`` when a run marks its messages (``marks``) --
    so datasets of the papers' receivers keep the columns they always had."""
    used = {"reorder_window": any(opts.reorder_window != 1 for opts in configs),
            "marked": marks}
    ds.table("messages", omit=tuple(c for c in EXTENSION_COLUMNS["messages"]
                                    if not used[c]))


def option_params(opts: ReceiverConfig) -> dict[str, Any]:
    """The options a run was given (for the manifest)."""
    return {name: value for name, value in zip(OPTION_FIELDS, option_values(opts))
            if value is not None}


@dataclass(slots=True)
class Message:
    client: int
    conn: str
    server: int
    ts: int
    sent: int  # true send time
    accepted: int = 0
    refused: int = 0  # stale or early verdicts
    mark: int | None = None  # incarnation heard of when made (runs that mark)


@dataclass
class NetConfig:
    clients: int
    servers: int
    calls: int            # messages per client
    gap: Delay            # time between a client's messages
    spread: int           # first message uniform in [0, spread)
    delay: Delay          # one-way network delay, both directions
    loss: float
    duplicate: float
    reorder: float
    reorder_extra: int
    timeout: int
    retries: int
    epsilon: int          # clock synchronisation bound (ticks)
    drift_ppm: float
    resync: int
    client_offset: int = 0      # added to the clocks of the skewed clients
    skewed: float = 0.0         # fraction of clients whose clock is skewed
    server_offset: int = 0
    crash_at: int | None = None  # crash of server 0, ticks after START
    crash_down: int = 0
    partition: tuple[int, int] | None = None  # all links cut during [start, end)
    delay_fn: Callable[[int], Delay] | None = None  # time-varying delay (adaptive)


class AmoRun:
    """One run: builds the network, drives the receivers, records rows and metrics."""

    def __init__(self, ds: DatasetWriter, run: str, net: NetConfig, opts: ReceiverConfig,
                 rng: random.Random, sample_every: int) -> None:
        self.ds = ds
        self.run = run
        self.net = net
        self.opts = opts
        self.rng = rng
        self.engine = Engine()
        self.messages = ds.table("messages")
        self.decisions = ds.table("sim_messages")
        self.seq = 0
        self.sample_every = sample_every
        self.series: dict[int, tuple[int, int, int, int]] = {}  # bucket -> (entries, rho, lost, acc)
        #: The declared measures' partials over the decided rows (``timebound.measures``).
        self.tally = Tally(AMO, TALLIED)
        self.rows_by_verdict: dict[str, int] = {}
        self.msgs: list[Message] = []
        self.max_lifetime = 0
        self._columns = tuple(value for name, value in zip(OPTION_FIELDS, option_values(opts))
                              if name in self.messages.names)
        #: The ``marked`` extension column is in the table (some run marks).
        self._marks_column = "marked" in self.messages.names
        self.transport = Reliable(self.engine, net.timeout, net.retries)
        self.adapter = AtMostOnceAdapter(AtMostOnceOptions(opts, 1))
        self.server_names = [f"s{i + 1}" for i in range(net.servers)]
        for name in self.server_names:
            self.adapter.adopt(name, ClassifiedReceiver([opts.new_receiver()], crc32_classifier(1)),
                               None)
        #: Each server's core receiver (the adapter's, one hash class).
        self.servers = [node.receivers[0] for node in
                        (self.adapter.node(name) for name in self.server_names) if node]
        seed = rng.getrandbits(48)
        phase = rng.randrange(max(net.resync, 1))
        self.server_clocks = [
            Clock(offset=net.server_offset, drift_ppm=rng.uniform(-net.drift_ppm, net.drift_ppm),
                  resync=net.resync, epsilon=net.epsilon, seed=seed + i, phase=phase + i)
            for i in range(net.servers)
        ]
        nskew = int(round(net.skewed * net.clients))
        self.client_clocks = [
            Clock(offset=net.client_offset if i < nskew else 0,
                  drift_ppm=rng.uniform(-net.drift_ppm, net.drift_ppm), resync=net.resync,
                  epsilon=net.epsilon, seed=seed + 1000 + i,
                  phase=rng.randrange(max(net.resync, 1)))
            for i in range(net.clients)
        ]
        parts = [net.partition] if net.partition else []
        link_rng = random.Random(rng.getrandbits(64))
        self.up = [Link(self.engine, link_rng, net.delay, loss=net.loss,
                        duplicate=net.duplicate, reorder=net.reorder,
                        reorder_extra=net.reorder_extra, partitions=parts)]
        self.down_link = Link(self.engine, link_rng, net.delay, loss=net.loss,
                              duplicate=net.duplicate, reorder=net.reorder,
                              reorder_extra=net.reorder_extra, partitions=parts)
        self.work_rng = random.Random(rng.getrandbits(64))
        self.crashed = False
        #: Each server's incarnation number (module docstring), raised at each crash.
        self.incarnations = [0] * net.servers

    # -- traffic ---------------------------------------------------------------------

    def start(self) -> None:
        net = self.net
        for i in range(net.clients):
            first = self.work_rng.randrange(max(net.spread, 1))
            self.engine.at(START + first, self._send, (i, net.calls))
        if net.crash_at is not None:
            self.engine.at(START + net.crash_at, self._crash, 0, priority=URGENT)

    def _send(self, arg: tuple[int, int]) -> None:
        client, left = arg
        engine = self.engine
        net = self.net
        ts = self.client_clocks[client].monotonic(engine.now, strict=True)
        server = client % net.servers if net.servers > 1 else 0
        msg = Message(client, f"c{client + 1}", server, ts, engine.now)
        self.msgs.append(msg)
        link = self.up[0]
        if net.delay_fn is not None:
            link.delay = self.down_link.delay = net.delay_fn(engine.now)
        self.transport.send(Packet(msg, link, self.down_link, self._arrive))
        if left > 1:
            engine.schedule(max(1, net.gap.sample(self.work_rng)), self._send,
                            (client, left - 1))

    def _crash(self, index: int) -> None:
        name = self.server_names[index]
        at = self.server_clocks[index].monotonic(self.engine.now)
        receiver = self.servers[index]
        receiver.handle_timer(now=at)
        if receiver.down:
            return
        self.seq += 1
        self.adapter.feed(Row(self.run, self.seq, {"type": "crash", "receiver": name,
                                                   "at": at, "down": self.net.crash_down}))
        self.crashed = True
        self.incarnations[index] += 1
        self.messages.add((self.run, self.seq, "crash", self.server_names[index], None, None,
                           at, self.net.crash_down, None) + self._columns
                          + ((None,) if self._marks_column else ()))

    def _arrive(self, packet: Packet) -> bool:
        msg: Message = packet.payload
        name = self.server_names[msg.server]
        at = self.server_clocks[msg.server].monotonic(self.engine.now)
        original = packet.arrivals == 1
        self.seq += 1
        seq = self.seq
        marked = msg.mark is not None and msg.mark == self.incarnations[msg.server]
        self.messages.add((self.run, seq, "msg", name, msg.conn,
                           msg.ts, at, None, original) + self._columns
                          + ((marked,) if self._marks_column else ()))
        verdict, rho, entries = self.adapter.decide(self.run, seq, name, msg.conn, msg.ts, at,
                                                    marked=marked)
        if rho is None or entries is None:  # down: not decided
            self.decisions.add((self.run, seq, "down", None, None))
            self._count("down")
            return False
        self.decisions.add((self.run, seq, verdict, rho, entries))
        self._count(verdict)
        if verdict in ("accepted", "duplicate", "stale"):
            if at - msg.ts > self.max_lifetime:
                self.max_lifetime = at - msg.ts
        if verdict == "accepted":
            msg.accepted += 1
        elif verdict in LOST_VERDICTS:
            msg.refused += 1
        self.tally.add({"verdict": verdict, "original": original, "entries": entries,
                        "receiver": name, "conn": msg.conn, "ts": msg.ts})
        self.series[at // self.sample_every] = (entries, rho, self.lost, self.accepted)
        return True

    @property
    def lost(self) -> int:
        """Lost messages so far (the declared ``lost``)."""
        return int(self.tally.value("lost"))

    @property
    def accepted(self) -> int:
        """Accepted rows so far (the declared ``accepted``)."""
        return int(self.tally.value("accepted"))

    def _count(self, verdict: str) -> None:
        self.rows_by_verdict[verdict] = self.rows_by_verdict.get(verdict, 0) + 1

    # -- results ---------------------------------------------------------------------

    def execute(self, tick: Callable[[int], None] | None = None) -> None:
        self.start()
        self.engine.run(tick=tick)

    def metrics(self) -> MetricRows:
        """(measure, value, t) rows for the metrics table (a null value: no row)."""
        sent = len(self.msgs)
        never = sum(1 for m in self.msgs if m.accepted == 0)
        tally = self.tally
        out: MetricRows = [
            ("messages_sent", float(sent), None),
            ("rows", float(self.seq), None),
            ("originals", tally.finish("originals"), None),
            ("lost", tally.finish("lost"), None),
            ("lost_rate", tally.finish("lost_rate"), None),
            ("lost_per_accepted", tally.finish("lost_per_accepted"), None),
            ("never_accepted_rate", finish(AMO, "never_accepted_rate", never, sent), None),
            ("at_most_once_violations", tally.finish("at_most_once_violations"), None),
            ("table_mean", tally.finish("table_mean"), None),
            # the pipeline's ``table_size_max`` (one declaration), under its own name
            ("table_peak", tally.finish("table_size_max"), None),
            ("retransmissions", float(self.transport.retransmissions), None),
            ("gave_up", float(self.transport.gave_up), None),
            ("max_lifetime", float(self.max_lifetime), None),
            ("final_estimate", float(self.servers[0].estimate), None),
            ("events", float(self.engine.events), None),
        ]
        for verdict, count in sorted(self.rows_by_verdict.items()):
            out.append((f"rows_{verdict}", float(count), None))
        for bucket, (entries, rho, lost, acc) in sorted(self.series.items()):
            t = bucket * self.sample_every
            out.append(("table_size", float(entries), t))
            out.append(("estimate", float(rho), t))
            out.append(("lost_over_accepted", finish(AMO, "lost_per_accepted", lost, acc), t))
        return out


def shown(value: float | None, spec: str) -> str:
    """A measure for a summary line: formatted, or ``-`` when null (no value)."""
    return "-" if value is None else format(value, spec)


def write_metrics(ds: DatasetWriter, run: str, protocol: str,
                  rows: Sequence[tuple[str, float | None, int | None]]) -> None:
    """Write a run's metrics rows; a null value (a ratio over zero) has no row, as in
    the pipeline's table (``timebound.measures``)."""
    table = ds.table("metrics")
    for measure, value, t in rows:
        if value is not None:
            table.add((run, protocol, measure, float(value), t))
