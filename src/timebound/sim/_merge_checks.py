"""Merge-paper checks the ``merge`` scenario does not make (reproduction only).

- ``causal`` (Theorem 4.5): publishers (core ``CausalProcess``) publish and receive
  each other's messages under G1 (offsets within epsilon) and G2 (delays <= delta); one
  core ``Merger`` gets every publication. The simulator keeps vector clocks as ground
  truth of ``->`` (never shown to the protocol) and counts deliveries where a causal
  predecessor that the merger also delivered came later.
- ``stabilize`` (Theorems 3.7, 4.6): the same run, with one publisher's state and the
  timestamps in flight at ``corrupt_at`` overwritten by arbitrary values; measured:
  ticks from the corruption to the last reset or causal-order violation it causes,
  against ``9 eps + 2 delta`` (every reset and causal-order violation counts, however
  late: the run without corruption has none) (knowledge drains within the 6 eps +
  delta window of Theorem 3.7, the merger then buffers at most delta + 3 eps, Lemma
  4.2).
- ``wire``: the bytes of the core's ``WireCodec`` encoding of every timestamp of a run
  with ``n`` processes, for several n (Theorem 3.8).

``causal`` also measures the specification's liveness (section 4.1: every message is
eventually delivered) and Theorem 4.3 (a message is delivered within ``delta + 3 eps``
of its send) from observed delivery times, the simulator's tick at which the merger
handed each message out (not its deadline): ``arrived_within_delta`` (merger arrivals
at most delta after their send), ``undelivered`` (of those, never delivered),
``send_to_delivery_max`` and ``send_to_delivery_over_bound`` (deliveries later than
``delta + 3 eps`` after their send); and ``causal_pairs_published``, the causal pairs
(each message against the latest predecessor of each publisher) among every published
message, of which ``causal_pairs_checked`` are those whose two messages were delivered.

Clocks (G1: no clock read beyond epsilon): every event is stamped with its process's
real clock reading, tick + offset, offsets uniform in ``[-eps/2, eps/2]``. A process
stamps at most one event per tick (the paper's model assumes so): an event that
finds its process already stamped in this tick waits one tick; a receive that would
then come later than delta after its send is lost instead (G2 allows a loss, not a
later receive; about 0.2% of receives). (Nudging the reading to ``last + 1`` instead
let clocks drift up to eps + 1 apart, and the uncorrupted run then reset and violated
causal order on some seeds.) ``causal`` and ``stabilize`` report ``clock_spread``, the
largest minus the smallest reading minus tick over every event and the merger's clock
(G1 holds when it is <= ``epsilon``), ``longest_delay`` from a send to its receive or
merger arrival (G2 holds when it is <= ``delta``), ``receives_lost`` and ``resets``
(the processes' resets, both kinds; in ``stabilize`` those after the corruption).

Returns ``{run: {measure: value}}``; 1 tick = 1 ms; seeded and deterministic.
"""

from __future__ import annotations

import random
from typing import Any

from timebound.core.causal import CausalProcess, Timestamp, WireCodec
from timebound.core.merge import Envelope, Merger


