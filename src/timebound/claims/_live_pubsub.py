"""Live checks on the pubsub service (``timebound.net.live pubsub``): see ``_live``.

The job ``live-pubsub`` runs live ``timebound.net`` publishers -> two replicated
mergers (each behind its own fault proxy that delays and reorders, within delta) ->
one subscriber on each, over loopback UDP; one run, ``publishers=<P>``. Two merge rows
are checked on it: the subscribers' sequences agree on every message both delivered
(Thm 4.4), counted only when the mergers got their common messages in different orders
(so order was at stake), and the longest buffering at a merger, arrival -> delivery on
the merger's own clock, stays within delta + 3 eps (Lemma 4.2), with the clocks within
epsilon of each other (G1). Each row also shows what explains it: the merger's own wait
(deadline - arrival) apart from how late its timer delivered, and the longest
publish -> arrival delay against delta (G2).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ._base import Live, Missing, Runs, Sources, Values, _get, spread

JOB = "live-pubsub"

#: ms a merger's delivery may trail a timer of the same loop by: its clock reads whole
#: ms (floor) and the loop's waits are rounded up to whole ms
CLOCK_TICKS = 2

#: label of this service's live job (a ``Sources`` key) -> the ``timebound.net.live`` kind
JOBS: Mapping[str, str] = {JOB: "pubsub"}

ORDER = "replicated mergers deliver in the same order (Thm 4.4)"
BUFFER = "buffering <= delta + 3 eps (Lemma 4.2)"

_WHERE = ("live: four timebound.net publishers of ds(eps, delta) = ds(5, 200) ms send every "
          "message to two replicated mergers, each behind its own FaultProxy on "
          "127.0.0.1 (every datagram delayed by up to 10 ms, a quarter of them by "
          "6-18 ms more: at most 28 ms, within delta), one subscriber on each merger; "
          "every clock is the system clock plus an offset drawn per seed, any two within "
          "epsilon (G1); 150 publications per second per publisher for 2 s (0.6 s with "
          "--quick); ")


def _run(s: Sources) -> Runs:
    runs = s[JOB]
    names = [k for k in runs if k.startswith("publishers=")]
    if len(names) != 1:
        raise Missing(f"{JOB} publishers=*")
    return {"run": runs[names[0]]}


def _ms_of(measure: str) -> Callable[[Runs], float]:
    """The run's ``measure`` (ms): the time a live row checks."""
    return lambda runs: _get(_run({JOB: runs}), "run", measure)


def _order(s: Sources) -> Values:
    """Order mismatches between the two subscribers (positions of their common
    messages that differ), the messages both delivered, and whether order was at
    stake: the two mergers' arrival orders compared the same way, the arrivals out of
    deadline order at the mergers, the proxies' reordered datagrams; late drops."""
    runs = _run(s)

    def g(measure: str) -> float:
        return _get(runs, "run", measure)

    return [("mismatches", g("order_mismatches"), ".0f"),
            ("common delivered", g("common_delivered"), ".0f"),
            ("subscriber 1 delivered", g("delivered_1"), ".0f"),
            ("subscriber 2 delivered", g("delivered_2"), ".0f"),
            ("arrival order differs", g("arrival_order_differs"), ".0f"),
            ("out-of-order arrivals", g("out_of_order_arrivals"), ".0f"),
            ("proxy reordered", g("proxy_reordered"), ".0f"),
            ("late drops", g("late"), ".0f")]


def _order_ok(v: dict[str, float]) -> bool:
    """Thm 4.4 on messages both delivered, with order at stake (the mergers got their
    common messages in different orders, some out of deadline order)."""
    return (v["mismatches"] == 0 and v["common delivered"] > 0
            and v["arrival order differs"] > 0 and v["out-of-order arrivals"] > 0)


def _buffer(s: Sources) -> Values:
    """The longest buffering at a merger (arrival -> delivery, ms of its clock) and
    the bound; the merger's own wait (deadline - arrival) and its timer's lateness
    (delivery - deadline: largest, median) beside a bare timer's in the same loop
    (largest); deliveries over the bound, of those delivered; G1 (clock spread vs epsilon) and G2
    (longest publish -> arrival delay vs delta, the proxies' own most)."""
    runs = _run(s)

    def g(measure: str) -> float:
        return _get(runs, "run", measure)

    return [("max buffering", g("max_buffering"), ".0f"),
            ("bound", g("buffering_bound"), ".0f"),
            ("max deadline - arrival", g("max_to_deadline"), ".0f"),
            ("max lateness", g("max_lateness"), ".0f"),
            ("median lateness", g("median_lateness"), ".0f"),
            ("bare timer lateness", g("loop_lateness_max"), ".1f"),
            ("bare timer period", g("probe_every"), ".0f"),
            ("over bound", g("over_bound"), ".0f"),
            ("delivered", g("merger_delivered"), ".0f"),
            ("clock spread", g("clock_spread"), ".0f"),
            ("epsilon", g("epsilon"), ".0f"),
            ("longest delay", g("longest_delay"), ".1f"),
            ("proxy delay max", g("proxy_max_delay"), ".0f"),
            ("delta", g("delta"), ".0f")]


