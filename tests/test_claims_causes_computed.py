"""The causes of the reproduction table's "differs" rows quote only figures measured on
the same runs.

- The slotted causes (``queue_c_cause``, ``discard_cause``) are evaluated on small real
  runs of the slotted scenario (three seeds); each figure they quote is the min-max over
  the seeds of a run metric, and changing one metric changes the text with it.
- A scan of the claims package: no cause (a Claim's ``why``, a ``*_cause`` or
  ``*_why`` function) contains a digit that is not part of a label (R11, D1, Fig. 5,
  Thm 4.5, 1/p) or a format placeholder. The papers' figures a cause needs are named
  constants (``PAPER_DISCARD_PCT``...). The scan flags the causes as they were typed
  before (``test_scan_flags_typed_figures``).
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import timebound.claims
from timebound.claims import spread
from timebound.claims._rpc import bench_verdict, rpc_udp_median_us
from timebound.claims._slotted import (
    PAPER_DISCARD_PCT,
    PAPER_QUEUE_C_RATIO,
    QUEUE_C_TOLERANCE,
    _sl_queue_c,
    _sl_queue_c_ok,
    discard_cause,
    queue_c_cause,
)
from timebound.sim import run_scenario
from timebound.sim._reproduce import scalars

SEEDS = (1, 2, 3)
#: Small runs of the reproduction's slotted job (paper transport): 2 s per run.
PARAMS = {"transport": "paper", "duration": "2000000", "slots": "2000,20000,40000"}
SLOTS = (2000, 20000, 40000)


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    base = tmp_path_factory.mktemp("slotted-causes")
    out = []
    for seed in SEEDS:
        run_scenario("slotted", str(base / f"s{seed}"), seed=seed, params=PARAMS)
        out.append({"slotted": scalars(str(base / f"s{seed}"))})
    return out


def _m(seeds: list[dict[str, Any]], run: str, measure: str) -> list[float]:
    return [float(s["slotted"][run][measure]) for s in seeds]


def test_split_of_the_buffer_adds_up(seeds: list[dict[str, Any]]) -> None:
    """D1 + D2 is the whole buffer (every message of these runs is delivered or
    discarded by the end), the F part is within it, and (a) never waits in D2 (no R)."""
    for s in seeds:
        for run, v in s["slotted"].items():
            assert v["queue_slot_mean"] + v["queue_order_mean"] == pytest.approx(
                v["queue_mean"], rel=0.01, abs=1e-9), run
            assert v["queue_f_mean"] <= v["queue_mean"] + 1e-9, run
            assert 0 <= v["little_gap_pct"] < 1, run
            assert 0 <= v["fr_waited_pct"] <= 100, run
            if run.startswith("a/"):
                assert v["queue_order_mean"] == 0 and v["queue_f_mean"] == 0, run
    # FRs overtake each other at 2 ms slots far more than at 40 ms
    assert min(_m(seeds, "c/Ts=2000", "fr_waited_pct")) > max(
        _m(seeds, "c/Ts=40000", "fr_waited_pct"))


def _ratio(seeds: list[dict[str, Any]], t: int, measure: str, ref: str = "a") -> list[float]:
    return [c / a for c, a in zip(_m(seeds, f"c/Ts={t}", measure),
                                  _m(seeds, f"{ref}/Ts={t}", measure), strict=True)]


def test_queue_cause_quotes_the_runs(seeds: list[dict[str, Any]]) -> None:
    """Each figure is the min-max over the seeds of the runs' metrics, at the slot
    lengths where the ratio leaves the paper's 1/3-1/2 (the check's tolerance)."""
    text = queue_c_cause(seeds)
    lo, hi = PAPER_QUEUE_C_RATIO
    high = [t for t in SLOTS if max(_ratio(seeds, t, "queue_mean")) > hi + QUEUE_C_TOLERANCE]
    low = [t for t in SLOTS if min(_ratio(seeds, t, "queue_mean")) < lo - QUEUE_C_TOLERANCE]
    assert high == [2000] and low, (high, low)  # these runs show both causes

    def over(group: list[int], run: str, measure: str) -> str:
        return spread([x for t in group for x in _m(seeds, run.format(t), measure)], ".0f")

    ratios = spread(_ratio(seeds, 2000, "queue_mean"), ".2f")
    fr = spread(_ratio(seeds, 2000, "fr_delay_ms"), ".2f")
    assert f"queue ratio ({ratios}) follows the FR delay ratio" in text
    assert f"of the same runs ({fr}), above 1/2" in text
    assert f"at 2 ms slots {over(high, 'c/Ts={}', 'fr_waited_pct')}% of (c)'s FRs" in text
    assert f"(D1, {over(low, 'c/Ts={}', 'queue_slot_mean')} of its " \
           f"{over(low, 'c/Ts={}', 'queue_mean')} buffered)" in text
    assert f"(D2, {over(low, 'c/Ts={}', 'queue_order_mean')})" in text
    assert f"(c) discards {over(low, 'c/Ts={}', 'discard_pct_unreliable')}% of its F" in text
    assert f"every earlier one ({over(low, 'a/Ts={}', 'fr_delay_ms')} ms)" in text
    assert f"with {PAPER_DISCARD_PCT:g}% discards the ratio would be" in text
    # the (d) side: its ratio at every slot length, and why where it leaves the band
    against_d = ", ".join(f"{spread(_ratio(seeds, t, 'queue_mean', 'd'), '.2f')} at "
                          f"{t // 1000} ms" for t in SLOTS)
    assert f"against (d) the ratio is {against_d}" in text
    high_d = [t for t in SLOTS
              if max(_ratio(seeds, t, "queue_mean", "d")) > hi + QUEUE_C_TOLERANCE]
    assert high_d == [2000], high_d
    fr_d = spread(_ratio(seeds, 2000, "fr_delay_ms", "d"), ".2f")
    assert f"follows the FR delay ratio (c)/(d) of the same runs ({fr_d}), above 1/2" in text
    assert text.endswith("(a discarded F is never buffered)")
    assert "departs from Fig. 4 as core/slotted/_receiver.py documents" in text


def test_queue_check_reads_both_reliable_schemes(seeds: list[dict[str, Any]]) -> None:
    """The row shows (c)/(a) and (c)/(d) per slot length up to 40 ms, and differs when
    either leaves the band or (d) is not measured."""
    values = {k: x for k, x, _ in _sl_queue_c(seeds[0])}
    assert list(values) == [f"(c)/({x}) {t // 1000} ms" for t in SLOTS for x in "ad"]
    assert values["(c)/(d) 40 ms"] == pytest.approx(_ratio(seeds, 40000, "queue_mean", "d")[0])
    inside = dict.fromkeys(values, 0.4)
    assert _sl_queue_c_ok(inside)
    for x in "ad":
        for bad in (0.3, 0.53):  # just outside 1/3 - 0.02, 1/2 + 0.02
            assert not _sl_queue_c_ok({**inside, f"(c)/({x}) 20 ms": bad}), (x, bad)
    assert not _sl_queue_c_ok({k: x for k, x in inside.items() if "(a)" in k})
    # a (d) run whose queue puts (c)/(d) in the band everywhere but one slot
    changed = copy.deepcopy(seeds[0])
    for t in SLOTS:
        changed["slotted"][f"c/Ts={t}"]["queue_mean"] = 0.4 * changed["slotted"][
            f"a/Ts={t}"]["queue_mean"]
        changed["slotted"][f"d/Ts={t}"]["queue_mean"] = changed["slotted"][
            f"a/Ts={t}"]["queue_mean"]
    assert _sl_queue_c_ok({k: x for k, x, _ in _sl_queue_c(changed)})
    changed["slotted"]["d/Ts=20000"]["queue_mean"] *= 2
    assert not _sl_queue_c_ok({k: x for k, x, _ in _sl_queue_c(changed)})


def test_queue_cause_follows_a_changed_measurement(seeds: list[dict[str, Any]]) -> None:
    before = queue_c_cause(seeds)
    changed = copy.deepcopy(seeds)
    for t in SLOTS[1:]:  # both long slots below 1/3 on seed 1
        changed[0]["slotted"][f"c/Ts={t}"]["queue_mean"] = 0.1 * changed[0]["slotted"][
            f"a/Ts={t}"]["queue_mean"]
    changed[0]["slotted"]["c/Ts=40000"]["discard_pct_unreliable"] = 77.0
    changed[0]["slotted"]["c/Ts=40000"]["queue_slot_mean"] = 99.0
    after = queue_c_cause(changed)
    assert after != before
    assert "at 20-40 ms the ratio is 0.10-" in after, after
    assert re.search(r"\(c\) discards \d+-77% of its F", after), after
    assert re.search(r"\(D1, \d+-99 of its", after), after
    # a ratio pushed above 1/2 at 40 ms joins the slots the FR delay explains
    changed[1]["slotted"]["c/Ts=40000"]["queue_mean"] = 0.9 * changed[1]["slotted"][
        "a/Ts=40000"]["queue_mean"]
    assert queue_c_cause(changed).startswith("at 2 and 40 ms slots")
    assert before.startswith("at 2 ms slots")
    # a (d) queue changed: the (d) side follows it
    changed[2]["slotted"]["d/Ts=20000"]["queue_mean"] = 0.05 * changed[2]["slotted"][
        "c/Ts=20000"]["queue_mean"]
    assert re.search(r"against \(d\) the ratio is [0-9.-]+ at 2 ms, [0-9.]+-20\.00 at "
                     r"20 ms", queue_c_cause(changed)), queue_c_cause(changed)
    # 20 ms joins the slots where (c)/(d) is above 1/2 (2 ms, and 40 ms pushed above)
    assert "at 2-40 ms (d)'s messages too wait" in queue_c_cause(changed)


def test_the_table_shows_the_computed_causes(seeds: list[dict[str, Any]]) -> None:
    """``evaluate`` (the table and the report) shows each slotted cause as computed
    from the same seeds, and a changed measurement changes the row's verdict text."""
    def verdicts(data: list[dict[str, Any]]) -> dict[str, str]:
        return {r.claim: r.verdict for r in timebound.claims.evaluate(data, only=["slotted"])}

    before = verdicts(seeds)
    queue = next(c for c in before if "(c)'s queue" in c)
    discards = next(c for c in before if c.startswith("discards"))
    assert before[queue].startswith("differs (0 of 3 seeds agree): at 2 ms slots ")
    assert before[queue].endswith(": " + queue_c_cause(seeds))
    assert before[discards].endswith(": " + discard_cause(seeds))
    changed = copy.deepcopy(seeds)
    changed[2]["slotted"]["e/Ts=2000"]["discard_pct_unreliable"] = 64.0
    after = verdicts(changed)
    assert after[discards] != before[discards]
    assert "only (b), (c) and (e) exceed" in after[discards]