def _run(seed: int, n: int, eps: int, delta: int, duration: int, rate: float,
         corrupt_at: int | None) -> dict[str, float]:
    rng = random.Random(f"{seed}/merge-checks/{n}/{corrupt_at}")
    names = [f"p{i}" for i in range(n)]
    half = eps // 2
    offsets = [rng.randint(-half, half) for _ in names]
    procs = [CausalProcess(eps, n=n) for _ in names]
    last_rt = [0] * n
    vc = [[0] * n for _ in names]          # ground truth vector clocks
    events: dict[int, list[tuple[Any, ...]]] = {}
    merger = Merger(eps, delta)
    moff = rng.randint(-half, half)
    sent_at: dict[str, int] = {}
    owner: dict[str, int] = {}
    deliv_t: dict[str, int] = {}
    arrived_at: dict[str, int] = {}  # first arrival at the merger (real ticks)
    seen_resets = 0
    last_reset = -1
    by_index: dict[tuple[int, int], str] = {}
    deps: dict[str, list[int]] = {}
    pos: dict[str, int] = {}
    delivered: list[str] = []
    count = 0
    start = 2 * eps + 1

    def at(t: int, ev: tuple[Any, ...]) -> None:
        events.setdefault(t, []).append(ev)

    for i in range(n):
        at(start + int(rng.expovariate(rate)), ("pub", i))
    end = start + duration + 10 * delta + 20 * eps
    corrupted = False
    resets_before = 0
    last_bad = -1
    # every clock reading minus real time (G1: max - min <= eps), the merger's included
    read_lo = read_hi = moff
    longest = lost = 0  # the longest send-to-receive delay (ticks), receives lost
    for t in range(end):
        if corrupt_at is not None and t >= corrupt_at and not corrupted:
            corrupted = True
            resets_before = seen_resets = sum(p.resets + p.message_resets for p in procs)
            victim = procs[0]
            victim.restore(victim.r, eps + rng.randrange(5 * eps),
                           [rng.randrange(3 * n) for _ in range(2 * eps)])
            for evs in events.values():
                for k, ev in enumerate(evs):
                    if ev[0] in ("arr", "recv") and rng.random() < 0.5:
                        st: Timestamp = ev[-1]
                        bad = Timestamp(st.r, rng.randrange(2 * eps),
                                        tuple(rng.randrange(2 * n) for _ in st.kn))
                        evs[k] = ev[:-1] + (bad,)
        mclock = t + moff
        for d in merger.handle_timer(now=mclock - 1):
            delivered.append(d.envelope.msg)
            pos[d.envelope.msg] = len(delivered)
            deliv_t[d.envelope.msg] = t
        for ev in events.pop(t, []):
            if ev[0] == "pub":
                i = ev[1]
                rt = t + offsets[i]
                if rt <= last_rt[i]:  # i already stamped an event in this tick: wait one
                    at(t + 1, ev)
                    continue
                last_rt[i] = rt
                read_lo, read_hi = min(read_lo, rt - t), max(read_hi, rt - t)
                count += 1
                msg = f"m{count}"
                vc[i][i] += 1
                deps[msg] = list(vc[i])
                owner[msg] = i
                by_index[(i, vc[i][i])] = msg
                sent_at[msg] = t
                stamp = procs[i].send(now=rt)
                at(t + rng.randint(1, delta), ("arr", names[i], msg, stamp))
                for j in range(n):
                    if j != i:
                        at(t + rng.randint(1, delta), ("recv", j, list(vc[i]), t, stamp))
                nxt = t + 1 + int(rng.expovariate(rate))
                if nxt < start + duration:
                    at(nxt, ("pub", i))
            elif ev[0] == "recv":
                _, j, clock, sent, stamp = ev
                rt = t + offsets[j]
                if rt <= last_rt[j]:  # j already stamped an event in this tick: wait one,
                    if t + 1 - sent <= delta:  # unless that is later than delta (G2: lost)
                        at(t + 1, ev)
                    else:
                        lost += 1
                    continue
                last_rt[j] = rt
                longest = max(longest, t - sent)
                read_lo, read_hi = min(read_lo, rt - t), max(read_hi, rt - t)
                vc[j] = [max(a, b) for a, b in zip(vc[j], clock, strict=True)]
                procs[j].receive(stamp, now=rt)
            else:
                _, proc, msg, stamp = ev
                longest = max(longest, t - sent_at[msg])
                arrived_at.setdefault(msg, t)
                merger.receive(Envelope(proc, msg, stamp), now=mclock)
        for d in merger.handle_timer(now=mclock):
            delivered.append(d.envelope.msg)
            pos[d.envelope.msg] = len(delivered)
            deliv_t[d.envelope.msg] = t
        if corrupted:
            total = sum(p.resets + p.message_resets for p in procs)
            if total > seen_resets:
                seen_resets, last_reset = total, t
    violations = 0
    pairs = 0
    for msg in delivered:
        dep = deps[msg]
        for pred in _preds(by_index, owner, dep, msg):
            if pred not in pos:
                continue
            pairs += 1
            if pos[pred] > pos[msg]:
                violations += 1
                last_bad = max(last_bad, deliv_t[pred])
    # every causal pair of published messages (each message against the latest
    # predecessor of each publisher): the pairs a live merger lets the check see
    pairs_published = sum(len(_preds(by_index, owner, deps[m], m)) for m in sent_at)
    # liveness (section 4.1, Theorem 4.3): every message reaches the merger within
    # delta here; observed delivery times (the simulator's ticks), not deadlines
    undelivered = sum(1 for m, t in arrived_at.items()
                      if m not in deliv_t and t - sent_at[m] <= delta)
    waits = [deliv_t[m] - sent_at[m] for m in deliv_t]
    out = {"causal_order_violations": float(violations),
           "causal_pairs_checked": float(pairs), "published": float(count),
           "causal_pairs_published": float(pairs_published),
           "arrived_within_delta": float(sum(1 for m, t in arrived_at.items()
                                             if t - sent_at[m] <= delta)),
           "undelivered": float(undelivered),
           "send_to_delivery_max": float(max(waits, default=0)),
           "send_to_delivery_over_bound": float(sum(1 for w in waits
                                                    if w > delta + 3 * eps)),
           "delivered": float(len(delivered)),
           "resets": float(sum(p.resets + p.message_resets for p in procs)),
           "clock_spread": float(read_hi - read_lo), "epsilon": float(eps),
           "longest_delay": float(longest), "delta": float(delta),
           "receives_lost": float(lost)}
    if corrupt_at is not None:
        resets = sum(p.resets + p.message_resets for p in procs) - resets_before
        after = [m for m in delivered if sent_at[m] > corrupt_at]
        recovery = max(0, max(last_bad, last_reset) - corrupt_at)
        bound = 9 * eps + 2 * delta
        late_bad = 0
        for msg in after:
            if sent_at[msg] <= corrupt_at + bound:
                continue
            for pred in _preds(by_index, owner, deps[msg], msg):
                if pred in pos and pos[pred] > pos[msg]:
                    late_bad += 1
        out.update({"recovery_ticks": float(recovery), "recovery_bound": float(bound),
                    "eps_plus_delta": float(eps + delta), "resets": float(resets),
                    "violations_after": float(late_bad)})
    return out


