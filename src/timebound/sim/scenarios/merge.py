"""Scenario ``merge``: causal deterministic merge with replicated mergers (section 4).

Publishers are core ``CausalProcess`` objects (⟨r, c, kn⟩ timestamps, Fig. 1) whose
``rt`` is their physical clock (offset uniform in ``[-epsilon/2, epsilon/2]``, so G1
holds with ``epsilon``; 1 tick = 1 ms). G1: no clock read beyond epsilon -- every stamp
is the publisher's real clock reading (engine time + offset), and a publisher stamps at
most one event per tick (the paper's assumption): a publication or receive that finds
its publisher already stamped in this tick waits one tick on the engine (nudging the
reading forward instead let clocks drift past epsilon, and processes reset); a receive
that would wait past ``delay_max`` after its send is lost instead (G2 allows a loss, not
a later receive; rare at the defaults).
Each publisher publishes at Poisson rate
``rate``; every publication is also received by the other publishers (so messages
causally depend on each other). Publishers are split in two groups; each group's
messages go to two replicated level-1 mergers (``A1``/``B1`` and ``A2``/``B2``) with a
one-way delay uniform in ``[1, delay_max]`` -- with probability ``p_late`` a late
delay up to ``3 * delay_max`` instead (the G2 violations that become late losses).
Level-2 mergers ``T1`` and ``T2`` (the subscribers' view) receive the deliveries of
``A1`` and ``A2`` one tick later and run with ``level_parameters`` (Theorem 4.3:
``ds(epsilon, delta + 3 epsilon)``). Each merger is the core ``Merger``; before the
arrivals at its clock time T it delivers deadlines < T, after them deadline T (the
replay's timing). The driver sleeps: after every call it arms one engine timer at the
merger's ``next_deadline()`` (converted to engine time by the merger's clock offset),
ordered after the arrivals of that instant and among mergers by a fixed priority
(A1, B1, A2, B2, T1, T2), so idle ticks cost nothing. Timers stop at the end of the
run (``end``), as the arrivals do. Runs: one per delta in ``deltas``. Measured: identical delivery
order at replicated mergers, maximum buffering vs ``delta + 3 epsilon`` (observed: from a
message's arrival to the merger's clock reading when the driver hands it out, not the
deadline the merger computed), late losses
vs delta, the publishers' resets (state and message resets; none while G1 holds), and
timestamp bytes vs a vector clock as n grows; the timestamp size is the
core codec's (``WireCodec.size``: the bounded wire form ⟨r mod B, c, kn⟩ of sections
3.2-3.3 for the run's epsilon and delta), not a formula of its own.
"""

from __future__ import annotations

import random
from typing import Any

from timebound.core.causal import CausalProcess, Timestamp, WireCodec
from timebound.core.merge import Envelope, Merger, level_parameters
from timebound.measures import MERGE, finish
from timebound.sim._dataset import DatasetWriter
from timebound.sim._engine import LATE, Engine
from timebound.sim._scenario import Param, Progress, Scenario, clocked, in_run
from timebound.sim.scenarios._amo import MetricRows, shown, write_metrics

PARAMS = (
    Param("publishers", "publishers (split in two groups)", "6", lo=2, hi=1000),
    Param("rate", "publications per publisher per tick", "0.05", "float", lo=0.0001, hi=1),
    Param("epsilon", "clock bound epsilon (ticks = ms)", "4", lo=1, hi=100),
    Param("delay_max", "one-way delay bound of the network (ticks)", "20", lo=1),
    Param("p_late", "probability of a delay beyond delay_max", "0.02", "float", lo=0, hi=1),
    Param("deltas", "delta values (one run each)", "5,10,20,40", "intlist", lo=0),
    Param("duration", "publishing time (ticks)", "20000", lo=100),
    Param("vector_ns", "n values for the timestamp-size comparison", "4,16,64,256,1024",
          "intlist", lo=1),
)

CLAIMS = (
    {"paper": "merge", "claim": "replicated mergers deliver common messages in the same "
     "order (Theorem 4.4)", "measure": "order_mismatches", "expected": "0"},
    {"paper": "merge", "claim": "no message is buffered longer than delta + 3 epsilon "
     "(Lemma 4.2)", "measure": "max_buffering vs bound", "expected": "<= delta + 3 eps"},
    {"paper": "merge", "claim": "increasing delta decreases the messages lost (section 4.1)",
     "measure": "late_pct", "expected": "decreasing in delta"},
    {"paper": "merge", "claim": "the bounded timestamp does not grow with n like a vector "
     "clock", "measure": "timestamp_bytes vs vector_bytes",
     "expected": "O(eps log n + log delta) vs O(n)"},
)


#: merger names in timer order: at one engine instant, the timers of these mergers
#: fire in this order, after every arrival of that instant.
_ORDER = ("A1", "B1", "A2", "B2", "T1", "T2")


