"""Live checks on the channel service (``timebound.net.live channel``): see ``_live``.

The job ``live-channel`` runs the slotted paper's schemes (section 6.1 (a)-(d)) on
live ``timebound.net`` channels, one ``Channel`` and one ``ChannelListener`` per run,
through a ``FaultProxy`` that loses, delays and reorders datagrams
(``timebound.net._live_channel``). Its runs ``X/Ts=<µs>`` (scheme X, slot length)
carry the measures the simulated ``slotted`` job has under the same names
(``fr_delay_ms``, ``queue_mean``, ``queue_slot_mean``, ``queue_order_mean``,
``discard_pct_unreliable``), so the live checks read them as the simulated rows do
and use the same bounds (the paper's figures are ``_slotted``'s constants). One
difference: the FR delay cut is judged on ``fr_delay_typical_ms`` (``FR_DELAY``), T_d
robust to one FR lost again and again, which holds the FRs after it: in a live run of
a second such an episode, rare, outweighs everything else in the mean of (b) and (c),
and flipped the row on 2 of 12 seeds.

Three slotted rows are checked on it: the FR delay cut of (b) and (c) (Fig. 5), the
queue of (c) against (a) and (d) up to 40 ms (Fig. 7), and the discards. The live
link's times are ``time_scale`` (a measure of every run) times a 1 ms jitter link's,
slots included, so that the machine's timer lateness is small against the shortest
slot; a slot length of the paper's row is read that many times longer (``_scale``).
The 70-80 ms FR delay of Fig. 5 comes from the paper's
network model (25 ms mean delay, 50 ms timeout) and has no counterpart on loopback:
that row has no live check. Each check also needs data that could contradict it:
the reliable FIFO schemes must have had something to resequence (a non-zero FR delay
or queue of (a)) and the unreliable schemes N/F arrivals. The causes are functions of
every seed's runs: each figure they quote is measured on them (``tests/
test_claims_causes_computed.py`` scans for typed figures).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ._base import Live, Missing, Runs, Sources, Values, _num, spread
from ._slotted import (
    PAPER_DISCARD_PCT,
    PAPER_QUEUE_C_RATIO,
    PAPER_QUEUE_C_SLOT_MAX,
    QUEUE_C_CLAIM,
    QUEUE_C_TOLERANCE,
    _fraction,
    _sl_fr_bc_ok,
    _sl_queue_c_ok,
)

JOB = "live-channel"

#: label of this service's live job (a ``Sources`` key) -> the ``timebound.net.live`` kind
JOBS: Mapping[str, str] = {JOB: "channel"}



def _slots(runs: Runs, scheme: str) -> dict[int, Mapping[str, float]]:
    out = {int(_num(k, "Ts")): v for k, v in runs.items() if k.startswith(scheme + "/")}
    if not out:
        raise Missing(f"{JOB} {scheme}/*")
    return dict(sorted(out.items()))


def _shortest_slot_ms(runs: Runs) -> float:
    """The shortest slot length of the runs (ms): the time the live rows check."""
    return min(_num(k, "Ts") for k in runs if "/Ts=" in k) / 1000


def _scale(run: Mapping[str, float]) -> float:
    """The run's time scale (``timebound.net._live_channel.TIME_SCALE``; 1 in runs
    written before it): a paper slot length L is read as L x scale."""
    return run.get("time_scale", 1.0)


def _ms(t: int) -> str:
    return f"{t / 1000:g} ms"


def _late(runs: Sequence[Mapping[str, float]]) -> str:
    """How late the sends of ``runs`` left (a held-up event loop sends in bursts)."""
    return (f"{spread([v['send_late_pct'] for v in runs], '.0f')}% of their sends late, "
            f"the latest by {spread([v['send_late_max_ms'] for v in runs], '.0f')} ms")


# -- Fig. 5: the FR delay of (b), (c) against (a), (d) ------------------------------

#: The FR delay the cut is judged on: T_d robust to one episode of a lost FR holding
#: the FRs after it (``timebound.net._live_channel``: the median over ``FR_GROUPS``
#: consecutive groups of a run's FRs of their mean T_d).
FR_DELAY = "fr_delay_typical_ms"


def _fr_cut(s: Sources) -> Values:
    runs = s[JOB]
    a, b, c, d = (_slots(runs, x) for x in "abcd")
    out: Values = []
    for t, va in a.items():
        if t not in b or t not in c or t not in d:
            continue
        ref = min(va[FR_DELAY], d[t][FR_DELAY])
        out.append((f"(a,d) T_d {_ms(t)}", ref, ".1f"))
        for x, vx in (("b", b[t]), ("c", c[t])):
            out.append((f"({x})/(a,d) {_ms(t)}", vx[FR_DELAY] / max(ref, 1e-9), ".2f"))
    if not out:
        raise Missing(f"{JOB} a, b, c, d at one slot length")
    return out


def _fr_cut_ok(v: dict[str, float]) -> bool:
    """The simulated row's bounds on the ratios, and (a), (d) had FRs to resequence."""
    ratios = {k: x for k, x in v.items() if "/" in k}
    refs = [x for k, x in v.items() if "/" not in k]
    return bool(ratios) and all(x > 0 for x in refs) and _sl_fr_bc_ok(ratios)