def test_discard_cause_quotes_the_runs(seeds: list[dict[str, Any]]) -> None:
    text = discard_cause(seeds)
    top = [max(_m(seeds, f"{x}/Ts={t}", "discard_pct_unreliable")[i] for t in SLOTS)
           for i in range(len(SEEDS)) for x in "bc"]
    assert text.startswith(f"only (b) and (c) exceed {PAPER_DISCARD_PCT:g}% (up to "
                           f"{spread(top, '.0f')}% of their N/F arrivals"), text
    e = [max(_m(seeds, f"e/Ts={t}", "discard_pct_unreliable")[i] for t in SLOTS)
         for i in range(len(SEEDS))]
    assert f"(e) stays below, at {spread(e, '.0f')}% at most" in text
    assert text.endswith("(a) and (d) send no unreliable message")
    changed = copy.deepcopy(seeds)
    changed[2]["slotted"]["e/Ts=2000"]["discard_pct_unreliable"] = 64.0
    after = discard_cause(changed)
    assert after.startswith(f"only (b), (c) and (e) exceed {PAPER_DISCARD_PCT:g}%"), after
    assert "(e) stays below" not in after


def test_rpc_cause_quotes_the_bench_file(tmp_path: Path) -> None:
    """The RPC row's cause reads its round trip from the bench file it judges."""
    bench = Path(timebound.claims.__file__).parents[3] / timebound.claims.RPC_BENCH
    if not bench.exists():
        pytest.skip("no benchmarks/rpc_bench.md in this tree")
    text = bench.read_text(encoding="utf-8")
    udp = rpc_udp_median_us(str(bench))
    assert udp is not None
    missed = re.sub(r"\(bar: (.*?): met\)", r"(bar: \1: not met)", text)  # a row that differs
    (tmp_path / "benchmarks").mkdir()
    target = tmp_path / timebound.claims.RPC_BENCH
    for median in (udp, 4321.0):
        target.write_text(missed.replace(f"| plain UDP | {udp:.0f} |", f"| plain UDP | "
                                         f"{median:.0f} |"), encoding="utf-8")
        verdict = bench_verdict(str(tmp_path))[1]
        assert verdict.startswith("differs"), verdict
        assert f"round trip ({median:.0f} us: plain UDP's median in (i)" in verdict, verdict