class _Node:
    def __init__(self, name: str, eps: int, delta: int, offset: int, rows: Any, run: str,
                 engine: Engine, level: int, end: int) -> None:
        self.name = name
        self.merger = Merger(eps, delta)
        self.offset = offset
        self.rows = rows
        self.run = run
        self.engine = engine
        self.level = level
        self.last = None
        self.out: list[tuple[str, str, int, str]] = []
        self.seq = 0
        self.late = 0
        self.received = 0
        self.forward: list[_Node] = []
        self.end = end
        self.priority = LATE + _ORDER.index(name)
        self.armed: set[int] = set()
        self.max_buffered_for = 0  # the longest observed arrival-to-delivery (clock)

    def clock(self) -> int:
        return self.engine.now + self.offset

    def arrive(self, arg: tuple[str, str, Timestamp]) -> None:
        proc, msg, stamp = arg
        at = self.clock()
        self._deliver(self.merger.handle_timer(now=at - 1))
        self.rows.add_next(self.run, self.name, msg, proc, at, stamp)
        self.received += 1
        verdict = self.merger.receive(Envelope(proc, msg, stamp), now=at).value
        if verdict == "late":
            self.late += 1
        if verdict != "buffered":
            self.out.append((proc, msg, at, verdict))
        self._arm()

    def timer(self, when: int) -> None:
        self.armed.discard(when)
        self._deliver(self.merger.handle_timer(now=self.clock()))
        self._arm()

    def _arm(self) -> None:
        """Sleep until the merger's next deadline (one timer per instant)."""
        deadline = self.merger.next_deadline()
        if deadline is None:
            return
        when = max(deadline - self.offset, self.engine.now)
        if when < self.end and when not in self.armed:
            self.armed.add(when)
            self.engine.at(when, self.timer, when, priority=self.priority)

    def _deliver(self, deliveries: list[Any]) -> None:
        now = self.clock()
        for d in deliveries:
            # observed: from its arrival to the clock reading at which it is handed out
            self.max_buffered_for = max(self.max_buffered_for, now - d.arrived)
            e = d.envelope
            self.out.append((e.proc, e.msg, d.time, "deliver"))
            for nxt in self.forward:
                self.engine.schedule(1, nxt.arrive, (e.proc, e.msg, e.stamp))


class _Rows:
    def __init__(self, ds: DatasetWriter, eps: int, delta_of: dict[str, int]) -> None:
        self.table = ds.table("arrivals")
        self.seq = 0
        self.eps = eps
        self.delta_of = delta_of

    def add_next(self, run: str, merger: str, msg: str, proc: str, at: int,
                 stamp: Timestamp) -> None:
        self.seq += 1
        self.table.add((run, self.seq, merger, msg, proc, at, stamp.r, stamp.c,
                        list(stamp.kn), self.eps, self.delta_of[merger], "rckn"))


