"""Adaptive timeouts: Chaudhuri, Coan and Welch, "Using Adaptive Timeouts to Achieve
At-Most-Once Message Delivery": the rows on Theorem 2 (no duplicate and no
out-of-order message accepted), Theorems 4 and 8 (after a step in the lifetimes the
estimate settles below 2X), Theorem 6 (unlimited horizon: L/A -> 0, checked as the
proof's case where the estimate stops changing), Theorem 10 (limited horizon: L/A
<= 1/p inside the hypotheses, tolerating spikes: with Theorem 8, the estimate stays
below 2X whatever the spikes), Theorem 11 (no bound on the convergence time from the
state alone), and the fixed-rho contrast. Each row's ``where`` says what result would
make it differ.

Sources: the ``adaptive``, ``adaptive-step``, ``adaptive-horizon`` and
``adaptive-reorder`` jobs.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._base import Claim, Missing, Runs, Sources, Values, _get, spread

#: the runs of the (t, X)-bounded step load (lifetimes fall at a known time)
STEP_RUNS = ("step/unlimited", "step/limited")


def _ad_estimate(s: Sources) -> Values:
    """Theorems 4 and 8 on the step load: the estimate in force at the step over 2 X2
    (X2 the largest lifetime of a message sent after it), the settling time (from the
    step to the last change after which the estimate stays below 2 X2), the traffic
    after the step, and the final estimate over 2 X2."""
    runs = s["adaptive-step"]
    out: Values = [("estimate at the step / 2 X2",
                    _get(runs, STEP_RUNS[0], "step_estimate_over_2x2"), ".2f")]
    for run in STEP_RUNS:
        est = run.split("/")[1]
        out += [(f"{est} settling s", _get(runs, run, "step_settle_s"), ".2f"),
                (f"{est} final / 2 X2", _get(runs, run, "step_final_over_2x2"), ".2f"),
                (f"({est} settled)", _get(runs, run, "step_settled"), ".0f"),
                (f"({est} traffic after the step s)", _get(runs, run, "step_after_s"), ".0f")]
    return out


def _ad_estimate_ok(v: dict[str, float]) -> bool:
    """The step tests something (the estimate at the step is 2 X2 or more), and each
    estimator settles below 2 X2 within the first half of the traffic after the step,
    so the run shows it staying there at least as long; the final estimate is below."""
    if v["estimate at the step / 2 X2"] < 1:
        return False
    for est in ("unlimited", "limited"):
        if not (v[f"({est} settled)"] == 1 and v[f"{est} final / 2 X2"] < 1
                and v[f"{est} settling s"] < v[f"({est} traffic after the step s)"] / 2):
            return False
    return True


#: Theorem 6's runs: (source, run), every unlimited-horizon load
UNLIMITED_RUNS = (("adaptive", "bounded/unlimited"), ("adaptive", "spikes/unlimited"),
                  ("adaptive", "daynight/unlimited"), ("adaptive-step", "step/unlimited"),
                  ("adaptive-step", "step-up/unlimited"))


def _ad_unlimited(s: Sources) -> Values:
    """Per unlimited-horizon run: the messages lost, those lost outside Lemma 3's
    windows, and the final L/A."""
    out: Values = []
    for source, run in UNLIMITED_RUNS:
        runs = s[source]
        load = run.split("/")[0]
        out += [(f"{load} lost", _get(runs, run, "lost"), ".0f"),
                (f"{load} outside Lemma 3", _get(runs, run, "lost_outside_lemma3"), ".0f"),
                (f"({load} L/A)", _get(runs, run, "lost_per_accepted"), ".4f")]
    return out


def _ad_unlimited_ok(v: dict[str, float]) -> bool:
    """Lemma 3, on which Theorem 6's proof rests (with Lemma 5 it bounds the losses
    between two decreases, and the growing p makes them vanish against A): a message
    is lost only within the new estimate after an increase of the estimate, or in the
    GC period before one. Checked on every run, with some loss to check."""
    lost = sum(x for k, x in v.items() if k.endswith(" lost"))
    return lost > 0 and all(x == 0 for k, x in v.items() if k.endswith("outside Lemma 3"))


def _trend(runs: Runs, run: str) -> Values:
    out: Values = []
    for pct in (10, 25, 50, 100):
        out.append((f"{pct}%", _get(runs, run, f"lost_per_accepted_at_{pct}pct"), ".4f"))
    return out


def _ad_limited(s: Sources) -> Values:
    """Theorem 10 inside its hypotheses: 1/p, p's bound (S - H)/H, the groups of S
    arrivals with more than H spikes (the execution is (t, X, S, H)-bounded only if
    none), the L/A trend; beside, the default loads' L/A over their own 1/p."""
    runs = s["adaptive-horizon"]
    run = "spikes/limited"
    p = _get(runs, run, "p")
    window, spikes = _get(runs, run, "window"), _get(runs, run, "horizon_spikes")
    out: Values = [("1/p", 1 / p, ".2f"), ("(S-H)/H", (window - spikes) / spikes, ".2f"),
                   ("spike share", _get(runs, run, "spike_share"), ".2f"),
                   ("groups over H", _get(runs, run, "groups_over_h"), ".0f")]
    out += [(f"L/A at {k}", x, f) for k, x, f in _trend(runs, run)]
    for load in ("bounded", "spikes", "daynight"):
        default = s["adaptive"]
        out.append((f"default {load} L/A * p",
                    _get(default, f"{load}/limited", "lost_per_accepted")
                    * _get(default, f"{load}/limited", "p"), ".3f"))
    return out + _ad_spikes(s)