# -- the scan --------------------------------------------------------------------------

#: What a digit may belong to in a cause: a label of the papers or the protocol (Fig. 5,
#: Figs. 3-2, 3-3, Thm 4.5, Lemma 4.2, section 6, R11, D1, G2), 1/p, a str.format field,
#: or a whole format spec handed to ``spread`` (".2f").
_LABELS = re.compile(r"""
    \b(?:Figs?\.|Thms?\.?|Theorems?|Lemmas?|section|Definition)\s*
        \d+(?:\.\d+)*(?:-\d+)?(?:,\s*\d+(?:\.\d+)*(?:-\d+)?)*
  | \b[A-Z]{1,2}\d+\b
  | \b1/p\b
  | \{[^{}]*\}
  | ^\.\d+[fg%]$
""", re.VERBOSE)


def typed_figures(text: str) -> list[str]:
    """The digits of ``text`` outside labels, as the words holding them."""
    rest = _LABELS.sub(" ", text)
    return re.findall(r"\S*\d\S*", rest)


def _strings(node: ast.AST) -> Iterator[ast.Constant]:
    """String constants under ``node``, not counting f-string format specs (``:.2f``);
    a number written straight into an f-string (``{7}``) counts as its text."""
    if isinstance(node, ast.FormattedValue):
        if isinstance(node.value, ast.Constant) and not isinstance(node.value.value, str):
            yield ast.Constant(str(node.value.value), lineno=node.lineno)
            return
        yield from _strings(node.value)
        return
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node
    for child in ast.iter_child_nodes(node):
        yield from _strings(child)