def _preds(by_index: dict[tuple[int, int], str], owner: dict[str, int], dep: list[int],
           msg: str) -> list[str]:
    """The latest causal predecessor of ``msg`` from each publisher (earlier ones
    follow by transitivity)."""
    out = []
    for j, k in enumerate(dep):
        pred = by_index.get((j, k - 1 if j == owner[msg] else k))
        if pred is not None:
            out.append(pred)
    return out


def run_checks(seed: int, *, n: int = 6, epsilon: int = 4, delta: int = 20,
               duration: int = 10_000, rate: float = 0.05,
               wire_ns: tuple[int, ...] = (4, 16, 64, 256, 1024)) -> dict[str, dict[str, float]]:
    out = {"causal": _run(seed, n, epsilon, delta, duration, rate, None),
           "stabilize": _run(seed, n, epsilon, delta, duration, rate, duration // 2)}
    wire: dict[str, float] = {"epsilon": float(epsilon)}
    for size in wire_ns:
        rng = random.Random(f"{seed}/merge-checks/wire/{size}")
        procs = [CausalProcess(epsilon, n=size) for _ in range(min(size, 32))]
        codec = WireCodec(epsilon, delta, size)
        longest = 0
        rt = 1
        stamps: list[Timestamp] = []
        for _ in range(2000):
            rt += rng.randint(0, 1)
            p = rng.randrange(len(procs))
            if stamps and rng.random() < 0.6:
                st = procs[p].receive(rng.choice(stamps[-50:]), now=rt + rng.randint(0, 1))
            else:
                st = procs[p].send(now=rt)
            stamps.append(st)
            longest = max(longest, len(codec.encode(st)))
        wire[f"encoded_bytes_n={size}"] = float(longest)
    out["wire"] = wire
    return out
