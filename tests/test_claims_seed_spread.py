"""The slotted paper's section 6.1 row: runs with different seeds within 4% of each
other, measured as the spread across the seeds, (max - min) / mean, of each scheme's FR
delivery delay and mean queue at each slot length, and judged on the seeds together.

On made-up per-seed runs: a spread within 4% agrees, one beyond it differs with a
cause that names the measure, the scheme, the slot length, the spread and the seeds'
values; one seed gives no spread to judge.
"""

from __future__ import annotations

import pytest

from timebound.claims import CLAIMS, Row, evaluate
from timebound.claims._slotted import SEED_SPREAD_CLAIM, seed_spreads

SLOTS = (2000, 20000)


def _runs(fr: float = 75.0, queue: float = 20.0,
          odd: tuple[str, int, str, float] | None = None) -> dict[str, dict[str, float]]:
    """One seed's slotted runs of (a)-(d); ``odd``: (scheme, slot, measure, value) set
    apart from the rest."""
    runs = {f"{x}/Ts={t}": {"fr_delay_ms": fr, "queue_mean": queue}
            for x in "abcd" for t in SLOTS}
    if odd is not None:
        x, t, measure, value = odd
        runs[f"{x}/Ts={t}"][measure] = value
    return runs


def _row(seeds: list[dict[str, dict[str, dict[str, float]]]]) -> Row:
    [row] = [r for r in evaluate(seeds, only=["slotted"]) if r.claim == SEED_SPREAD_CLAIM]
    return row


def test_the_spread_is_max_minus_min_over_the_mean() -> None:
    share, xs = seed_spreads([[("q", 95.0, ".1f")], [("q", 100.0, ".1f")],
                              [("q", 105.0, ".1f")]])["q"]
    assert share == pytest.approx(0.1) and xs == [95.0, 100.0, 105.0]
    assert seed_spreads([[("q", 0.0, ".1f")], [("q", 0.0, ".1f")]])["q"][0] == 0.0
    assert seed_spreads([[("q", -1.0, ".1f")], [("q", 1.0, ".1f")]])["q"][0] == float("inf")


def test_a_spread_within_four_percent_agrees() -> None:
    # FR delay 73.5-76.5 ms: (76.5 - 73.5) / 75 = 4%, the bound itself
    seeds = [{"slotted": _runs(fr=fr, queue=q)}
             for fr, q in ((73.5, 19.8), (75.0, 20.0), (76.5, 20.2))]
    row = _row(seeds)
    assert row.verdict == "agrees", row.verdict
    assert row.seeds == 3
    assert "(a) FR delay max %: 4.0" in row.measured
    assert "(d) queue max %: 2.0" in row.measured


def test_a_spread_beyond_four_percent_differs_and_the_cause_names_it() -> None:
    # (b)'s queue at 20 ms: 19, 20, 21 over the seeds -> 10% spread; the rest flat
    seeds = [{"slotted": _runs(odd=("b", 20000, "queue_mean", q))} for q in (19.0, 20.0, 21.0)]
    row = _row(seeds)
    assert row.verdict.startswith("differs (on the 3 seeds together): "), row.verdict
    assert "(b) queue max %: 10.0" in row.measured
    assert "(a) queue max %: 0.0" in row.measured
    assert ("1 of 16 measures (FR delay and mean queue per scheme and slot length) spread "
            "more than the paper's 4%; the widest of each scheme's measure: ") in row.verdict
    assert ("(b) queue 20 ms spreads 10.0% across the 3 seeds (19.00-21.00, mean 20.00)"
            in row.verdict), row.verdict
    assert "FR delay" not in row.verdict.split(": ", 2)[2]  # only the measure beyond


def test_the_widest_spread_is_named_first() -> None:
    seeds = [{"slotted": {**_runs(), "c/Ts=2000": {"fr_delay_ms": fr, "queue_mean": q}}}
             for fr, q in ((30.0, 10.0), (33.0, 11.0), (36.0, 10.5))]
    verdict = _row(seeds).verdict
    assert verdict.index("(c) FR delay 2 ms spreads 18.2%") < verdict.index(
        "(c) queue 2 ms spreads 9.5%"), verdict


def test_each_schemes_measure_is_named_once_at_its_widest() -> None:
    # (a)'s FR delay spreads 8% at 2 ms and 12% at 20 ms: both counted, 20 ms named
    seeds = [{"slotted": {**_runs(), "a/Ts=2000": {"fr_delay_ms": x, "queue_mean": 20.0},
                          "a/Ts=20000": {"fr_delay_ms": y, "queue_mean": 20.0}}}
             for x, y in ((72.0, 70.5), (75.0, 75.0), (78.0, 79.5))]
    verdict = _row(seeds).verdict
    assert "2 of 16 measures" in verdict, verdict
    assert "(a) FR delay 20 ms spreads 12.0% across the 3 seeds (70.50-79.50" in verdict
    assert "(a) FR delay 2 ms" not in verdict


def test_one_seed_has_no_spread_to_judge() -> None:
    row = _row([{"slotted": _runs()}])
    assert row.verdict.startswith("not measured here (a spread across seeds"), row.verdict


def test_the_row_is_judged_on_the_seeds_together() -> None:
    [claim] = [c for c in CLAIMS if c.claim == SEED_SPREAD_CLAIM]
    assert claim.across is not None and claim.paper == "slotted"