def fr_cut_cause(seeds: Sequence[Sources]) -> str:
    """Why (b) or (c) did not cut the FR delay: their FRs' delay (the judged one and
    the mean) and waits against those of (a), (d), from every seed's runs."""
    parts = []
    try:
        per = [(_slots(s[JOB], "a"), _slots(s[JOB], "b"), _slots(s[JOB], "c"),
                _slots(s[JOB], "d")) for s in seeds]
    except (Missing, KeyError) as exc:
        return f"no cut of the FR delay (the measures are not in this data: {exc})"
    slots = sorted(set().union(*(a for a, _, _, _ in per)))
    for x, i in (("b", 1), ("c", 2)):
        def of(t: int, key: str, j: int) -> list[float]:
            return [p[j][t][key] for p in per if t in p[j]]
        parts.append(", ".join(
            f"at {_ms(t)} ({x})'s FRs waited {spread(of(t, FR_DELAY, i), '.1f')} ms "
            f"(median of the groups' means; mean {spread(of(t, 'fr_delay_ms', i), '.1f')} "
            f"ms, {spread(of(t, 'fr_waited_pct', i), '.0f')}% of them waited; "
            f"{spread(of(t, 'retransmissions', i), '.0f')} retransmissions; "
            f"{_late([p[i][t] for p in per if t in p[i]])}), (a)'s "
            f"{spread(of(t, FR_DELAY, 0), '.1f')} ms, (d)'s "
            f"{spread(of(t, FR_DELAY, 3), '.1f')} ms" for t in slots))
    return ("an FR of (b) or (c) waits only for the FR before it, so its delay is the "
            "retransmissions of lost FRs, late when the machine holds the event loop "
            "up: " + "; ".join(parts))


# -- Fig. 7: the queue of (c) against (a) and (d) -------------------------------------

def _queue_c(s: Sources) -> Values:
    runs = s[JOB]
    a, c, d = _slots(runs, "a"), _slots(runs, "c"), _slots(runs, "d")
    out: Values = [(f"(c)/({x}) {_ms(t)}", vc["queue_mean"] / max(ref[t]["queue_mean"], 1e-9),
                    ".2f")
                   for t, vc in c.items() if t <= PAPER_QUEUE_C_SLOT_MAX * _scale(vc)
                   for x, ref in (("a", a), ("d", d)) if t in ref]
    if not out:
        raise Missing(f"{JOB} a, c, d at slots up to 40 ms (at the runs' time scale)")
    return out


def _queue_c_ok(v: dict[str, float]) -> bool:
    """The simulated row's check: (c)/(a) and (c)/(d) in the band at every slot."""
    return _sl_queue_c_ok(v)


