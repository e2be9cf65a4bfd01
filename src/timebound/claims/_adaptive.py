"""Adaptive timeouts: Chaudhuri, Coan and Welch, "Using Adaptive Timeouts to Achieve
At-Most-Once Message Delivery": the rows on Theorem 2 (no duplicate and no
out-of-order message accepted), Theorems 4 and 8 (a (t, X)-bounded execution's
estimate stays below 2X), Theorem 6 (unlimited horizon: L/A -> 0), Theorem 10
(limited horizon: L/A about 1/p, tolerating spikes), and the fixed-rho contrast.

Sources: the ``adaptive``, ``adaptive-horizon`` and ``adaptive-reorder`` jobs.
"""

from __future__ import annotations

from ._base import Claim, Missing, Runs, Sources, Values, _get


def _ad_estimate(s: Sources) -> Values:
    runs = s["adaptive"]
    return [(f"{e} during traffic", _get(runs, f"bounded/{e}", "estimate_during_over_true"),
             ".2f") for e in ("unlimited", "limited")] + [
            (f"{e} after traffic", _get(runs, f"bounded/{e}", "estimate_over_true"), ".2f")
            for e in ("unlimited", "limited")]


def _ad_estimate_ok(v: dict[str, float]) -> bool:
    return all(x < 2 for k, x in v.items() if k.endswith("during traffic"))


def _trend(runs: Runs, run: str) -> Values:
    out: Values = []
    for pct in (10, 25, 50, 100):
        out.append((f"{pct}%", _get(runs, run, f"lost_per_accepted_at_{pct}pct"), ".4f"))
    return out


def _ad_unlimited(s: Sources) -> Values:
    runs = s["adaptive"]
    out: Values = []
    for load in ("bounded", "spikes", "daynight"):
        out += [(f"{load} {k}", x, f) for k, x, f in _trend(runs, f"{load}/unlimited")]
    return out


def _ad_unlimited_ok(v: dict[str, float]) -> bool:
    """A finite run cannot show the limit itself: checked, L/A below 1% on every load
    from 25% of the messages on, and below 0.1% at the end of the bounded load (the
    theorem's (t, X)-bounded execution)."""
    late = [x for k, x in v.items() if not k.endswith(" 10%")]
    return all(x < 0.01 for x in late) and v["bounded 100%"] < 0.001


def _ad_limited(s: Sources) -> Values:
    runs = s["adaptive-horizon"]
    p = _get(runs, "spikes/limited", "p")
    out: Values = [("1/p", 1 / p, ".2f")]
    out += [(f"L/A at {k}", x, f) for k, x, f in _trend(runs, "spikes/limited")]
    for load in ("bounded", "spikes", "daynight"):
        out.append((f"default {load}", _get(s["adaptive"], f"{load}/limited",
                                            "lost_per_accepted"), ".4f"))
    return out


def _ad_limited_ok(v: dict[str, float]) -> bool:
    bound = v["1/p"]
    final = v["L/A at 100%"]
    return 0.5 * bound <= final <= bound and all(
        x <= bound for k, x in v.items() if k.startswith("default"))


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
    out.append(("accepted out of order", acc, ".0f"))
    out.append(("out-of-order arrivals offered", offered, ".0f"))
    return out



CLAIMS: tuple[Claim, ...] = (
    Claim("adaptive", "no duplicate and no out-of-order message is accepted (Theorem 2)",
          "0", "adaptive runs and adaptive-reorder (10 clients: arrivals out of order)",
          ("adaptive", "adaptive-reorder"), _ad_order,
          lambda v: v["accepted out of order"] == 0
          and v["out-of-order arrivals offered"] > 0),
    Claim("adaptive", "(t, X)-bounded: after some time the estimate stays below 2X "
          "(Theorems 4, 8)", "< 2X during traffic", "adaptive, runs bounded/*; the largest "
          "estimate in force over the second half of the traffic, / X",
          ("adaptive",), _ad_estimate, _ad_estimate_ok),
    Claim("adaptive", "unlimited horizon: L/A -> 0 (Theorem 6)", "-> 0",
          "adaptive, runs */unlimited; cumulative L/A after 10, 25, 50, 100% of the "
          "messages; checked: < 1% from 25% on, < 0.1% at the end of the bounded load",
          ("adaptive",), _ad_unlimited, _ad_unlimited_ok,
          "L/A does not fall on the bounded load"),
    Claim("adaptive", "limited horizon: L/A tends to about 1/p, tolerating spikes "
          "(Theorem 10)", "-> 1/p", "adaptive-horizon, run spikes/limited (30% spikes, "
          "H = 65 of S = 200, p = 10), L/A after 10-100% of the messages; default loads beside",
          ("adaptive", "adaptive-horizon"), _ad_limited, _ad_limited_ok,
          "L/A does not approach 1/p"),
    Claim("adaptive", "fixed rho: too small loses messages, too large keeps a big table",
          "qualitative", "adaptive, runs bounded/*", ("adaptive",), _ad_fixed,
          lambda v: v["small L/A"] > 0.01 and v["large table"] > v["unlimited table"]),
)
