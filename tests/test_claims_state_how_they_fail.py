"""Every row of the reproduction table says what result would make it differ, and that
sentence agrees with its check: every check is able to fail.

- Every measured row's ``where`` (or ``note``) holds a sentence "It differs if ...".
- For a sample of rows of every paper, values built to match that sentence make the
  row's ``check`` return False, and values inside it make it return True (so the
  sentence and the check say the same thing, and the check can fail).
- The stability Fig. 2 rows on a real run of the scenario's Fig. 2 network: the
  worst-phase runs give the paper's figures (7 and 14 exactly, 11 less one tick), the
  aligned runs sit one ack period (t_send + t_ack) below them.
- The merge rows that rely on G1 read the clock spread the merge scenario records, and
  differ when a run's spread exceeds epsilon.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from timebound.claims import CLAIMS, Claim, evaluate
from timebound.sim import read_table, run_scenario


def _claim(text: str) -> Claim:
    (found,) = [c for c in CLAIMS if text in c.claim]
    return found


def _check(text: str, values: dict[str, float]) -> bool:
    claim = _claim(text)
    assert claim.check is not None
    return bool(claim.check(values))


def _scalars(path: Path) -> dict[str, dict[str, float]]:
    got: dict[str, dict[str, float]] = {}
    for row in read_table(str(path), "metrics").to_pylist():
        if row["t"] is None:
            got.setdefault(row["run"], {})[row["measure"]] = row["value"]
    return got


def test_every_measured_row_says_what_would_make_it_differ() -> None:
    silent = [f"{c.paper}: {c.claim}" for c in CLAIMS
              if c.kind != "pending" and "differs if" not in f"{c.where} {c.note}".lower()]
    assert not silent


#: (row, values inside the sentence: check True, values the sentence names: check False)
SAMPLES: list[tuple[str, dict[str, float], dict[str, float]]] = [
    # SCMP: "differs if any run accepts a second copy"
    ("no duplicate accepted, whatever rho", {"violations": 0}, {"violations": 1}),
    # "a run at or above the bound loses 0.1% of its first copies or more"
    ("rho >= eps + delta + RT(N)",
     {"bound (ms)": 20, "10 ms": 0.2, "20 ms": 0.0009, "40 ms": 0.0},
     {"bound (ms)": 20, "10 ms": 0.2, "20 ms": 0.001, "40 ms": 0.0}),
    # "or a larger rho loses more than a smaller one"
    ("rho >= eps + delta + RT(N)",
     {"bound (ms)": 20, "5 ms": 0.3, "10 ms": 0.2, "20 ms": 0.0},
     {"bound (ms)": 20, "5 ms": 0.1, "10 ms": 0.2, "20 ms": 0.0}),
    # "a larger rho keeps a smaller mean table"
    ("table size grows with rho", {"10 ms": 40, "20 ms": 50}, {"10 ms": 50, "20 ms": 40}),
    # "a message sent after t_cr + beta is lost with the GC pause"
    ("after a crash, all messages sent after",
     {"lost with GC pause": 0, "of": 100, "lost without (the figures' GC)": 5},
     {"lost with GC pause": 1, "of": 100, "lost without (the figures' GC)": 5}),
    # adaptive: "any run accepts such a message, or no out-of-order arrival is offered"
    ("no duplicate and no out-of-order message",
     {"accepted out of order": 0, "out-of-order arrivals offered": 10},
     {"accepted out of order": 1, "out-of-order arrivals offered": 10}),
    ("no duplicate and no out-of-order message",
     {"accepted out of order": 0, "out-of-order arrivals offered": 10},
     {"accepted out of order": 0, "out-of-order arrivals offered": 0}),
    # "the small rho loses 1% of the accepted count or less"
    ("fixed rho: too small loses messages",
     {"small L/A": 0.02, "large table": 900, "unlimited table": 300},
     {"small L/A": 0.01, "large table": 900, "unlimited table": 300}),
    # slotted: "a scheme discards 10% of its unreliable arrivals or more"
    ("discards always below 10%", {"(a) max": 9.9, "(b) max": 3.0},
     {"(a) max": 10.0, "(b) max": 3.0}),
    # "(a)'s mean queue is less than 8x (b)'s at some slot longer than 20 ms"
    ("queue of (b) ten times less", {"30 ms": 8.0, "40 ms": 12.0},
     {"30 ms": 7.9, "40 ms": 12.0}),
    # "(b) or (c) delivers FRs ... more than half as late from 10 ms on"
    ("schemes (b), (c) cut the FR delivery delay",
     {"(b)/(a,d) 2 ms": 0.9, "(c)/(a,d) 10 ms": 0.5},
     {"(b)/(a,d) 2 ms": 0.9, "(c)/(a,d) 10 ms": 0.51}),
    # stability: "the worst phase is not exactly 7 and 14, or the aligned run is not one
    # ack period below them"
    ("Fig. 2, vector acks",
     {"s1": 7, "s2": 14, "aligned s1": 6, "aligned s2": 13, "t_ack": 1},
     {"s1": 7, "s2": 14, "aligned s1": 7, "aligned s2": 13, "t_ack": 1}),
    ("Fig. 2, vector acks",
     {"s1": 7, "s2": 14, "aligned s1": 6, "aligned s2": 13, "t_ack": 1},
     {"s1": 6.875, "s2": 14, "aligned s1": 6, "aligned s2": 13, "t_ack": 1}),
    # "the worst phase is not 11 less one tick" (reaching 11 itself differs)
    ("Fig. 2, timestamp acks",
     {"s1": 10.875, "tick": 0.125, "aligned s1": 9, "t_send": 1, "t_ack": 1},
     {"s1": 11, "tick": 0.125, "aligned s1": 9, "t_send": 1, "t_ack": 1}),
    # "timestamp acks make a sender's messages stable sooner than vector acks, or later
    # than bound (2)": t2,s <= max t1 + t1,s + t_send - t_ack
    ("t1,s <= t2,s (1) and t2,s <=",
     {"t1 s1": 7, "t2 s1": 21, "t1 s2": 14, "t2 s2": 14, "t_send": 1, "t_ack": 1},
     {"t1 s1": 7, "t2 s1": 21.5, "t1 s2": 14, "t2 s2": 14, "t_send": 1, "t_ack": 1}),
    ("t1,s <= t2,s (1) and t2,s <=",
     {"t1 s1": 7, "t2 s1": 11, "t1 s2": 14, "t2 s2": 14, "t_send": 1, "t_ack": 1},
     {"t1 s1": 7, "t2 s1": 11, "t1 s2": 14, "t2 s2": 13, "t_send": 1, "t_ack": 1}),
    # "the timestamp acks' mean latency is below the vector acks' or above 1.5x it"
    ("timestamp latency only slightly larger", {"N=2 timestamp": 15, "N=2 vector": 10},
     {"N=2 timestamp": 15.1, "N=2 vector": 10}),
    # "logical clocks give a mean latency at most 1.2x the physical clocks' one"
    ("logical clocks increase the latency", {"N=2 physical": 10, "N=2 logical": 12.1},
     {"N=2 physical": 10, "N=2 logical": 12}),
    # merge: "two replicated mergers deliver ... in different orders, or a run's clocks
    # spread beyond epsilon"
    ("replicated mergers deliver in the same order",
     {"mismatches": 0, "clock spread": 4, "epsilon": 4},
     {"mismatches": 0, "clock spread": 5, "epsilon": 4}),
    ("replicated mergers deliver in the same order",
     {"mismatches": 0, "clock spread": 4, "epsilon": 4},
     {"mismatches": 1, "clock spread": 3, "epsilon": 4}),
    # "a merger holds a message longer than delta + 3 eps, or a run's clocks spread
    # beyond epsilon"
    ("buffering <= delta + 3 eps",
     {"delta=5 max": 17, "delta=5 bound": 17, "clock spread": 4, "epsilon": 4},
     {"delta=5 max": 18, "delta=5 bound": 17, "clock spread": 4, "epsilon": 4}),
    ("buffering <= delta + 3 eps",
     {"delta=5 max": 17, "delta=5 bound": 17, "clock spread": 4, "epsilon": 4},
     {"delta=5 max": 12, "delta=5 bound": 17, "clock spread": 5, "epsilon": 4}),
    # "a larger delta loses a larger share of arrivals as late"
    ("larger delta, fewer late losses", {"delta=5": 50, "delta=10": 20},
     {"delta=5": 30, "delta=10": 50}),
    # "resets or violations go on past that bound"
    ("state corrupted mid-run recovers",
     {"recovery (ticks)": 44, "eps + delta": 14, "bound 9 eps + 2 delta": 44,
      "resets": 3, "violations after recovery": 0},
     {"recovery (ticks)": 45, "eps + delta": 14, "bound 9 eps + 2 delta": 44,
      "resets": 3, "violations after recovery": 0}),
    # ours: "the refused-genuine rate rises with W or is not lower at W=8 than at W=1"
    ("a per-connection reorder window W",
     {"W=1 refused %": 2.0, "W=8 refused %": 1.0, "W=1 table B": 10, "W=8 table B": 20,
      "violations": 0},
     {"W=1 refused %": 1.0, "W=8 refused %": 1.0, "W=1 table B": 10, "W=8 table B": 20,
      "violations": 0}),
]


@pytest.mark.parametrize(("row", "inside", "named"), SAMPLES,
                         ids=[f"{i}-{s[0][:30]}" for i, s in enumerate(SAMPLES)])
def test_the_sentence_and_the_check_agree(row: str, inside: dict[str, float],
                                          named: dict[str, float]) -> None:
    assert "differs if" in _claim(row).where.lower()
    assert _check(row, inside)
    assert not _check(row, named)


def test_every_paper_is_sampled() -> None:
    sampled = {_claim(row).paper for row, _, _ in SAMPLES}
    assert sampled == {c.paper for c in CLAIMS if c.kind != "pending"}


def test_fig2_rows_on_the_scenario_runs(tmp_path: Path) -> None:
    run_scenario("stability", str(tmp_path / "st"), seed=7,
                 params={"modes": "fig2", "fig2_duration": "40"})
    runs = _scalars(tmp_path / "st")
    rows = {r.claim: r for r in evaluate([{"stability": runs}], only=["stability"])}
    vector = rows[_claim("Fig. 2, vector acks").claim]
    assert vector.verdict == "agrees", vector
    assert vector.measured.startswith("s1: 7, s2: 14, aligned s1: 6, aligned s2: 13")
    stamp = rows[_claim("Fig. 2, timestamp acks").claim]
    assert stamp.verdict == "agrees", stamp
    assert stamp.measured.startswith("s1: 10.875, tick: 0.125, aligned s1: 9")
    assert rows[_claim("t1,s <= t2,s").claim].verdict == "agrees"
    # the aligned runs are the paper's figures less the periods they never wait
    broken = {k: dict(v) for k, v in runs.items()}
    broken["fig2/vector"]["latency_max_s1"] = 7.0
    rows = {r.claim: r for r in evaluate([{"stability": broken}], only=["stability"])}
    assert rows[vector.claim].verdict.startswith("differs")


def test_merge_rows_read_the_scenario_clock_spread(tmp_path: Path) -> None:
    run_scenario("merge", str(tmp_path / "mg"), seed=8,
                 params={"duration": "3000", "deltas": "10,20"})
    runs = _scalars(tmp_path / "mg")
    spreads = {run: v["clock_spread"] for run, v in runs.items() if "clock_spread" in v}
    assert spreads and all(0 <= x <= 4 for x in spreads.values()), spreads  # eps = 4
    texts = ("replicated mergers deliver in the same order", "buffering <= delta + 3 eps")
    good: dict[str, Any] = {"merge": runs}
    for row in evaluate([good], only=["merge"]):
        if any(t in row.claim for t in texts):
            assert row.verdict == "agrees", row
            assert "clock spread" in row.measured and "epsilon: 4" in row.measured
    wide = {k: {**v, "clock_spread": 5.0} if "clock_spread" in v else v
            for k, v in runs.items()}
    for row in evaluate([{"merge": wide}], only=["merge"]):
        if any(t in row.claim for t in texts):
            assert row.verdict.startswith("differs"), row
