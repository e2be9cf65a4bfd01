"""Deterministic merge: Kulkarni and Ravikant, "Stabilizing Causal Deterministic
Merge": the rows on Thm 4.4 (replicated mergers deliver in one order), Thm 4.5
(causal delivery), the specification's liveness (section 4.1) with Thm 4.3 (delivered
within delta + 3 eps of the send), Lemma 4.2 (buffering <= delta + 3 eps), sections 4.1 and 6 (late
losses against delta), Thm 3.8 (bounded timestamp bytes against a vector clock) and
Thms 3.7, 4.6 (recovery from corrupted state within O(eps + delta)).

Sources: the ``merge`` job (runs ``delta=*``) and ``merge-checks`` (runs ``wire``,
``causal``, ``stabilize``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

from ._base import Claim, Missing, Runs, Sources, Values, _decreasing, _get, _num, spread


def _deltas(runs: Runs) -> list[tuple[int, Mapping[str, float]]]:
    out = sorted((int(_num(k, "delta")), v) for k, v in runs.items()
                 if re.fullmatch(r"delta=\d+", k))
    if not out:
        raise Missing("merge delta=*")
    return out


def _g1(runs: list[tuple[int, Mapping[str, float]]]) -> Values:
    """G1 as it held over the merge runs: the largest clock spread of the publishers'
    events beside epsilon (each run's own: its buffering bound is delta + 3 eps)."""
    try:
        spread = max(v["clock_spread"] for _, v in runs)
    except KeyError:
        raise Missing("merge delta=*:clock_spread") from None
    eps = min((v["buffering_bound"] - d) / 3 for d, v in runs)
    return [("clock spread", spread, ".0f"), ("epsilon", eps, ".0f")]


def _g1_held(v: dict[str, float]) -> bool:
    """The clocks' spread within epsilon on every run (G1, a hypothesis)."""
    return v["clock spread"] <= v["epsilon"]


def _mg_order(s: Sources) -> Values:
    runs = _deltas(s["merge"])
    return [("mismatches", sum(v["order_mismatches"] for _, v in runs), ".0f"), *_g1(runs)]


def _mg_order_ok(v: dict[str, float]) -> bool:
    """Thm 4.4 inside its hypotheses: no mismatch, and G1 held on every run."""
    return v["mismatches"] == 0 and _g1_held(v)


def _mg_buffer(s: Sources) -> Values:
    runs = _deltas(s["merge"])
    out: Values = []
    for d, v in runs:
        out.append((f"delta={d} max", v["max_buffering"], ".0f"))
        out.append((f"delta={d} bound", v["buffering_bound"], ".0f"))
    return out + _g1(runs)


def _mg_buffer_ok(v: dict[str, float]) -> bool:
    """Lemma 4.2 inside its hypotheses: every run's longest buffering within delta +
    3 eps, and G1 held on every run."""
    ds = {k.split()[0] for k in v if k.startswith("delta=")}
    return all(v[f"{d} max"] <= v[f"{d} bound"] for d in ds) and _g1_held(v)


def _mg_late(s: Sources) -> Values:
    return [(f"delta={d}", v["late_pct"], ".2f") for d, v in _deltas(s["merge"])]


def _late_ok(v: dict[str, float]) -> bool:
    xs = list(v.values())
    return _decreasing(v) and len(xs) > 1 and xs[-1] <= xs[0] / 2


def _late_why(seeds: Sequence[Sources]) -> str:
    per_seed = [_mg_late(s) for s in seeds]
    labels = [k for k, _, _ in per_seed[0]]
    return "late % per delta: " + ", ".join(
        f"{k}: {spread([x for vals in per_seed for j, x, _ in vals if j == k], '.2f')}"
        for k in labels) + " (checked: non-increasing, the largest delta at most half the "\
        "smallest's)"


def _mg_bytes(s: Sources) -> Values:
    runs = s["merge-checks"]
    sizes = sorted(int(k.split("=")[1]) for k in runs.get("wire", {})
                   if k.startswith("encoded_bytes_n="))
    if not sizes:
        raise Missing("merge-checks wire")
    out: Values = []
    for n in sizes:
        out.append((f"n={n} encoded", _get(runs, "wire", f"encoded_bytes_n={n}"), ".0f"))
        out.append((f"n={n} vector", 8.0 * n, ".0f"))
    out.append(("epsilon", _get(runs, "wire", "epsilon"), ".0f"))
    return out


def _mg_bytes_ok(v: dict[str, float]) -> bool:
    """Encoded size within Theorem 3.8's bits (c, brt and 2 eps entries of log2(n+1)
    bits) and growing by at most 2 eps bits per doubling of n, while 8n doubles."""
    eps = v["epsilon"]
    ns = sorted(int(k.split()[0][2:]) for k in v if k.endswith("encoded"))
    enc = [v[f"n={n} encoded"] for n in ns]
    growth = enc[-1] - enc[0]
    allowed = 2 * eps * math.log2((ns[-1] + 1) / (ns[0] + 1)) / 8 + 1
    return growth <= allowed and enc[-1] < v[f"n={ns[-1]} vector"]


def _mg_causal(s: Sources) -> Values:
    """Violations, the causal pairs checked among those published, and the run's
    hypotheses as measured: G1 (the spread of every clock reading against epsilon) and
    G2 (the longest send-to-receive delay against delta)."""
    runs = s["merge-checks"]
    return [("violations", _get(runs, "causal", "causal_order_violations"), ".0f"),
            ("causal pairs checked", _get(runs, "causal", "causal_pairs_checked"), ".0f"),
            ("(causal pairs published)", _get(runs, "causal", "causal_pairs_published"),
             ".0f"),
            ("clock spread", _get(runs, "causal", "clock_spread"), ".0f"),
            ("epsilon", _get(runs, "causal", "epsilon"), ".0f"),
            ("longest delay", _get(runs, "causal", "longest_delay"), ".0f"),
            ("delta", _get(runs, "causal", "delta"), ".0f")]


def _mg_causal_ok(v: dict[str, float]) -> bool:
    """Thm 4.5 inside its hypotheses: no violation, every causal pair of published
    messages checked (both delivered), G1 and G2 held."""
    return (v["violations"] == 0 and v["causal pairs checked"] > 0
            and v["causal pairs checked"] == v["(causal pairs published)"]
            and v["clock spread"] <= v["epsilon"] and v["longest delay"] <= v["delta"])


def _range(seeds: Sequence[Sources], source: str, run: str, measure: str,
           fmt: str = ".0f") -> str:
    """A measure of one run over the seeds, as the measured column shows it."""
    return spread([_get(s[source], run, measure) for s in seeds], fmt)


def _causal_why(seeds: Sequence[Sources]) -> str:
    def of(measure: str) -> str:
        return _range(seeds, "merge-checks", "causal", measure)
    return (f"{of('causal_order_violations')} causal-order violations; "
            f"{of('causal_pairs_checked')} of {of('causal_pairs_published')} causal pairs "
            f"checked ({of('undelivered')} messages never delivered); clock spread "
            f"{of('clock_spread')} against epsilon {of('epsilon')}, longest delay "
            f"{of('longest_delay')} against delta {of('delta')}")


def _mg_live(s: Sources) -> Values:
    """Section 4.1's liveness and Theorem 4.3, from observed delivery times."""
    runs = s["merge-checks"]
    eps, delta = _get(runs, "causal", "epsilon"), _get(runs, "causal", "delta")
    return [("arrived within delta", _get(runs, "causal", "arrived_within_delta"), ".0f"),
            ("not delivered", _get(runs, "causal", "undelivered"), ".0f"),
            ("send to delivery max", _get(runs, "causal", "send_to_delivery_max"), ".0f"),
            ("delta + 3 eps", delta + 3 * eps, ".0f"),
            ("later than delta + 3 eps",
             _get(runs, "causal", "send_to_delivery_over_bound"), ".0f"),
            ("clock spread", _get(runs, "causal", "clock_spread"), ".0f"),
            ("epsilon", eps, ".0f")]


def _mg_live_ok(v: dict[str, float]) -> bool:
    """Every message that reached the merger within delta delivered, none later than
    delta + 3 eps after its send, with some messages and G1 held."""
    return (v["arrived within delta"] > 0 and v["not delivered"] == 0
            and v["later than delta + 3 eps"] == 0
            and v["send to delivery max"] <= v["delta + 3 eps"]
            and v["clock spread"] <= v["epsilon"])


def _live_why(seeds: Sequence[Sources]) -> str:
    def of(measure: str) -> str:
        return _range(seeds, "merge-checks", "causal", measure)
    return (f"of {of('arrived_within_delta')} messages that reached the merger within "
            f"delta, {of('undelivered')} were never delivered (dropped as late or never "
            f"due) and {of('send_to_delivery_over_bound')} were delivered later than "
            f"the bound of Theorem 4.3 after their send (the longest: {of('send_to_delivery_max')} "
            f"ticks); clock spread {of('clock_spread')} against epsilon {of('epsilon')}")


def _mg_stabilize(s: Sources) -> Values:
    runs = s["merge-checks"]
    return [("recovery (ticks)", _get(runs, "stabilize", "recovery_ticks"), ".0f"),
            ("eps + delta", _get(runs, "stabilize", "eps_plus_delta"), ".0f"),
            ("bound 9 eps + 2 delta", _get(runs, "stabilize", "recovery_bound"), ".0f"),
            ("resets", _get(runs, "stabilize", "resets"), ".0f"),
            ("violations after recovery", _get(runs, "stabilize", "violations_after"), ".0f")]


def _mg_stabilize_ok(v: dict[str, float]) -> bool:
    return (v["recovery (ticks)"] <= v["bound 9 eps + 2 delta"]
            and v["violations after recovery"] == 0)



CLAIMS: tuple[Claim, ...] = (
    Claim("merge", "replicated mergers deliver in the same order (Thm 4.4)", "0 mismatches",
          "merge, all runs: positions where replicated mergers delivered different "
          "messages, and G1 measured per run (the publishers' clock spread against "
          "epsilon: the largest over the runs); checked: 0 mismatches and spread <= epsilon. It differs "
          "if two replicated mergers deliver their common messages in different orders, "
          "or a run's clocks spread beyond epsilon (outside the theorem's hypotheses)",
          ("merge",), _mg_order, _mg_order_ok,
          "replicated mergers delivered in different orders, or a run left G1"),
    Claim("merge", "causal delivery: send(m1) -> send(m2) delivers m1 first (Thm 4.5)",
          "0", "merge-checks, run causal (G1 and G2 measured: clock spread <= epsilon, "
          "longest delay <= delta): each delivered message against the latest causal "
          "predecessor of each publisher; checked: no violation, and every such pair of "
          "published messages checked (both delivered). It differs if a message is "
          "delivered before one that causally precedes it, a pair goes unchecked because "
          "a message of it was not delivered, or the run leaves G1 or G2",
          ("merge-checks",), _mg_causal, _mg_causal_ok, _causal_why),
    Claim("merge", "every message that reaches a merger within delta is delivered, "
          "within delta + 3 eps of its send (4.1 liveness, Thm 4.3)", "0 missing, <= bound",
          "merge-checks, run causal (every message reaches the merger 1..delta ticks after "
          "its send): observed delivery times, the tick at which the core merger handed "
          "each message out (not its deadline); messages that reached it within delta "
          "and were never delivered, the longest send-to-delivery time and the deliveries "
          "later than delta + 3 eps; G1 measured. It differs if such a message is not "
          "delivered (a deadline too early drops it as late) or is delivered later than "
          "delta + 3 eps after its send, or the run leaves G1",
          ("merge-checks",), _mg_live, _mg_live_ok, _live_why),
    Claim("merge", "buffering <= delta + 3 eps (Lemma 4.2)", "<= bound",
          "merge, all runs: longest buffering at any level-1 merger (observed: from a "
          "message's arrival to the merger clock's reading when it is handed out) against "
          "delta + 3 eps, "
          "and G1 measured (the publishers' clock spread against epsilon: the largest over "
          "the runs); checked: max <= bound on every run and spread <= epsilon. It differs if a "
          "merger holds a message longer than delta + 3 eps, or a run's clocks spread "
          "beyond epsilon (outside the lemma's hypotheses)",
          ("merge",), _mg_buffer, _mg_buffer_ok,
          "a merger buffered a message longer than the bound, or a run left G1"),
    Claim("merge", "larger delta, fewer late losses (4.1, 6)", "decreasing",
          "merge, runs delta=* (late %); checked: non-increasing as delta grows, and the "
          "largest delta losing at most half the smallest delta's share. It differs if a "
          "larger delta loses a larger share of arrivals as late, or the share does not "
          "fall with delta (a deadline that ignores delta)", ("merge",),
          _mg_late, _late_ok, _late_why, trend=True),
    Claim("merge", "bounded timestamp vs vector clock bytes as n grows (Thm 3.8)",
          "O(eps log n + log delta)", "merge-checks, run wire: bytes of the core's "
          "WireCodec encoding at one epsilon and one delta (measured; so the log delta "
          "term is a constant here) vs 8 B x n (a vector clock, computed: the paper "
          "contrasts O(n^2) for causal unicast delivery, a vector clock's O(n) is the "
          "harder comparison); checked: the "
          "encoding grows by at most 2 eps log2((n + 1) / (n0 + 1)) bits (plus a byte) "
          "from the smallest n0 to the largest n and stays below the vector clock there. "
          "It differs if the "
          "encoding grows faster than eps log n or is not smaller than a vector clock",
          ("merge-checks",),
          _mg_bytes, _mg_bytes_ok, "encoded size grows faster than eps log n"),
    Claim("merge", "state corrupted mid-run recovers within O(eps + delta) "
          "(Thms 3.7, 4.6)", "O(eps + delta)", "merge-checks, run stabilize: one "
          "publisher's state and in-flight timestamps corrupted; ticks until the last "
          "reset or causal-order violation; checked: recovery within 9 eps + 2 delta and no "
          "causal-order violation after it. It differs if resets or violations go on "
          "past that bound", ("merge-checks",), _mg_stabilize,
          _mg_stabilize_ok, "recovery slower than the bound"),
)