def _buffer_ok(v: dict[str, float]) -> bool:
    """Lemma 4.2 inside G1, on delivered messages: every buffering within the bound,
    or past it only by the machine's own lateness. Lemma 4.2 bounds the program's
    wait; a live merger's delivery adds how late its event loop runs the timer, which
    a bare timer in the same loop measures. So a buffering over the bound agrees only
    when the merger's own wait (deadline - arrival) stayed within it, its deliveries
    were on time as a rule (median lateness at most ``CLOCK_TICKS``) and none came
    later than the bare timer ever woke (plus its period and ``CLOCK_TICKS``); a
    merger whose deadline is too far, or whose timer runs late on its own, differs."""
    if v["delivered"] <= 0 or v["clock spread"] > v["epsilon"]:
        return False
    if v["max buffering"] <= v["bound"]:
        return True
    return (v["max deadline - arrival"] <= v["bound"]
            and v["median lateness"] <= CLOCK_TICKS
            and v["max lateness"] <= (v["bare timer lateness"] + v["bare timer period"]
                                      + CLOCK_TICKS))


def _each(seeds: Sequence[Sources], measure: str) -> list[float]:
    return [_get(_run(s), "run", measure) for s in seeds]


def _order_why(seeds: Sequence[Sources]) -> str:
    """What broke the order row, from the same runs."""
    parts = []
    mismatches = _each(seeds, "order_mismatches")
    if max(mismatches) > 0:
        common = _each(seeds, "common_delivered")
        parts.append(f"the two subscribers' sequences differ at up to {max(mismatches):.0f} "
                     f"positions of the {spread(common, '.0f')} messages both delivered")
    stake = [min(a, b) for a, b in zip(_each(seeds, "arrival_order_differs"),
                                       _each(seeds, "out_of_order_arrivals"))]
    if min(stake) == 0:
        parts.append(f"order was not at stake on {sum(x == 0 for x in stake)} of "
                     f"{len(stake)} seeds (the mergers got their common messages in one "
                     "order, or none out of deadline order)")
    if min(_each(seeds, "common_delivered")) == 0:
        parts.append("a run delivered no message at both subscribers")
    return "; ".join(parts)


def _buffer_why(seeds: Sequence[Sources]) -> str:
    """What broke the buffering row, from the same runs."""
    parts = []
    apart = max(_each(seeds, "clock_spread"))
    eps = max(_each(seeds, "epsilon"))
    if apart > eps:
        parts.append(f"the clocks were {apart:.0f} ms apart, more than epsilon "
                     f"({eps:.0f} ms): outside G1")
    bound = min(_each(seeds, "buffering_bound"))
    waited = max(_each(seeds, "max_to_deadline"))
    late = max(_each(seeds, "max_lateness"))
    longest = max(_each(seeds, "longest_delay"))
    proxy = max(_each(seeds, "proxy_max_delay"))
    if waited > bound:
        parts.append(f"the merger's own wait (deadline - arrival) reached {waited:.0f} ms, "
                     f"over the bound of {bound:.0f} ms")
    elif max(_each(seeds, "max_buffering")) > bound:
        over = spread(_each(seeds, "over_bound"), ".0f")
        delivered = spread(_each(seeds, "merger_delivered"), ".0f")
        median = max(_each(seeds, "median_lateness"))
        bare = max(_each(seeds, "loop_lateness_max"))
        trail = max(a - b - c for a, b, c in zip(_each(seeds, "max_lateness"),
                                                 _each(seeds, "loop_lateness_max"),
                                                 _each(seeds, "probe_every")))
        head = (f"the merger's own wait (deadline - arrival) stayed within the bound "
                f"(at most {waited:.0f} of {bound:.0f} ms), but it delivered up to "
                f"{late:.0f} ms after the deadline r + c + delta + eps (median "
                f"{median:.0f} ms), for {over} of {delivered} deliveries: ")
        if median > CLOCK_TICKS:
            parts.append(head + "late as a rule, not in bursts: the merger waits past "
                         "that deadline (a merger rule, not the machine)")
        elif trail > CLOCK_TICKS:
            parts.append(head + f"later than a bare timer in the same loop ever was "
                         f"({bare:.1f} ms): not the loop's doing")
        else:
            parts.append(head + f"its event loop ran the timer late on this machine (a "
                         f"bare timer in the same loop woke up to {bare:.1f} ms late, and "
                         f"the same stalls stretched publish -> arrival to {longest:.1f} "
                         f"ms, where the proxies add at most {proxy:.0f} ms)")
    if min(_each(seeds, "merger_delivered")) == 0:
        parts.append("a run delivered no message")
    return "; ".join(parts)


#: claim text of a row -> its live check on this service
LIVE: Mapping[str, Live] = {
    ORDER: Live(
        JOB, _order, _order_ok,
        _WHERE + "order mismatches: positions at which the two subscribers' sequences, "
        "restricted to the messages both delivered, differ; checked: 0 mismatches, "
        "with order at stake (the two mergers' arrival orders of their common messages "
        "differ, and some arrivals came out of deadline order). It differs if two "
        "subscribers see common messages in different orders, or if the run never put "
        "the order at stake",
        _order_why, checks_ms=_ms_of("delta"), checks="delta"),
    BUFFER: Live(
        JOB, _buffer, _buffer_ok,
        _WHERE + "buffering: from a message's first arrival at a merger's handler to "
        "its delivery, ms of that merger's clock, the largest over both mergers; "
        "checked: within delta + 3 eps on every seed, or past it only by the event "
        "loop's own lateness (the merger's wait, deadline - arrival, within the bound, "
        "its deliveries on time as a rule and none later than a bare timer in the same "
        "loop ever woke), with the clocks within epsilon. It differs if a merger's "
        "deadline is too far from the arrival, if its timer delivers late as a rule or "
        "later than the loop's own stalls, or if the clocks leave G1",
        _buffer_why, checks_ms=_ms_of("buffering_bound"),
        checks="bound delta + 3 eps"),
}

#: claim text of a row this service could check live but does not -> why
NO_LIVE: Mapping[str, str] = {}