def _ad_limited_ok(v: dict[str, float]) -> bool:
    """Inside the hypotheses (p <= (S-H)/H, no group of S arrivals with more than H
    spikes), the proven bound L/A <= 1/p at the end of the run, and on the default
    loads L/A * p <= 1."""
    inside = 1 / v["1/p"] <= v["(S-H)/H"] and v["groups over H"] == 0
    return inside and v["L/A at 100%"] <= v["1/p"] and all(
        x <= 1 for k, x in v.items() if k.startswith("default") and k.endswith("* p")
    ) and _ad_spikes_ok(v)


#: Theorem 11 on the limited horizon: the same step at full rate and slowed down
SLOW_RUNS = ("step/limited", "step-slow/limited")


def _ad_lower(s: Sources) -> Values:
    """The same execution up to the step (same state at the step), then every client
    sending ``slowdown`` times slower: the settling times and the messages sent before
    each settled."""
    runs = s["adaptive-step"]
    fast, slow = SLOW_RUNS
    return [("slowdown", _get(runs, slow, "slowdown"), ".0f"),
            ("settling s", _get(runs, fast, "step_settle_s"), ".2f"),
            ("slowed settling s", _get(runs, slow, "step_settle_s"), ".2f"),
            ("messages to settle", _get(runs, fast, "step_messages_to_settle"), ".0f"),
            ("slowed messages to settle", _get(runs, slow, "step_messages_to_settle"), ".0f"),
            ("(slowed settled)", _get(runs, slow, "step_settled"), ".0f")]


def _ad_lower_ok(v: dict[str, float]) -> bool:
    """Settling takes messages, not time: slowed, it settles at least slowdown/4 times
    later (so no bound in time from the state at the step holds for every rate; the
    factor 4 leaves room for the settling to take one GC period of S messages more or
    less in one of the two runs)."""
    return (v["(slowed settled)"] == 1 and v["settling s"] > 0
            and v["slowed settling s"] >= v["slowdown"] / 4 * v["settling s"])


def _ad_fixed(s: Sources) -> Values:
    runs = s["adaptive"]
    return [("small L/A", _get(runs, "bounded/small", "lost_per_accepted"), ".3f"),
            ("large table", _get(runs, "bounded/large", "table_mean"), ".0f"),
            ("unlimited table", _get(runs, "bounded/unlimited", "table_mean"), ".0f")]


def _ad_order(s: Sources) -> Values:
    out: Values = []
    acc = offered = 0.0
    for source in ("adaptive", "adaptive-reorder"):
        runs = s.get(source, {})
        for run in runs:
            acc += _get(runs, run, "out_of_order_accepted")
            offered += _get(runs, run, "out_of_order_arrivals")
    if not offered and not acc and not s.get("adaptive"):
        raise Missing("adaptive")
    if not offered and not acc:  # nothing here could contradict the claim
        raise Missing("an out-of-order arrival offered; these runs offer none")
    out.append(("accepted out of order", acc, ".0f"))
    out.append(("out-of-order arrivals offered", offered, ".0f"))
    if "adaptive-reorder" in s:  # the job that duplicates (a report's data may lack it)
        reorder = s["adaptive-reorder"]
        out.append(("duplicates offered",
                    sum(_get(reorder, run, "duplicates_offered") for run in reorder), ".0f"))
    return out


