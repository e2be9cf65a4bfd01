"""SCMP: Liskov, Shrira and Wroclawski, "Efficient At-Most-Once Messages Based on
Synchronized Clocks" (MIT/LCS/TR-476): the rows on section 2.3 (no duplicate
accepted whatever rho or the clocks; slow and fast client clocks) and section 2.4
(the bound rho >= eps + delta + RT(N), the table size against rho, recovery after a
crash). The RPC cost row (Figs. 3-2, 3-3) is in ``_rpc``.

Source: the ``scmp`` job's runs (``rho=*``, ``clients-slow``, ``clients-fast``,
``crash``, ``crash-grace``).
"""

from __future__ import annotations

from collections.abc import Mapping

from ._base import Claim, Missing, Sources, Values, _get, _increasing, _num, _zero


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
)