def queue_c_cause(seeds: Sequence[Sources]) -> str:
    """Why (c)'s queue is not 1/3 to 1/2 of (a)'s and (d)'s, per slot length outside:
    the split of (c)'s buffer into D1 and D2 against (a)'s buffer and FR delay, and
    against (d)'s buffer and its split."""
    lo, hi = PAPER_QUEUE_C_RATIO
    try:
        per = [(_slots(s[JOB], "a"), _slots(s[JOB], "c"), _slots(s[JOB], "d"))
               for s in seeds]
    except (Missing, KeyError) as exc:
        return (f"the queue ratio lies outside {_fraction(lo)}-{_fraction(hi)} (the "
                f"measures that explain it are not in this data: {exc})")

    def ratio(ref: Mapping[str, float], c: Mapping[str, float]) -> float:
        return c["queue_mean"] / max(ref["queue_mean"], 1e-9)

    def outside(x: float) -> bool:
        return not lo - QUEUE_C_TOLERANCE <= x <= hi + QUEUE_C_TOLERANCE

    slots = sorted(set().union(*(c for _, c, _ in per)))
    parts = []
    for t in slots:
        runs = [(a[t], c[t], d[t]) for a, c, d in per if t in a and t in c and t in d]
        if not runs or t > PAPER_QUEUE_C_SLOT_MAX * _scale(runs[0][1]):
            continue
        pairs = [(a, c) for a, c, _ in runs]
        ratios = [ratio(a, c) for a, c in pairs]
        ratios_d = [ratio(d, c) for _, c, d in runs]
        if not any(outside(x) for x in ratios + ratios_d):
            continue

        def of(key: str, j: int, runs: Sequence[Sequence[Mapping[str, float]]] = runs) -> str:
            return spread([r[j][key] for r in runs], ".1f")

        head = (f"at {_ms(t)} the ratio is {spread(ratios, '.2f')} against (a) and "
                f"{spread(ratios_d, '.2f')} against (d): (c) buffers "
                f"{of('queue_mean', 1)} messages on average, {of('queue_order_mean', 1)} "
                f"of them F behind a lost F of their slot until the slot ends (D2) and "
                f"{of('queue_slot_mean', 1)} waiting for the FR that opens their slot "
                f"(D1), against (a)'s {of('queue_mean', 0)}, where every message waits "
                f"behind every lost one for its retransmission ((a)'s T_d "
                f"{of('fr_delay_ms', 0)} ms, timeout {of('rto_ms', 0)} ms; (c)'s runs: "
                f"{_late([c for _, c in pairs])}), and (d)'s {of('queue_mean', 2)}, "
                f"{of('queue_slot_mean', 2)} of them R waiting for the FR that opens "
                f"their slot (D1) and {of('queue_order_mean', 2)} FRs waiting for the R "
                f"of their slot (D2): an R never waits behind a lost R")
        if any(x < lo - QUEUE_C_TOLERANCE for x in ratios):
            head += (f"; an F behind a lost F waits at most until its slot of {_ms(t)} "
                     f"ends, less than the timeout a message of (a) waits behind a lost "
                     f"one, so (c)/(a) falls below {_fraction(lo)}")
        high = [(a, c) for a, c in pairs if ratio(a, c) > hi + QUEUE_C_TOLERANCE]
        if high and any(c["queue_order_mean"] >= c["queue_slot_mean"] for _, c in high):
            head += (f"; an F behind a lost F waits up to the whole slot of {_ms(t)}, "
                     f"as long as the timeout or longer, so (c)/(a) rises above "
                     f"{_fraction(hi)}")
        if high and any(c["queue_order_mean"] < c["queue_slot_mean"] for _, c in high):
            head += (f"; where (c)/(a) rises above {_fraction(hi)} with D1 the larger "
                     f"part, (c)'s FRs came late (their T_d "
                     f"{spread([c['fr_delay_ms'] for _, c in high], '.1f')} ms, "
                     f"{spread([c['retransmissions'] for _, c in high], '.0f')} "
                     f"retransmissions) and the F of the next slot waited for them")
        if any(x > hi + QUEUE_C_TOLERANCE for x in ratios_d):
            head += (f"; (c)'s F wait behind a lost F (D2) where (d)'s R never do, so "
                     f"(c)/(d) rises above {_fraction(hi)}")
        if any(x < lo - QUEUE_C_TOLERANCE for x in ratios_d):
            head += (f"; (d)'s FR waits for the retransmission of every lost R of its "
                     f"slot ((d)'s T_d {of('fr_delay_ms', 2)} ms) and the R of the next "
                     f"slot wait for it (D1), where (c)'s FR waits for no F, so (c)/(d) "
                     f"falls below {_fraction(lo)}")
        parts.append(head)
    if parts:
        parts.append("these are the ratios of the core's receiver, which departs from "
                     "Fig. 4 as core/slotted/_receiver.py documents")
    return "; ".join(parts) or (f"the queue ratio lies outside {_fraction(lo)}-"
                                f"{_fraction(hi)}")


# -- discards -------------------------------------------------------------------------

def _discards(s: Sources) -> Values:
    runs = s[JOB]
    out: Values = []
    for x in "bc":
        slots = _slots(runs, x)
        out.append((f"({x}) max", max(v["discard_pct_unreliable"] for v in slots.values()),
                    ".1f"))
        out.append((f"({x}) N/F arrivals",
                    sum(v["unreliable_arrived"] for v in slots.values()), ".0f"))
    return out


def _discards_ok(v: dict[str, float]) -> bool:
    return (all(x < PAPER_DISCARD_PCT for k, x in v.items() if k.endswith("max"))
            and all(x > 0 for k, x in v.items() if k.endswith("arrivals")))