def _is_docstring(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    parent = parents.get(node)
    return (isinstance(parent, ast.Expr) and isinstance(
        parents.get(parent), (ast.FunctionDef, ast.Module, ast.ClassDef)))


def cause_strings(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string a cause is built from in one module: the ``why``
    of each ``Claim(...)`` (8th argument or keyword) and every string in a function
    named ``*_why``, ``*_cause`` or ``bench_verdict`` (docstrings aside)."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        roots: list[ast.AST] = []
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Claim":
            roots += node.args[7:8]
            roots += [k.value for k in node.keywords if k.arg == "why"]
        elif isinstance(node, ast.FunctionDef) and (
                node.name.endswith(("_why", "_cause")) or node.name == "bench_verdict"):
            roots = [node]
        for root in roots:
            out += [(c.lineno, str(c.value)) for c in _strings(root)
                    if not _is_docstring(c, parents)]
    return out


def _modules() -> list[Path]:
    return sorted(Path(timebound.claims.__file__).parent.glob("*.py"))


def test_no_cause_holds_a_typed_figure() -> None:
    found = []
    scanned = 0
    for path in _modules():
        for line, text in cause_strings(path.read_text(encoding="utf-8")):
            scanned += 1
            found += [f"{path.name}:{line}: {w}" for w in typed_figures(text)]
    assert scanned > 20  # the scan sees the causes (every Claim's why, the cause functions)
    assert not found, "figures typed into causes (compute them from the runs):\n" + \
        "\n".join(found)


#: Two causes as they were written before (claims.py at 6fdd66d): figures pasted in.
TYPED = '''
CLAIMS = (
    Claim("slotted", "up to 40 ms", "1/3-1/2", "where", ("slotted",), m, ok,
          "so the queue ratio equals the FR delay ratio (c)/(a) of the same runs "
          "(0.66-0.70 in the row above), above 1/2; at 20-40 ms the ratio is 0.28-0.32 "
          "because (c) discards 22-27% of its F (D1, 8-14 of its 21-23 buffered) and by "
          "Little's law (within 0.5%)"),
    Claim("slotted", "discards", "< 10%", "where", ("slotted",), m, ok,
          why="(R11, R15) ... (7% at 2 ms, 12% at 100 ms); (e) stays at 7%"),
)


def rpc_why() -> str:
    return f"on top of a loopback UDP round trip of {40} us, about 3x the core's cost"
'''


def test_scan_flags_typed_figures() -> None:
    found = [w for _, text in cause_strings(TYPED) for w in typed_figures(text)]
    for figure in ("(0.66-0.70", "0.28-0.32", "22-27%", "8-14", "21-23", "0.5%)", "(7%",
                   "12%", "3x", "40"):
        assert figure in found, (figure, found)
    # labels are not figures
    assert not typed_figures("(R11, R15), D1, D2, Fig. 5, Figs. 3-2, 3-3, Thm 4.5, 1/p, "
                             "{:.0f}")
    assert typed_figures("within 0.5%") == ["0.5%"]