def _order_why(seeds: Sequence[Sources]) -> str:
    per_seed = [_ad_order(s) for s in seeds]

    def of(label: str) -> str:
        return spread([x for vals in per_seed for k, x, _ in vals if k == label], ".0f")
    dups = of("duplicates offered") if all("adaptive-reorder" in s for s in seeds) else "no"
    return (f"{of('accepted out of order')} messages accepted with a timestamp not above "
            f"their connection's last accepted one, of {of('out-of-order arrivals offered')} "
            f"out-of-order arrivals and {dups} duplicates offered")


#: Theorem 8 with spikes: the limited-horizon runs inside (t, X, S, H) (no group of S
#: arrivals with more than H spikes), and their X (``true_max_lifetime``)
SPIKE_RUNS = (("adaptive-horizon", "spikes/limited"), ("adaptive", "spikes/limited"))


def _ad_spikes(s: Sources) -> Values:
    """The largest estimate in force over the second half of the traffic, over 2X (X
    the bound of the non-spike lifetimes), and the spikes beside it."""
    out: Values = []
    for source, run in SPIKE_RUNS:
        runs = s[source]
        name = "horizon" if source == "adaptive-horizon" else "default"
        if "estimate_during_over_true" not in runs.get(run, {}):
            continue  # a dataset without the estimate's measures: not shown
        out += [(f"{name} estimate / 2X", _get(runs, run, "estimate_during_over_true") / 2,
                 ".2f"),
                (f"({name} X ms)", _get(runs, run, "true_max_lifetime") / 1000, ".0f"),
                (f"{name} spikes groups over H", _get(runs, run, "groups_over_h"), ".0f")]
    return out


def _ad_spikes_ok(v: dict[str, float]) -> bool:
    """Inside the hypotheses (no group over H), the estimate stays below 2X while the
    second half of the traffic arrives, spikes notwithstanding."""
    return all(x == 0 for k, x in v.items() if k.endswith("spikes groups over H")) and all(
        x < 1 for k, x in v.items() if k.endswith("estimate / 2X"))


def _limited_why(seeds: Sequence[Sources]) -> str:
    """The Theorem 10 row's cause: L/A against 1/p, the hypotheses, the estimate."""
    per_seed = [_ad_limited(s) for s in seeds]
    failed = [vals for vals in per_seed if not _ad_limited_ok({k: x for k, x, _ in vals})]

    def of(label: str, fmt: str) -> str:
        return spread([x for vals in failed for k, x, _ in vals if k == label], fmt)
    end = [k for k, _, _ in per_seed[0] if k.startswith("L/A at")][-1]
    text = (f"on the seeds that differ: L/A at the end {of(end, '.4f')} against "
            f"1/p {of('1/p', '.2f')}, p's bound (S-H)/H {of('(S-H)/H', '.2f')}, groups "
            f"over H {of('groups over H', '.0f')}, default loads' L/A * p "
            + ", ".join(f"{load} {of(f'default {load} L/A * p', '.3f')}"
                        for load in ("bounded", "spikes", "daynight")))
    if not all(_ad_spikes_ok({k: x for k, x, _ in vals}) for vals in failed):
        text += "; " + _spikes_why(seeds)
    return text


def _spikes_why(seeds: Sequence[Sources]) -> str:
    parts = []
    for source, run in SPIKE_RUNS:
        def of(measure: str, scale: float = 1.0, fmt: str = ".2f",
               source: str = source, run: str = run) -> str:
            return spread([_get(s[source], run, measure) * scale for s in seeds], fmt)
        parts.append(f"{source} {run}: the estimate rose to "
                     f"{of('estimate_during_over_true', 0.5)} times twice X over the second half "
                     f"of the traffic (X {of('true_max_lifetime', 1e-3, '.0f')} ms, spikes "
                     f"{of('spike_share', 1.0, '.3f')} of the arrivals)")
    return "; ".join(parts)



