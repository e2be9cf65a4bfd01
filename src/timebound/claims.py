"""The papers' claims and their verdicts: one definition for the table and the report.

``docs/reproduction.md`` (``timebound simulate --reproduce``) and the report page
(``timebound report``) both call ``evaluate`` here, so the two never disagree.

Input: ``seeds`` is a list with one entry per seed; each entry maps a *source* (a
scenario name, or a reproduction job label such as ``adaptive-horizon``) to that
source's scalar metrics, ``{run: {measure: value}}``. Every claim names the sources
it needs; it measures named values on each seed and checks them. A claim's verdict is
``agrees`` only when the check holds on every seed; otherwise ``differs (k of n seeds
agree)`` followed by the cause, which the reproduction's own runs confirm. A claim
whose figures come from a formula rather than from encoded or observed data has the
verdict ``computed``; a claim without a measurement yet is ``not yet measured``; a
claim whose runs are not in the given data is ``not measured here`` (the report of a
dataset that lacks those runs).

Leaf module: standard library only (the report may import it; it imports no core).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

Runs = Mapping[str, Mapping[str, float]]
Sources = Mapping[str, Runs]
#: measured values of one seed: (label, value, format) in display order
Values = list[tuple[str, float, str]]


@dataclass(frozen=True)
class Claim:
    paper: str
    claim: str
    published: str
    where: str
    needs: tuple[str, ...]
    measure: Callable[[Sources], Values] | None
    check: Callable[[dict[str, float]], bool] | None
    why: str = ""          # the confirmed cause, shown when the check fails
    kind: str = "measured"  # measured | computed | pending
    note: str = ""          # how the check reads the claim (shown beside the verdict)
    #: A trend (increasing, decreasing): it can fail only on two distinct values or
    #: more, so on fewer its verdict is "not measured here" (``one_value``).
    trend: bool = False


def one_value(claim: Claim, per_seed: Sequence[Values]) -> str | None:
    """Why ``claim`` cannot fail on these measurements (a trend measured at fewer than
    two distinct values), or None."""
    if not claim.trend:
        return None
    labels = {str(label) for values in per_seed for label, _, _ in values}
    if len(labels) >= 2:
        return None
    what = ", ".join(sorted(labels)) or "none"
    return (f"not measured here (a trend needs at least two distinct values; this data "
            f"has {what} only)")


@dataclass(frozen=True)
class Row:
    paper: str
    claim: str
    published: str
    measured: str
    where: str
    verdict: str
    seeds: int

    @property
    def agrees(self) -> bool:
        return self.verdict == "agrees"


class Missing(Exception):
    """A run or measure the claim needs is not in the data."""


def _get(runs: Runs, run: str, measure: str) -> float:
    try:
        value = runs[run][measure]
    except KeyError:
        raise Missing(f"{run}:{measure}") from None
    if value is None or (isinstance(value, float) and math.isnan(value)):
        raise Missing(f"{run}:{measure}")
    return float(value)


def _runs(runs: Runs, prefix: str) -> list[str]:
    return [r for r in runs if r.startswith(prefix)]


def _num(run: str, key: str) -> float:
    found = re.search(rf"{re.escape(key)}=(-?\d+(?:\.\d+)?)", run)
    if not found:
        raise Missing(run)
    return float(found.group(1))


def spread(values: Sequence[float], fmt: str) -> str:
    """``a`` when every seed gives the same text, else ``min-max``."""
    lo, hi = min(values), max(values)
    a, b = format(lo, fmt), format(hi, fmt)
    return a if a == b else f"{a}-{b}"


# -- SCMP -------------------------------------------------------------------------

def _scmp_rhos(s: Sources) -> list[tuple[int, Mapping[str, float]]]:
    runs = s["scmp"]
    out = sorted((int(_num(k, "rho")), v) for k, v in runs.items() if k.startswith("rho="))
    if len(out) < 2:
        raise Missing("scmp rho sweep")
    return out


def _scmp_violations(s: Sources) -> Values:
    runs = s["scmp"]
    if not runs:
        raise Missing("scmp")
    return [("violations", sum(_get(runs, r, "at_most_once_violations") for r in runs), ".0f")]


def _scmp_bound(s: Sources) -> Values:
    rhos = _scmp_rhos(s)
    out: Values = [("bound (ms)", rhos[0][1]["bound_rho_min"] / 1000, ".0f")]
    out += [(f"{r / 1000:g} ms", v["lost_rate"], ".4f") for r, v in rhos]
    return out


def _scmp_bound_ok(v: dict[str, float]) -> bool:
    bound = v["bound (ms)"]
    lost = [(float(k[:-3]), x) for k, x in v.items() if k.endswith(" ms")]
    return (all(x < 0.001 for r, x in lost if r >= bound)
            and all(a[1] >= b[1] for a, b in zip(lost, lost[1:])))


def _scmp_table(s: Sources) -> Values:
    return [(f"{r / 1000:g} ms", v["table_mean"], ".0f") for r, v in _scmp_rhos(s)]


def _increasing(v: dict[str, float]) -> bool:
    xs = list(v.values())
    return all(a <= b for a, b in zip(xs, xs[1:]))


def _decreasing(v: dict[str, float]) -> bool:
    xs = list(v.values())
    return all(a >= b for a, b in zip(xs, xs[1:]))


def _scmp_skew(s: Sources) -> Values:
    runs = s["scmp"]
    if "clients-fast" not in runs:
        raise Missing("clients-fast")
    return [("slow clients lost", _get(runs, "clients-slow", "lost_rate"), ".3f"),
            ("fast clients early rows", runs["clients-fast"].get("rows_early", 0.0), ".0f")]


def _scmp_crash(s: Sources) -> Values:
    runs = s["scmp"]
    return [("lost with GC pause", _get(runs, "crash-grace", "lost_after_crash_plus_beta"),
             ".0f"),
            ("of", _get(runs, "crash-grace", "sent_after_crash_plus_beta"), ".0f"),
            ("lost without (the figures' GC)",
             _get(runs, "crash", "lost_after_crash_plus_beta"), ".0f")]


def rpc_bench_ratios(path: str) -> list[tuple[str, float, bool]] | None:
    """The ratio lines of ``benchmarks/rpc_bench.md`` (written by ``timebound rpc
    bench``): ``- (i) at-most-once / plain UDP = 1.80 (bar: <= 1.10: not met)`` under
    each ``### event loop: NAME`` heading, as (label, ratio, bar met); None while the
    file does not exist or holds no such line."""
    out: list[tuple[str, float, bool]] = []
    for loop, line in _bench_lines(path):
        found = re.match(r"-\s*(\([^)]*\))\s*(.+?)\s*=\s*(\d+(?:\.\d+)?)\s*"
                         r"\(bar:.*?:\s*(met|not met)\)", line)
        if found and loop:
            label = f"{loop} {found.group(1)} {found.group(2)}"
            out.append((label, float(found.group(3)), found.group(4) == "met"))
    return out or None


def _bench_lines(path: str) -> list[tuple[str, str]]:
    """Each line of the bench file with the event loop whose section holds it ("" before
    the first ``### event loop: NAME``); none while the file does not exist."""
    if not os.path.exists(path):
        return []
    out: list[tuple[str, str]] = []
    loop = ""
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            head = re.match(r"###\s*event loop:\s*(\S+)", line)
            if head:
                loop = head.group(1)
            out.append((loop, line))
    return out


def rpc_core_cpu_us(path: str) -> float | None:
    """The bench file's in-process CPU µs of one at-most-once null call (client and
    server cores joined in memory), or None where it gives none."""
    found = _bench_search(path, r"In-process cost of one at-most-once null call[^:]*:\s*"
                                r"(\d+(?:\.\d+)?)")
    return float(found) if found else None


def rpc_tcp_over_udp(path: str, loop: str = "asyncio") -> float | None:
    """TCP per call's "x UDP" in the (ii, fresh) column of ``loop``'s table in the
    bench file (how much slower than plain UDP a TCP connection per call is), or None."""
    found = None
    for section, line in _bench_lines(path):
        if section == loop and line.startswith("| TCP, connection per call |"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            try:
                found = float(cells[6])  # (i): median, p99, x UDP; (ii, fresh): ...
            except (IndexError, ValueError):
                found = None
    return found


def rpc_bench_runs(path: str) -> str:
    """``N run(s) per cell`` as the bench file says, or ``runs per cell unknown``."""
    found = _bench_search(path, r"x (\d+) run\(s\) per cell")
    return f"{found} run(s) per cell" if found else "runs per cell unknown"


def _bench_search(path: str, pattern: str) -> str | None:
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        found = re.search(pattern, handle.read())
    return found.group(1) if found else None


def rpc_why(ratios: Sequence[tuple[str, float, bool]], cpu_us: float | None,
            core: str | None = None, tcp_over_udp: float | None = None) -> str:
    """Why the RPC row differs, from the bench run's own figures (no number is
    written here)."""
    missed = [f"{k} = {x:.2f}x" for k, x, ok in ratios if not ok and k.startswith("asyncio")]
    which = f"{core}, " if core else ""
    cost = (f"{cpu_us:.1f} us of CPU per call in the client and server cores together "
            f"({which}measured in-process by the same bench)" if cpu_us is not None
            else "the Python work of the client and server cores per call")
    fresh = ""
    if tcp_over_udp is not None and any("(ii, fresh)" in m for m in missed):
        fresh = (f"; in the (ii, fresh) column TCP per call is itself only "
                 f"{tcp_over_udp:.2f}x plain UDP on loopback")
    return (f"bars missed on the asyncio loop: {'; '.join(missed) or 'none'}{fresh}; what "
            f"is left is {cost}, on top of a loopback UDP round trip of a few tens of us "
            "(benchmarks/rpc_bench.md), and the event loop's own work per datagram; the "
            "paper's C implementation had neither")


# -- adaptive -----------------------------------------------------------------------

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


# -- slotted ------------------------------------------------------------------------

def _slots(runs: Runs, scheme: str) -> list[tuple[int, Mapping[str, float]]]:
    out = sorted((int(_num(k, "Ts")), v) for k, v in runs.items()
                 if k.startswith(scheme + "/"))
    if not out:
        raise Missing(f"slotted {scheme}/*")
    return out


def _sl_fr_ad(s: Sources) -> Values:
    runs = s["slotted"]
    return [(f"({x}) {t / 1000:g} ms", v["fr_delay_ms"], ".1f")
            for x in "ad" for t, v in _slots(runs, x)]


def _within_paper_spread(v: dict[str, float]) -> bool:
    # the paper's runs agree within 4%: 70-80 ms read as [70 * 0.96, 80 * 1.04]
    return all(70 * 0.96 <= x <= 80 * 1.04 for x in v.values())


def _sl_fr_bc(s: Sources) -> Values:
    runs = s["slotted"]
    out: Values = []
    for t, va in _slots(runs, "a"):
        vd = dict(_slots(runs, "d")).get(t)
        if vd is None:
            continue
        ref = min(va["fr_delay_ms"], vd["fr_delay_ms"])
        for x in "bc":
            vx = dict(_slots(runs, x)).get(t)
            if vx is not None:
                out.append((f"({x})/(a,d) {t / 1000:g} ms", vx["fr_delay_ms"] / ref, ".2f"))
    return out


def _sl_fr_bc_ok(v: dict[str, float]) -> bool:
    """(b) and (c) below (a), (d) at every slot length, and below half from 10 ms on."""
    return all(x < 1 and (float(k.split()[1]) < 10 or x <= 0.5) for k, x in v.items())


def _sl_inslot(s: Sources) -> Values:
    runs = s["slotted"]
    return [(f"({x}) {t / 1000:g} ms", v["inslot_delay_ms"], ".1f")
            for x in "bcd" for t, v in _slots(runs, x)]


def _sl_inslot_ok(v: dict[str, float]) -> bool:
    """(b), (d): decreasing in slot length; (c): rises again at the longest slot."""
    def of(x: str) -> list[float]:
        return [val for k, val in v.items() if k.startswith(f"({x})")]
    c = of("c")
    def falls(xs: list[float]) -> bool:
        return all(a >= b for a, b in zip(xs, xs[1:]))
    return falls(of("b")) and falls(of("d")) and len(c) > 2 and c[-1] > min(c)


def _sl_queue_b(s: Sources) -> Values:
    runs = s["slotted"]
    b = dict(_slots(runs, "b"))
    return [(f"{t / 1000:g} ms", v["queue_mean"] / max(b[t]["queue_mean"], 1e-9), ".1f")
            for t, v in _slots(runs, "a") if t > 20_000 and t in b]


def _sl_queue_b_ok(v: dict[str, float]) -> bool:
    return bool(v) and all(x >= 8 for x in v.values())


def _sl_queue_c(s: Sources) -> Values:
    runs = s["slotted"]
    c = dict(_slots(runs, "c"))
    return [(f"{t / 1000:g} ms", c[t]["queue_mean"] / max(v["queue_mean"], 1e-9), ".2f")
            for t, v in _slots(runs, "a") if t <= 40_000 and t in c]


def _sl_queue_c_ok(v: dict[str, float]) -> bool:
    return bool(v) and all(1 / 3 - 0.02 <= x <= 1 / 2 + 0.02 for x in v.values())


def _sl_discard(s: Sources) -> Values:
    runs = s["slotted"]
    out: Values = []
    for x in "abcde":
        try:
            vals = [v["discard_pct_unreliable"] for _, v in _slots(runs, x)]
        except (Missing, KeyError):
            continue
        out.append((f"({x}) max", max(vals), ".1f"))
    if not out:
        raise Missing("slotted")
    return out


def _below10(v: dict[str, float]) -> bool:
    return all(x < 10 for x in v.values())


# -- stability ----------------------------------------------------------------------

def _sizes(runs: Runs) -> list[int]:
    out = sorted({int(_num(k.split("/")[0], "N")) for k in runs if k.startswith("N=")})
    if not out:
        raise Missing("stability N=*")
    return out


def _st_fig2v(s: Sources) -> Values:
    runs = s["stability"]
    return [("s1", _get(runs, "fig2/vector", "latency_max_s1"), ".0f"),
            ("s2", _get(runs, "fig2/vector", "latency_max_s2"), ".0f")]


def _st_fig2t(s: Sources) -> Values:
    return [("s1", _get(s["stability"], "fig2/timestamp", "latency_max_s1"), ".0f")]


def _st_t1t2(s: Sources) -> Values:
    runs = s["stability"]
    out: Values = []
    for node in ("s1", "s2"):
        out.append((f"t1 {node}", _get(runs, "fig2/vector", f"latency_max_{node}"), ".0f"))
        out.append((f"t2 {node}", _get(runs, "fig2/timestamp", f"latency_max_{node}"), ".0f"))
    out.append(("t_send", 1.0, ".0f"))
    return out


def _st_t1t2_ok(v: dict[str, float]) -> bool:
    top = max(v["t1 s1"], v["t1 s2"])
    return all(v[f"t1 {n}"] <= v[f"t2 {n}"] <= top + v["t_send"] for n in ("s1", "s2"))


def _st_bandwidth(s: Sources) -> Values:
    runs = s["stability"]
    return [(f"N={n}", _get(runs, f"N={n}/vector", "ack_bytes_per_s")
             / _get(runs, f"N={n}/timestamp", "ack_bytes_per_s"), ".1f")
            for n in _sizes(runs)]


def _st_latency(s: Sources) -> Values:
    runs = s["stability"]
    out: Values = []
    for n in _sizes(runs):
        out.append((f"N={n} timestamp", _get(runs, f"N={n}/timestamp", "latency_mean") / 1000,
                    ".1f"))
        out.append((f"N={n} vector", _get(runs, f"N={n}/vector", "latency_mean") / 1000, ".1f"))
    return out


def _st_latency_ok(v: dict[str, float]) -> bool:
    ns = {k.split()[0] for k in v}
    return all(v[f"{n} vector"] <= v[f"{n} timestamp"] <= 1.5 * v[f"{n} vector"] for n in ns)


def _st_lamport(s: Sources) -> Values:
    runs = s["stability"]
    out: Values = []
    for n in _sizes(runs):
        out.append((f"N={n} physical", _get(runs, f"N={n}/timestamp-uneven", "latency_mean")
                    / 1000, ".1f"))
        out.append((f"N={n} logical", _get(runs, f"N={n}/timestamp-logical-uneven",
                                           "latency_mean") / 1000, ".1f"))
    return out


def _st_lamport_ok(v: dict[str, float]) -> bool:
    ns = {k.split()[0] for k in v}
    return all(v[f"{n} logical"] > 1.2 * v[f"{n} physical"] for n in ns)


def _st_skew(s: Sources) -> Values:
    runs = s["stability"]
    out: Values = []
    for n in _sizes(runs):
        for stat in ("mean", "max"):
            base = _get(runs, f"N={n}/timestamp", f"latency_{stat}") / 1000
            skew = _get(runs, f"N={n}/timestamp-skewed", f"latency_{stat}") / 1000
            out.append((f"N={n} {stat} synchronized", base, ".1f"))
            out.append((f"N={n} {stat} skewed", skew, ".1f"))
            out.append((f"N={n} {stat} +", skew - base, ".1f"))
        out.append((f"N={n} offset spread ms", _get(runs, f"N={n}/timestamp-skewed",
                                                    "offset_spread") / 1000, ".1f"))
    return out


def _st_skew_ok(v: dict[str, float]) -> bool:
    """The mean latency grows (by about the mean offset above the slowest clock); the
    maximum is one sample of the delay tail and is shown, not checked."""
    return all(x > 0 for k, x in v.items() if k.endswith(" mean +"))


def _st_buffer(s: Sources) -> Values:
    runs = s["stability"]
    out: Values = []
    for n in _sizes(runs):
        run = f"N={n}/timestamp"
        period = _get(runs, run, "t_send") if "t_send" in runs.get(run, {}) else 1000.0
        out.append((f"N={n} mean buffer / (mean latency / t_send)",
                    _get(runs, run, "buffer_mean") / (_get(runs, run, "latency_mean") / period),
                    ".2f"))
        out.append((f"N={n} max buffer - max latency / t_send",
                    _get(runs, run, "buffer_max") - math.floor(_get(runs, run, "latency_max")
                                                               / period), ".0f"))
    return out


def _st_buffer_ok(v: dict[str, float]) -> bool:
    return all((0.85 <= x <= 1.1) if "mean" in k else x >= 0 for k, x in v.items())


# -- merge --------------------------------------------------------------------------

def _deltas(runs: Runs) -> list[tuple[int, Mapping[str, float]]]:
    out = sorted((int(_num(k, "delta")), v) for k, v in runs.items()
                 if re.fullmatch(r"delta=\d+", k))
    if not out:
        raise Missing("merge delta=*")
    return out


def _mg_order(s: Sources) -> Values:
    return [("mismatches", sum(v["order_mismatches"] for _, v in _deltas(s["merge"])), ".0f")]


def _zero(v: dict[str, float]) -> bool:
    return all(x == 0 for k, x in v.items() if not k.startswith("("))


def _mg_buffer(s: Sources) -> Values:
    out: Values = []
    for d, v in _deltas(s["merge"]):
        out.append((f"delta={d} max", v["max_buffering"], ".0f"))
        out.append((f"delta={d} bound", v["buffering_bound"], ".0f"))
    return out


def _mg_buffer_ok(v: dict[str, float]) -> bool:
    ds = {k.split()[0] for k in v}
    return all(v[f"{d} max"] <= v[f"{d} bound"] for d in ds)


def _mg_late(s: Sources) -> Values:
    return [(f"delta={d}", v["late_pct"], ".2f") for d, v in _deltas(s["merge"])]


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
    runs = s["merge-checks"]
    return [("violations", _get(runs, "causal", "causal_order_violations"), ".0f"),
            ("causal pairs checked", _get(runs, "causal", "causal_pairs_checked"), ".0f")]


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


# -- ours (beyond the papers) -------------------------------------------------------

OURS = "ours (beyond the papers)"
REORDER_WINDOWS = (1, 2, 4, 8, 32)


def _reorder(s: Sources) -> Values:
    """The scmp reorder runs (job ``scmp-reorder``, or the runs ``reorder W=*`` of an
    scmp dataset): refused-genuine rate (%) and mean table bytes per window W, and the
    at-most-once violations summed over the runs."""
    runs = {k: v for src in ("scmp-reorder", "scmp") for k, v in s.get(src, {}).items()
            if k.startswith("reorder W=")}
    by_w = {int(_num(k, "W")): k for k in runs}
    if 1 not in by_w or 8 not in by_w:
        raise Missing("scmp reorder W=1 and W=8 runs")
    out: Values = []
    for w in sorted(by_w):
        out.append((f"W={w} refused %", 100 * _get(runs, by_w[w], "refused_genuine_rate"),
                    ".2f"))
    for w in sorted(by_w):
        out.append((f"W={w} table B", _get(runs, by_w[w], "table_bytes_mean"), ".0f"))
    out.append(("violations", sum(_get(runs, k, "at_most_once_violations") for k in runs),
                ".0f"))
    return out


def _reorder_ok(v: dict[str, float]) -> bool:
    """No duplicate on any run; the refused rate never rises with W and is strictly
    lower at W=8 than at W=1; the table bytes never fall as W grows (the cost)."""
    ws = sorted(int(k[2:].split()[0]) for k in v if k.endswith(" refused %"))
    rate = [v[f"W={w} refused %"] for w in ws]
    size = [v[f"W={w} table B"] for w in ws]
    return (v["violations"] == 0
            and all(a >= b for a, b in zip(rate, rate[1:]))
            and v["W=8 refused %"] < v["W=1 refused %"]
            and all(a <= b for a, b in zip(size, size[1:])))


def _restart(s: Sources) -> Values:
    """The scmp restart runs (job ``scmp-restart``, or the runs of an scmp dataset):
    the paper's rule (run ``restart``) against incarnation marks (``restart-marked``)
    on the same traffic."""
    runs = {k: v for src in ("scmp-restart", "scmp") for k, v in s.get(src, {}).items()
            if k in ("restart", "restart-marked")}
    if len(runs) < 2:
        raise Missing("scmp restart and restart-marked runs")
    ms = 1000.0
    out: Values = []
    for run, label in (("restart", "paper's rule"), ("restart-marked", "marked")):
        out += [(f"{label} refused %", 100 * _get(runs, run, "refused_unknown_rate"), ".2f"),
                (f"{label} refused after restart",
                 _get(runs, run, "refused_after_restart"), ".0f"),
                (f"{label} refused after hearing", _get(runs, run, "refused_after_heard"),
                 ".0f"),
                (f"{label} served again median ms",
                 _get(runs, run, "served_again_median") / ms, ".0f"),
                (f"{label} served again max ms", _get(runs, run, "served_again_max") / ms,
                 ".0f")]
    out += [("marked served after hearing max ms",
             _get(runs, "restart-marked", "served_after_heard_max") / ms, ".0f"),
            ("round trip ms", _get(runs, "restart-marked", "round_trip") / ms, ".0f"),
            ("not served again", _get(runs, "restart-marked", "not_served_again"), ".0f"),
            ("violations", sum(_get(runs, k, "at_most_once_violations") for k in runs),
             ".0f")]
    return out


def _restart_ok(v: dict[str, float]) -> bool:
    """With marks no message sent after its client heard of the new incarnation is
    refused, every client is served again, within one round trip of hearing; the
    paper's rule on the same traffic refuses such messages (the outage the marks
    remove) and more of them in all; never a duplicate."""
    return (v["violations"] == 0
            and v["marked refused after hearing"] == 0
            and v["not served again"] == 0
            and v["marked served after hearing max ms"] <= v["round trip ms"]
            and v["paper's rule refused after hearing"] > 0
            and v["marked refused %"] < v["paper's rule refused %"])


RPC_BENCH = os.path.join("benchmarks", "rpc_bench.md")

CLAIMS: tuple[Claim, ...] = (
    Claim("SCMP", "no duplicate accepted, whatever rho or the clocks (2.3)", "0",
          "scmp, every run", ("scmp",), _scmp_violations, _zero),
    Claim("SCMP", "rho >= eps + delta + RT(N) loses ~no message (2.4); smaller rho loses "
          "more", "~0 lost at the bound", "scmp, runs rho=*", ("scmp",), _scmp_bound,
          _scmp_bound_ok, "losses at or above the bound"),
    Claim("SCMP", "table size grows with rho (2.4)", "increasing", "scmp, runs rho=*",
          ("scmp",), _scmp_table, _increasing, "not monotone in rho", trend=True),
    Claim("SCMP", "slow clocks: messages flagged as duplicates; fast: refused too early "
          "(2.3)", "more lost messages", "scmp, runs clients-slow, clients-fast", ("scmp",),
          _scmp_skew, lambda v: v["slow clients lost"] > 0.1
          and v["fast clients early rows"] > 0),
    Claim("SCMP", "after a crash, all messages sent after t_cr + beta are accepted, if GC "
          "waits for pending messages after the restart (2.4)", "0",
          "scmp, runs crash-grace, crash", ("scmp",), _scmp_crash,
          lambda v: v["lost with GC pause"] == 0,
          "messages refused after recovery even with the GC pause"),
    Claim(OURS, "with incarnation marks, an immediate restart refuses only the messages "
          "sent before their client heard of the new incarnation, and every client is "
          "served again within about one round trip of hearing (issue 27; the paper's rule, "
          "the row above, refuses every message stamped below the recovered bound)",
          "not a paper claim",
          "scmp --set experiments=restart (job scmp-restart; 50 clients of 2 callers each "
          "calling continuously, the server down 1 ms at 5 s), runs restart (the paper's rule) and "
          "restart-marked (each new message marked with the newest incarnation its client "
          "heard of, from the acknowledgments), same traffic: messages refused stale or "
          "early and never accepted (% of sent; those sent after the restart; after the "
          "client heard of the new incarnation), time from the restart until each client "
          "has a message accepted again; checked: with marks 0 refused after hearing, "
          "every client served again within one round trip (2x the p_net one-way delay) "
          "of hearing, fewer refused than the paper's rule, which refuses after hearing "
          "too; 0 violations. It differs if a marked message is refused (a mark lost "
          "between client, transport, adapter and core) or a client's first marked copy "
          "is lost and its retransmission lands beyond the round trip",
          (), _restart, _restart_ok,
          "a message sent after its client heard of the new incarnation was refused, or "
          "a client was served again later than one round trip after hearing"),
    Claim("SCMP", "at-most-once RPC costs little against UDP and TCP (Figs. 3-2, 3-3)",
          "close to UDP, cheaper than TCP", "timebound rpc bench (benchmarks/rpc_bench.md; "
          "bars: (i) <= 1.1x UDP, (ii) TCP per call >= 2x; verdict on the asyncio loop)",
          (), None, None, kind="pending"),
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
    Claim("slotted", "FR delivery delay of (a), (d): 70-80 ms, flat in slot length (Fig. 5)",
          "70-80 ms", "slotted (paper transport), runs a/*, d/*; T_d from transport-receive "
          "to delivery; within the paper's 4% run spread", ("slotted",), _sl_fr_ad,
          _within_paper_spread, "outside 67-83 ms"),
    Claim("slotted", "schemes (b), (c) cut the FR delivery delay (Fig. 5)",
          "significant reduction", "slotted, FR delay of (b), (c) over min((a), (d)) per "
          "slot length; < 1 everywhere, <= 0.5 from 10 ms on", ("slotted",), _sl_fr_bc,
          _sl_fr_bc_ok, "no significant reduction"),
    Claim("slotted", "in-slot delay: (b), (d) fall with the slot length; (c) rises again "
          "as D2 dominates (Fig. 6)", "shape", "slotted, runs b/*, c/*, d/* (ms)",
          ("slotted",), _sl_inslot, _sl_inslot_ok, "shape differs"),
    Claim("slotted", "slots > 20 ms: queue of (b) ten times less than (a) (Fig. 7)", "~10x",
          "slotted, queue (a)/(b) at slots > 20 ms; >= 8 counts as about ten",
          ("slotted",), _sl_queue_b, _sl_queue_b_ok,
          "the ratio is below about ten"),
    Claim("slotted", "up to 40 ms, (c)'s queue is 1/2 to 1/3 of (a)'s (Fig. 7)",
          "1/3-1/2", "slotted, queue (c)/(a) at slots <= 40 ms", ("slotted",), _sl_queue_c,
          _sl_queue_c_ok,
          "at 2 ms slots most FRs arrive out of order and the messages of a slot wait for "
          "the FR that opens it (D1) in (c) as in (a), so the queue ratio equals the FR "
          "delay ratio (c)/(a) of the same runs (0.66-0.70 in the row above), above 1/2; "
          "at 20-40 ms the ratio is 0.28-0.32 because (c) discards 22-27% of its F (the "
          "discards row; the paper reports < 10%): in (a) every message waits behind "
          "every earlier one (71-73 ms), in (c) an F waits only for the FR opening its "
          "slot (D1, 8-14 of its 21-23 buffered) and for earlier F of its slot (D2, 7-15), "
          "and an F later than its slot's end is discarded, never buffered; split of the "
          "buffer measured on these runs, and by Little's law (within 0.5%) the queue is "
          "the delivered F rate x their wait, so at the same waits with 10% discards the "
          "ratio would be 0.34-0.37"),
    Claim("slotted", "discards always below 10% (share of unreliable N/F arrivals)",
          "< 10%", "slotted, max over slot lengths per scheme", ("slotted",), _sl_discard,
          _below10,
          "only (b) and (c), all unreliable, exceed 10% (up to 26-28% of their N/F "
          "arrivals, at 20 ms slots): an N/F message is discarded when it arrives after "
          "its slot closed (R11, R15), and an exponential delay of mean 25 ms often "
          "outlasts a 10-40 ms slot; shorter slots keep the FR itself late, longer ones "
          "outlast the delay (7% at 2 ms, 12% at 100 ms); (e), one third reliable, stays at "
          "7%; (a) and (d) send no unreliable message"),
    Claim("stability", "Fig. 2, vector acks: stable within 7 at s1, 14 at s2", "7, 14",
          "stability, run fig2/vector (deterministic network)", ("stability",), _st_fig2v,
          lambda v: v["s1"] <= 7 and v["s2"] <= 14),
    Claim("stability", "Fig. 2, timestamp acks: stable within 11 at s1", "11",
          "stability, run fig2/timestamp", ("stability",), _st_fig2t,
          lambda v: v["s1"] <= 11),
    Claim("stability", "t1 <= t2 <= max t1 + t_send (section 4, inequalities (1), (2))",
          "holds", "stability, runs fig2/* (t1 vector, t2 timestamp, per sender)",
          ("stability",), _st_t1t2, _st_t1t2_ok),
    Claim("stability", "buffer grows linearly with the stability latency (section 4)",
          "buffer ~ latency x send rate", "stability, runs N=*/timestamp: time-average "
          "buffer over mean latency x send rate in [0.85, 1.1] (the average also covers "
          "the time before the first send), max buffer >= max latency / t_send",
          ("stability",), _st_buffer, _st_buffer_ok,
          "the buffer is not proportional to the latency"),
    Claim("stability", "ack bandwidth: timestamp O(N_r), vector O(N_r N_s)", "ratio N_s",
          "stability, runs N=*/vector over N=*/timestamp (sizes from the core's ack "
          "objects, 8 B per timestamp; no wire codec)", ("stability",), _st_bandwidth,
          None, kind="computed"),
    Claim("stability", "timestamp latency only slightly larger than vector", "slightly "
          "larger", "stability, runs N=*, mean latency (ms); <= 1.5x counts as slightly",
          ("stability",), _st_latency, _st_latency_ok),
    Claim("stability", "logical clocks increase the latency (section 5, Fig. 3)", "larger",
          "stability, runs N=*/timestamp-uneven and -logical-uneven (s1 sends 5x as often), "
          "mean latency (ms); > 1.2x counts as larger", ("stability",), _st_lamport,
          _st_lamport_ok, "no increase with uneven send rates"),
    Claim("stability", "clock skew increases the latency (section 5)", "larger",
          "stability, runs N=*/timestamp-skewed vs N=*/timestamp (same traffic, offsets "
          "uniform in +-10 ms): mean and max latency, synchronized -> skewed (ms); "
          "checked: the mean grows", ("stability",),
          _st_skew, _st_skew_ok, "skew did not increase the mean latency"),
    Claim("merge", "replicated mergers deliver in the same order (Thm 4.4)", "0 mismatches",
          "merge, all runs", ("merge",), _mg_order, _zero),
    Claim("merge", "causal delivery: send(m1) -> send(m2) delivers m1 first (Thm 4.5)",
          "0", "merge-checks, run causal (G1, G2 hold)", ("merge-checks",), _mg_causal,
          lambda v: v["violations"] == 0 and v["causal pairs checked"] > 0),
    Claim("merge", "buffering <= delta + 3 eps (Lemma 4.2)", "<= bound", "merge, all runs",
          ("merge",), _mg_buffer, _mg_buffer_ok),
    Claim("merge", "larger delta, fewer late losses (4.1, 6)", "decreasing",
          "merge, runs delta=* (late %)", ("merge",), _mg_late, _decreasing, trend=True),
    Claim("merge", "bounded timestamp vs vector clock bytes as n grows (Thm 3.8)",
          "O(eps log n) vs O(n)", "merge-checks, run wire: bytes of the core's WireCodec "
          "encoding (measured) vs 8 B x n (a vector clock, computed)", ("merge-checks",),
          _mg_bytes, _mg_bytes_ok, "encoded size grows faster than eps log n"),
    Claim("merge", "state corrupted mid-run recovers within O(eps + delta) "
          "(Thms 3.7, 4.6)", "O(eps + delta)", "merge-checks, run stabilize: one "
          "publisher's state and in-flight timestamps corrupted; ticks until the last "
          "reset or causal-order violation", ("merge-checks",), _mg_stabilize,
          _mg_stabilize_ok, "recovery slower than the bound"),
    Claim(OURS, "a per-connection reorder window W keeps genuine reordered messages: the "
          "refused-genuine rate falls as W grows, never a duplicate, at the cost of table "
          "bytes (issue 16; W = 1 is SCMP)", "not a paper claim",
          "scmp --set experiments=reorder (job scmp-reorder; 50 clients, one connection "
          "each; 5% of datagrams delayed up to "
          "50 ms more), runs reorder W=1,2,4,8,32: refused-genuine rate (%), "
          "mean table bytes, violations; checked: 0 violations on every run, the rate "
          "non-increasing in W and lower at W=8 than W=1, the bytes non-decreasing",
          (), _reorder, _reorder_ok,
          "the window did not cut the refused-genuine rate without a duplicate"),
)


def _verdict(claim: Claim, per_seed: list[Values], root: str) -> tuple[str, str, int]:
    if claim.kind == "pending":
        ratios = rpc_bench_ratios(os.path.join(root, RPC_BENCH)) if root else None
        if ratios is None:
            return "-", "not yet measured (needs `timebound rpc bench`)", 0
        text = ", ".join(f"{k}: {x:.2f}x ({'bar met' if ok else 'bar not met'})"
                         for k, x, ok in ratios)
        main = [ok for k, _, ok in ratios if k.startswith("asyncio")] or [
            ok for _, _, ok in ratios]
        if all(main):
            return text, "agrees", 1
        bench = os.path.join(root, RPC_BENCH)
        why = rpc_why(ratios, rpc_core_cpu_us(bench),
                      _bench_search(bench, r"µs \((mypyc-compiled core|pure-Python core)\)"),
                      rpc_tcp_over_udp(bench))
        return text, f"differs (one bench run, {rpc_bench_runs(bench)}): {why}", 1
    labels = [k for k, _, _ in per_seed[0]]
    fmts = {k: f for k, _, f in per_seed[0]}
    values = [{a: b for a, b, _ in vals} for vals in per_seed]
    measured = ", ".join(
        f"{k}: {spread([v[k] for v in values if k in v], fmts[k])}" for k in labels)
    if claim.kind == "computed" or claim.check is None:
        return measured, "computed", len(per_seed)
    oks = [claim.check({k: x for k, x, _ in vals}) for vals in per_seed]
    n = len(oks)
    if all(oks):
        return measured, "agrees", n
    return measured, f"differs ({sum(oks)} of {n} seeds agree): {claim.why}", n


def evaluate(seeds: Sequence[Sources], *, root: str = "",
             only: Sequence[str] | None = None) -> list[Row]:
    """One row per claim (per paper in ``only``, if given) over the seeds' metrics."""
    rows = []
    for claim in CLAIMS:
        if only is not None and claim.paper.lower() not in only:
            continue
        if claim.kind == "pending":
            measured, verdict, n = _verdict(claim, [], root)
            rows.append(Row(claim.paper, claim.claim, claim.published, measured,
                            claim.where, verdict, n))
            continue
        per_seed: list[Values] = []
        missing = ""
        for sources in seeds:
            if any(src not in sources for src in claim.needs if src != "adaptive-reorder"):
                missing = "runs not in this data"
                break
            try:
                assert claim.measure is not None
                per_seed.append(claim.measure(sources))
            except (Missing, KeyError, ZeroDivisionError) as exc:
                missing = f"needs {exc}"
                break
        if missing or not per_seed:
            rows.append(Row(claim.paper, claim.claim, claim.published, "-", claim.where,
                            f"not measured here ({missing or 'no data'})", 0))
            continue
        measured, verdict, n = _verdict(claim, per_seed, root)
        verdict = one_value(claim, per_seed) or verdict
        rows.append(Row(claim.paper, claim.claim, claim.published, measured, claim.where,
                        verdict, n))
    return rows


#: which papers a scenario's data can answer (the report's sections)
SCENARIO_PAPERS = {"scmp": ("scmp", OURS), "adaptive": ("adaptive",),
                   "slotted": ("slotted",), "stability": ("stability",), "merge": ("merge",)}