def run(ds: DatasetWriter, p: dict[str, Any], seed: int,
        progress: Progress | None = None) -> dict[str, Any]:
    eps = p["epsilon"]
    runs = []
    summary: dict[str, Any] = {}
    decisions = ds.table("sim_arrivals")
    def one(index: int, delta: int) -> None:
        name = f"delta={delta}"
        if progress:
            progress(f"merge {name}", index, len(p["deltas"]))
        rng = random.Random(f"{seed}/merge")
        engine = Engine()
        half = eps // 2
        procs = [f"p{i + 1}" for i in range(p["publishers"])]
        offsets = {q: rng.randint(-half, half) for q in procs}
        _, delta2 = level_parameters(eps, delta)
        # level 2 also absorbs the forwarding tick and the level-1 mergers' skew
        delta2 += 1 + eps
        names1 = ["A1", "B1", "A2", "B2"]
        rows = _Rows(ds, eps, {**dict.fromkeys(names1, delta), "T1": delta2, "T2": delta2})
        start = 2 * eps + 1
        end = start + p["duration"] + 4 * p["delay_max"] + 8 * delta2 + 10 * eps
        nodes = {m: _Node(m, eps, delta, rng.randint(-half, half), rows, name, engine, 1, end)
                 for m in names1}
        # level 2 has its own delta, and option columns are constant per run: its
        # arrivals form the run "<name>/level2"
        nodes.update({m: _Node(m, eps, delta2, rng.randint(-half, half), rows,
                               f"{name}/level2", engine, 2, end) for m in ("T1", "T2")})
        nodes["A1"].forward = [nodes["T1"], nodes["T2"]]
        nodes["A2"].forward = [nodes["T1"], nodes["T2"]]
        processes = {q: CausalProcess(eps, n=len(procs)) for q in procs}
        last_rt = dict.fromkeys(procs, 0)
        # G1 as it held: the lowest and highest clock reading minus engine time over
        # the publishers' stamped events (as sim._merge_checks measures clock_spread)
        reads = [eps, -eps]
        count = [0]
        net = random.Random(rng.getrandbits(64))

        def publish(q: str) -> None:
            rt = engine.now + offsets[q]
            if rt <= last_rt[q]:  # q already stamped an event in this tick: wait one
                engine.schedule(1, publish, q)
                return
            last_rt[q] = rt
            _read(rt - engine.now)
            count[0] += 1
            msg = f"m{count[0]}"
            stamp = processes[q].send(now=rt)
            group = ("A1", "B1") if procs.index(q) < len(procs) // 2 else ("A2", "B2")
            for m in group:
                if net.random() < p["p_late"]:
                    d = net.randint(p["delay_max"] + 1, 3 * p["delay_max"])
                else:
                    d = net.randint(1, p["delay_max"])
                engine.schedule(d, nodes[m].arrive, (q, msg, stamp))
            for other in procs:
                if other != q:
                    engine.schedule(net.randint(1, p["delay_max"]), receive,
                                    (other, stamp, engine.now))
            nxt = engine.now + 1 + int(net.expovariate(p["rate"]))
            if nxt < start + p["duration"]:
                engine.at(nxt, publish, q)

        def receive(arg: tuple[str, Timestamp, int]) -> None:
            q, stamp, sent = arg
            rt = engine.now + offsets[q]
            if rt <= last_rt[q]:  # q already stamped an event in this tick: wait one,
                if engine.now + 1 - sent <= p["delay_max"]:  # unless later than the
                    engine.schedule(1, receive, arg)  # network's bound (G2: then lost)
                return
            last_rt[q] = rt
            _read(rt - engine.now)
            processes[q].receive(stamp, now=rt)

        def _read(skew: int) -> None:
            reads[0], reads[1] = min(reads[0], skew), max(reads[1], skew)

        for q in procs:
            engine.at(start + int(net.expovariate(p["rate"])), publish, q)
        engine.run(tick=in_run(progress, clocked(start, end), end - start,
                               "ticks"))
        metrics: MetricRows = []
        mismatches = 0
        for a, b in (("A1", "B1"), ("A2", "B2"), ("T1", "T2")):
            da = [(x, y) for x, y, _, act in nodes[a].out if act == "deliver"]
            db = [(x, y) for x, y, _, act in nodes[b].out if act == "deliver"]
            common = set(da) & set(db)
            if [k for k in da if k in common] != [k for k in db if k in common]:
                mismatches += 1
        max_buf = max(n.max_buffered_for for n in nodes.values() if n.level == 1)
        received = sum(n.received for n in nodes.values() if n.level == 1)
        late = sum(n.late for n in nodes.values() if n.level == 1)
        for node in nodes.values():
            for proc, msg, t, action in node.out:
                decisions.add((node.run, node.name, msg, proc, action, t))
        metrics += [
            ("order_mismatches", float(mismatches), None),
            ("max_buffering", float(max_buf), None),
            ("buffering_bound", float(delta + 3 * eps), None),
            ("late_pct", finish(MERGE, "late_pct", late, received), None),
            ("published", float(count[0]), None),
            ("clock_spread", float(max(reads[1] - reads[0], 0)), None),
            ("resets", float(sum(pr.resets + pr.message_resets
                                 for pr in processes.values())), None),
        ]
        for n in p["vector_ns"]:
            ts_bytes = WireCodec(eps, delta, n).size
            metrics.append((f"timestamp_bytes_n={n}", float(ts_bytes), None))
            metrics.append((f"vector_bytes_n={n}", float(8 * n), None))
        write_metrics(ds, name, "merge", metrics)
        runs.append({"run": name, "params": {"epsilon": eps, "delta": delta, "level": 1}})
        runs.append({"run": f"{name}/level2", "params": {"epsilon": eps, "delta": delta2,
                                                         "level": 2}})
        summary[name] = (f"late {shown(finish(MERGE, 'late_pct', late, received), '.2f')}%, "
                         f"max buffering "
                         f"{max_buf} (bound {delta + 3 * eps}), order mismatches {mismatches}")
    for index, delta in enumerate(p["deltas"]):
        one(index, delta)
    if progress:
        progress("merge", 1, 1)
    return {"runs": runs, "claims": list(CLAIMS), "summary": summary}


SCENARIO = Scenario(
    name="merge",
    summary="causal deterministic merge: publishers, two-level replicated mergers; "
            "order agreement, buffering <= delta + 3 eps, late losses vs delta, "
            "timestamp bytes vs vector clocks",
    params=PARAMS,
    run=run,
    source="causal merge paper section 4 (Lemma 4.2, Theorems 4.3-4.5) and section 6",
    claims=CLAIMS,
)
