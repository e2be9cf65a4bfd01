"""SCMP's at-most-once RPC cost (Liskov, Shrira and Wroclawski, MIT/LCS/TR-476,
Figs. 3-2 and 3-3: at-most-once RPC close to plain UDP, cheaper than TCP): the readers
of ``benchmarks/rpc_bench.md``, the file ``timebound rpc bench`` writes, and the one
row they fill. That row is not measured by the reproduction's jobs: its verdict
(``bench_verdict``) comes from the bench file under the repository root, and reads
"not yet measured" while there is none.

A bar sits inside run-to-run noise on a loaded machine (bar (i) <= 1.10 was met in
one run and missed in the next), so the verdict is taken over the bench's runs, never
over one: each bar line of the file gives the ratio run by run (run k's median over
run k's median), their range, their median and in how many runs the bar was met, and
the bench judges **the bar on the median of the per-run ratios** (``net._bench``).
With fewer than ``MIN_RUNS`` runs per cell, or a file written before the bench kept
its runs apart (no per-run part: one run), the row reads "not yet measured" and gives
no verdict; otherwise it agrees when every asyncio bar's median meets it, and the
cause (``rpc_why``) quotes, from the file only, which bars missed, their per-run
ranges and in how many runs they were met (``tests/test_rpc_bench_runs.py``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ._base import Claim

RPC_BENCH = os.path.join("benchmarks", "rpc_bench.md")
#: a verdict is taken over at least this many bench runs per cell
MIN_RUNS = 3

_NUM = r"(\d+(?:\.\d+)?)"
#: ``- (i) at-most-once / plain UDP = 1.06 (per run: 0.98-1.12, median 1.05, met in 3
#: of 5 runs[, inside run-to-run noise]) (bar: <= 1.10: met)``; a file written before
#: the bench kept its runs apart has no ``(per run: ...)`` part
_BAR_LINE = re.compile(
    rf"-\s*(\([^)]*\))\s*(.+?)\s*=\s*{_NUM}\s*"
    rf"(?:\(per run:\s*{_NUM}-{_NUM},\s*median\s*{_NUM},\s*met in (\d+) of (\d+) runs?"
    r"(,\s*inside run-to-run noise)?\)\s*)?"
    r"\(bar:.*?:\s*(met|not met)\)")


@dataclass(frozen=True)
class BenchBar:
    """One bar line of the bench file: ``label`` (``LOOP (i) at-most-once / plain
    UDP``), ``ratio`` (of the pooled medians), the per-run ratios' ``low``, ``high`` and
    ``median`` over ``runs`` runs, ``met_runs`` of them meeting the bar, ``noise`` (some
    runs met it, others not), ``met`` (the bench's judgement, on the median) and
    ``per_run`` (the line has its per-run part; a line without one, written before the
    bench kept its runs apart, counts as one run: low = high = median = ratio)."""

    label: str
    ratio: float
    met: bool
    runs: int
    low: float
    high: float
    median: float
    met_runs: int
    noise: bool
    per_run: bool


def rpc_bench_bars(path: str) -> list[BenchBar] | None:
    """The bar lines of ``benchmarks/rpc_bench.md`` (written by ``timebound rpc
    bench``) under each ``### event loop: NAME`` heading, in file order; None while the
    file does not exist or holds no such line."""
    out: list[BenchBar] = []
    for loop, line in _bench_lines(path):
        found = _BAR_LINE.match(line)
        if not (found and loop):
            continue
        label = f"{loop} {found.group(1)} {found.group(2)}"
        ratio, met = float(found.group(3)), found.group(10) == "met"
        if found.group(4) is None:  # written before the bench kept its runs apart
            out.append(BenchBar(label, ratio, met, 1, ratio, ratio, ratio, int(met), False,
                                False))
        else:
            out.append(BenchBar(label, ratio, met, int(found.group(8)), float(found.group(4)),
                                float(found.group(5)), float(found.group(6)),
                                int(found.group(7)), found.group(9) is not None, True))
    return out or None


def rpc_bench_ratios(path: str) -> list[tuple[str, float, bool]] | None:
    """The bar lines of the bench file as (label, median of the per-run ratios, bar
    met); None while the file does not exist or holds no such line."""
    bars = rpc_bench_bars(path)
    return None if bars is None else [(b.label, b.median, b.met) for b in bars]


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


def rpc_udp_median_us(path: str, loop: str = "asyncio") -> float | None:
    """Plain UDP's median µs per null call, (i) one client calling in sequence, in
    ``loop``'s table of the bench file (a loopback round trip), or None."""
    found = None
    for section, line in _bench_lines(path):
        if section == loop and line.startswith("| plain UDP |"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            try:
                found = float(cells[1])
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


def _bar_runs(bar: BenchBar) -> str:
    """A missed or measured bar's per-run figures, as the bench file gives them."""
    noise = ", inside run-to-run noise" if bar.noise else ""
    return (f"median {bar.median:.2f}x, per run {bar.low:.2f}-{bar.high:.2f}, met in "
            f"{bar.met_runs} of {bar.runs} runs{noise}")


def rpc_measured(bars: Sequence[BenchBar]) -> str:
    """The row's measured cell: per bar the median of the per-run ratios and their
    range (the pooled ratio for a line without per-run part)."""
    return ", ".join(
        f"{b.label}: {_bar_runs(b) if b.per_run else f'{b.ratio:.2f}x'} "
        f"({'bar met' if b.met else 'bar not met'})" for b in bars)


def rpc_why(bars: Sequence[BenchBar], cpu_us: float | None,
            core: str | None = None, tcp_over_udp: float | None = None,
            udp_us: float | None = None) -> str:
    """Why the RPC row differs, from the bench file's own figures (no number is
    written here): the asyncio bars missed, each with its per-run range and in how many
    runs it was met, then where the time goes."""
    missed = [b for b in bars if not b.met and b.label.startswith("asyncio")]
    which = f"{core}, " if core else ""
    cost = (f"{cpu_us:.1f} us of CPU per call in the client and server cores together "
            f"({which}measured in-process by the same bench)" if cpu_us is not None
            else "the Python work of the client and server cores per call")
    fresh = ""
    if tcp_over_udp is not None and any("(ii, fresh) TCP" in b.label for b in missed):
        fresh = (f"; in the (ii, fresh) column TCP per call is itself only "
                 f"{tcp_over_udp:.2f}x plain UDP on loopback")
    trip = (f"{udp_us:.0f} us: plain UDP's median in (i) of benchmarks/rpc_bench.md"
            if udp_us is not None else "benchmarks/rpc_bench.md")
    said = "; ".join(f"{b.label}: {_bar_runs(b)}" for b in missed) or "none"
    return (f"bars missed on the asyncio loop: {said}{fresh}; what is left is {cost}, on "
            f"top of a loopback UDP round trip ({trip}), and the event loop's own work "
            "per datagram; the paper's C implementation had neither")


def bench_verdict(root: str, select: Sequence[str] = ()) -> tuple[str, str, int]:
    """(measured, verdict, runs) of an RPC row from the bench file under ``root``, over
    the bars whose label holds one of ``select`` (every bar when empty): no verdict
    below ``MIN_RUNS`` runs per cell (or without per-run figures); else agrees when
    every asyncio bar's median of the per-run ratios meets it."""
    bench = os.path.join(root, RPC_BENCH)
    bars = rpc_bench_bars(bench) if root else None
    if bars is not None and select:
        bars = [b for b in bars if any(s in b.label for s in select)] or None
    if bars is None:
        return "-", "not yet measured (needs `timebound rpc bench`)", 0
    text = rpc_measured(bars)
    main = [b for b in bars if b.label.startswith("asyncio")] or bars
    runs = min(b.runs for b in main)
    if runs < MIN_RUNS:
        has = (f"{runs} run(s) per cell" if all(b.per_run for b in main)
               else "no per-run ratios")
        return text, (f"not yet measured (needs `timebound rpc bench --runs {MIN_RUNS}` "
                      f"or more: {RPC_BENCH} has {has})"), 0
    if all(b.met for b in main):
        return text, "agrees", runs
    why = rpc_why(bars, rpc_core_cpu_us(bench),
                  _bench_search(bench, r"µs \((mypyc-compiled core|pure-Python core)\)"),
                  rpc_tcp_over_udp(bench), rpc_udp_median_us(bench))
    return text, (f"differs (over {runs} bench runs per cell, each bar judged on the "
                  f"median of its per-run ratios): {why}"), runs


#: The bars of each RPC row (label parts): Figs. 3-2 and 3-3 against UDP and TCP, and
#: Fig. 3-3's "similar to UDP" half, one call from each of many fresh clients.
COST_BARS = ("(i) at-most-once / plain UDP", "TCP per call / at-most-once")
FRESH_UDP_BARS = ("(ii, fresh) at-most-once / plain UDP",)

CLAIMS: tuple[Claim, ...] = (
    Claim("SCMP", "at-most-once RPC costs little against UDP and TCP (Figs. 3-2, 3-3)",
          "close to UDP, cheaper than TCP", "timebound rpc bench (benchmarks/rpc_bench.md; "
          "bars: (i) <= 1.1x UDP, (ii) TCP per call >= 2x; verdict on the asyncio loop, each "
          f"bar judged on the median of its per-run ratios, over at least {MIN_RUNS} runs). It "
          "differs if at-most-once RPC costs more than 1.1x plain UDP per call in (i), or "
          "a TCP connection per call costs less than 2x it in (ii)",
          (), None, None, kind="pending", bars=COST_BARS),
    Claim("SCMP", "one call from each of many clients: at-most-once RPC similar to UDP "
          "(Fig. 3-3)", "similar to UDP", "timebound rpc bench (benchmarks/rpc_bench.md; "
          "bar: (ii, fresh) at-most-once <= 1.1x plain UDP, each client its own socket, "
          "the paper's experiment; verdict on the asyncio loop, judged on the median of the "
          f"per-run ratios, over at least {MIN_RUNS} runs). It differs if a fresh client's "
          "at-most-once call costs more than 1.1x its plain UDP call",
          (), None, None, kind="pending", bars=FRESH_UDP_BARS),
)
