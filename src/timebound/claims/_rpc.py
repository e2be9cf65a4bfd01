"""SCMP's at-most-once RPC cost (Liskov, Shrira and Wroclawski, MIT/LCS/TR-476,
Figs. 3-2 and 3-3: at-most-once RPC close to plain UDP, cheaper than TCP): the readers
of ``benchmarks/rpc_bench.md``, the file ``timebound rpc bench`` writes, and the one
row they fill. That row is not measured by the reproduction's jobs: its verdict
(``bench_verdict``) comes from the bench file under the repository root, and reads
"not yet measured" while there is none.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from ._base import Claim

RPC_BENCH = os.path.join("benchmarks", "rpc_bench.md")


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


def rpc_why(ratios: Sequence[tuple[str, float, bool]], cpu_us: float | None,
            core: str | None = None, tcp_over_udp: float | None = None,
            udp_us: float | None = None) -> str:
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
    trip = (f"{udp_us:.0f} us: plain UDP's median in (i) of benchmarks/rpc_bench.md"
            if udp_us is not None else "benchmarks/rpc_bench.md")
    return (f"bars missed on the asyncio loop: {'; '.join(missed) or 'none'}{fresh}; what "
            f"is left is {cost}, on top of a loopback UDP round trip ({trip}), and the event "
            "loop's own work per datagram; the paper's C implementation had neither")


def bench_verdict(root: str) -> tuple[str, str, int]:
    """(measured, verdict, seeds) of the RPC row from the bench file under ``root``."""
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
                  rpc_tcp_over_udp(bench), rpc_udp_median_us(bench))
    return text, f"differs (one bench run, {rpc_bench_runs(bench)}): {why}", 1


CLAIMS: tuple[Claim, ...] = (
    Claim("SCMP", "at-most-once RPC costs little against UDP and TCP (Figs. 3-2, 3-3)",
          "close to UDP, cheaper than TCP", "timebound rpc bench (benchmarks/rpc_bench.md; "
          "bars: (i) <= 1.1x UDP, (ii) TCP per call >= 2x; verdict on the asyncio loop). It "
          "differs if at-most-once RPC costs more than 1.1x plain UDP per call in (i), or "
          "a TCP connection per call costs less than 2x it in (ii)",
          (), None, None, kind="pending"),
)