def discard_cause(seeds: Sequence[Sources]) -> str:
    """Which scheme and slot length discard the paper's 10% or more, from every
    seed's runs."""
    try:
        per = [(_slots(s[JOB], "b"), _slots(s[JOB], "c")) for s in seeds]
    except (Missing, KeyError) as exc:
        return f"discards reach {PAPER_DISCARD_PCT:g}% (not in this data: {exc})"
    parts = []
    for x, j in (("b", 0), ("c", 1)):
        for t in sorted(set().union(*(p[j] for p in per))):
            pcts = [p[j][t]["discard_pct_unreliable"] for p in per if t in p[j]]
            if max(pcts) >= PAPER_DISCARD_PCT:
                parts.append(f"({x}) at {_ms(t)} slots discards {spread(pcts, '.1f')}% of "
                             f"its N/F arrivals ({_late([p[j][t] for p in per if t in p[j]])})")
    return ("; ".join(parts) + ": an N or F arriving after the FR closing its slot was "
            "delivered is discarded (R11, R15); the link's delay and reordering hold some "
            "of them past a slot that short, and sends held up by the machine leave in a "
            "burst with the FR among them, which the link's delay mixes") if parts else (
        f"discards reach {PAPER_DISCARD_PCT:g}% or no N/F arrived")


#: What runs (``timebound.net._live_channel``'s ``LOSS``, ``JITTER``, ``REORDER``,
#: ``REORDER_DELAY``, ``RATE``, ``FULL``, ``QUICK``, ``MIN_RTO``, ``TIME_SCALE``,
#: ``FR_GROUPS``; ``tests/test_live_channel.py`` checks that this text quotes them).
_SETUP = ("live: one timebound.net Channel and ChannelListener per scheme and slot length "
          "through a FaultProxy losing 5% of the datagrams both ways, delaying each by "
          "up to 10 ms and holding 5% of them 50 ms (0.5-1.5 times) longer; an FR every "
          "slot length, between them the scheme's kind at Poisson gaps of 0.1 message "
          "per ms, (a) FR, (b) N, (c) F, (d) R; slots 100 and 400 ms for 7 s each, and at "
          "least 25 slots (--quick: 400 ms for 4 s); the channel's own retransmission "
          "(timeout at least 200 ms); the four schemes of a slot length at once. Every "
          "time is 10 times that of a 1 ms jitter link with 10-40 ms slots (the time "
          "scale: long against this machine's timer lateness), so the row's slot "
          "lengths are read 10 times longer")

#: claim text of a row -> its live check on this service
LIVE: Mapping[str, Live] = {
    "schemes (b), (c) cut the FR delivery delay (Fig. 5)": Live(
        JOB, _fr_cut, _fr_cut_ok,
        _SETUP + "; FR delay T_d (transport arrival to delivery, the listener's Delivery "
        "records) of (b), (c) over min((a), (d)), each the median over 5 consecutive "
        "groups of the run's FRs of their mean T_d (one FR lost again and again holds "
        "the FRs behind it: one such episode moves one or two groups, not the median). "
        "Differs if a ratio is 1 or more at a slot length, or above 0.5 from 10 ms on "
        "(every live slot), on any seed; not shown (differs too) if (a) or (d) had no FR "
        "delay to cut",
        why=fr_cut_cause, checks_ms=_shortest_slot_ms, checks="shortest slot"),
    QUEUE_C_CLAIM: Live(
        JOB, _queue_c, _queue_c_ok,
        _SETUP + "; the resequencing buffer's time average from the Delivery records "
        "(Little's law, exact here: every buffered message is delivered), split into D1 "
        "and D2 as the simulated job splits it. It differs if (c)/(a) or (c)/(d) lies "
        "outside 1/3-1/2 (0.02 either side) at 100 or 400 ms (up to 40 ms at the time "
        "scale) on any seed",
        why=queue_c_cause, checks_ms=_shortest_slot_ms, checks="shortest slot"),
    "discards always below 10% (share of unreliable N/F arrivals)": Live(
        JOB, _discards, _discards_ok,
        _SETUP + "; discards (the listener's statistics) in percent of the N/F "
        "arrivals, max over the slot lengths. Differs if (b) or (c) discards 10% or "
        "more at a slot length on any seed; not shown (differs too) without N/F "
        "arrivals",
        why=discard_cause, checks_ms=_shortest_slot_ms, checks="shortest slot"),
}

#: claim text of a row this service could check live but does not -> why
NO_LIVE: Mapping[str, str] = {
    "slots > 20 ms: queue of (b) ten times less than (a) (Fig. 7)":
        "a live run of seconds holds a few dozen 40 ms slots: one lost FR moves (b)/(a) "
        "from 0 to above 1/8, so the verdict would follow the losses of one run",
    "FR delivery delay of (a), (d): 70-80 ms, flat in slot length (Fig. 5)":
        "the 70-80 ms come from the paper's network model (its delay distribution and "
        "retransmission timeout); loopback has neither",
}