CLAIMS: tuple[Claim, ...] = (
    Claim("adaptive", "no duplicate and no out-of-order message is accepted (Theorem 2)",
          "0", "adaptive runs and adaptive-reorder (10 clients: arrivals out of order; the "
          "network duplicates 5% of the datagrams): accepted messages with a timestamp "
          "not above their connection's last accepted (a duplicate or an out-of-order "
          "message), first copies offered out of order and duplicate copies offered; "
          "checked: 0 accepted, and both kinds offered. It differs if any run accepts such "
          "a message, or adaptive-reorder offers no duplicate; with no out-of-order "
          "arrival offered (and none accepted) it is not measured here (the check would "
          "test nothing)",
          ("adaptive", "adaptive-reorder"), _ad_order,
          lambda v: v["accepted out of order"] == 0
          and v["out-of-order arrivals offered"] > 0 and v.get("duplicates offered", 1) > 0,
          _order_why),
    Claim("adaptive", "(t, X)-bounded: after some time the estimate stays below 2X "
          "(Theorems 4, 8)", "< 2X after some time", "adaptive-step, runs step/*: delays "
          "1..bounded_values ms, then 1..step_values ms from step_at on (X2: the largest "
          "lifetime of a message sent after the step); settling: from the step to the last "
          "change after which the estimate stays < 2 X2. Differs if the estimate at the "
          "step is below 2 X2 (the step tests nothing), or an estimator does not settle "
          "below 2 X2 within the first half of the traffic after the step",
          ("adaptive-step",), _ad_estimate, _ad_estimate_ok),
    Claim("adaptive", "unlimited horizon: L/A -> 0 (Theorem 6)", "-> 0",
          "adaptive, runs */unlimited, and adaptive-step, step/unlimited and "
          "step-up/unlimited (lifetimes fall, or rise, at step_at). A finite run cannot "
          "show the limit; checked, Lemma 3, on which the proof rests: every lost message "
          "arrives within the new estimate after an increase of the estimate or in the GC "
          "period before one (lost outside: 0). Differs if a message is lost outside those "
          "windows (an estimator losing messages without raising its estimate, as a fixed "
          "rho does) or no run loses a message (nothing checked)",
          ("adaptive", "adaptive-step"), _ad_unlimited, _ad_unlimited_ok),
    Claim("adaptive", "limited horizon: L/A tends to 1/p, tolerating spikes "
          "(Theorem 10; the proof shows L/A <= 1/p)", "<= 1/p", "adaptive-horizon, run "
          "spikes/limited inside the hypotheses: p <= (S-H)/H and no group of S arrivals "
          "with more than H spikes (delays 1..bounded_values ms or a spike); default loads "
          "beside (L/A * p, p = 10). Tolerating spikes (Theorem 8 inside the same "
          "hypotheses): the largest estimate in force while the second half of the "
          "traffic arrives, over 2X (X the largest non-spike lifetime), on this run and on "
          "the default spikes/limited run. Differs if L/A at the end exceeds 1/p, a "
          "default load's L/A * p exceeds 1, the run leaves the hypotheses, or a spike "
          "raises the estimate to 2X or more (an estimator that chases every spike)",
          ("adaptive", "adaptive-horizon"), _ad_limited, _ad_limited_ok, _limited_why),
    Claim("adaptive", "no bound on the time to converge from the state at t "
          "(Theorem 11, lower bound)", "t' - t unbounded given the state at t",
          "adaptive-step, runs step/limited and step-slow/limited: the same execution up "
          "to the step (same state there), then every client sends slowdown times slower; "
          "the limited horizon settles after about the same number of messages, so its "
          "settling time grows with the slowdown. Differs if the slowed run does not "
          "settle at least slowdown/4 times later (a bound in time from the state alone). "
          "The unlimited horizon (GC every gc_every ticks) is not shown: its worst case "
          "needs the proof's repeated losses",
          ("adaptive-step",), _ad_lower, _ad_lower_ok),
    Claim("adaptive", "fixed rho: too small loses messages, too large keeps a big table",
          "qualitative", "adaptive, runs bounded/*: L/A of the small fixed rho, mean "
          "table of the large fixed rho and of the unlimited estimator; checked: L/A above "
          "0.01 and the large rho's table above the unlimited one's. It differs if the "
          "small rho loses 1% of the accepted count or less, or the large rho keeps no "
          "bigger table than the adaptive estimator", ("adaptive",), _ad_fixed,
          lambda v: v["small L/A"] > 0.01 and v["large table"] > v["unlimited table"]),
)
