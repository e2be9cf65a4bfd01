"""The pubsub service's live checks (``timebound.net.live pubsub``):
live publishers -> two replicated mergers behind reordering fault proxies -> one
subscriber on each, over loopback UDP, read by the merge rows' live column
(``claims._live_pubsub``).

One quick measurement (seed 1) serves every test: its run carries the measures the
live checks read; order was at stake (the proxies reordered, the mergers got their
common messages in different orders) and the subscribers still agree (Thm 4.4); the
merger's own wait is within delta + 3 eps and the buffering measured is that wait plus
the timer's lateness. The checks fail on values that break the claims, and the causes
follow the measurements they quote.
"""

from __future__ import annotations

import pytest

import timebound.claims as claims
from timebound.claims._live_pubsub import BUFFER, CLOCK_TICKS, JOB, JOBS, LIVE, ORDER
from timebound.net._live_pubsub import (
    DELTA,
    EPSILON,
    JITTER,
    PUBLISHERS,
    QUICK_SECONDS,
    RATE,
    REORDER,
    REORDER_DELAY,
    SECONDS,
    measure,
)

Runs = dict[str, dict[str, float]]
RUN = f"publishers={PUBLISHERS}"


@pytest.fixture(scope="module")
def runs() -> Runs:
    return measure(1, True)


def _values(claim: str, runs: Runs) -> dict[str, float]:
    return {label: x for label, x, _ in LIVE[claim].measure({JOB: runs})}


def _with(runs: Runs, **changed: float) -> Runs:
    out = {k: dict(v) for k, v in runs.items()}
    out[RUN].update(changed)
    return out


def test_runs_have_what_the_checks_read(runs: Runs) -> None:
    assert JOBS == {JOB: "pubsub"}
    assert set(runs) == {RUN}
    v = runs[RUN]
    assert v["published"] > 100
    # every message reached both subscribers, less what a merger dropped as late
    for sub in ("delivered_1", "delivered_2"):
        assert v["published"] - v["late"] <= v[sub] <= v["published"], sub
    assert v["merger_delivered"] == v["delivered_1"] + v["delivered_2"]
    assert v["skipped"] == 0 and v["early"] == 0
    # order at stake: the proxies reordered and the mergers saw different orders
    assert v["proxy_reordered"] > 0
    assert v["arrival_order_differs"] > 0 and v["out_of_order_arrivals"] > 0
    assert v["clock_spread"] <= v["epsilon"] == EPSILON
    assert v["buffering_bound"] == DELTA + 3 * EPSILON
    assert 0 < v["longest_delay"]
    assert v["loop_lateness_max"] >= 0 and v["probe_every"] > 0


def test_keys_name_rows_of_the_table() -> None:
    rows = {c.claim: c for c in claims.CLAIMS}
    assert set(LIVE) == {ORDER, BUFFER}
    for claim in LIVE:
        assert claim in rows
        assert rows[claim].live is LIVE[claim]


def test_order_check_passes_on_the_live_run(runs: Runs) -> None:
    v = _values(ORDER, runs)
    assert v["mismatches"] == 0 and v["common delivered"] > 0
    assert LIVE[ORDER].check(v), v


def test_order_check_fails_on_values_that_break_the_claim(runs: Runs) -> None:
    check = LIVE[ORDER].check
    assert not check(_values(ORDER, _with(runs, order_mismatches=2)))
    # same order, but never at stake: no evidence either way
    assert not check(_values(ORDER, _with(runs, arrival_order_differs=0)))
    assert not check(_values(ORDER, _with(runs, out_of_order_arrivals=0)))
    assert not check(_values(ORDER, _with(runs, common_delivered=0)))


def test_order_cause_quotes_the_runs(runs: Runs) -> None:
    why = LIVE[ORDER].why
    assert callable(why)
    broken = _with(runs, order_mismatches=7)
    text = why([{JOB: broken}, {JOB: runs}])
    common = runs[RUN]["common_delivered"]
    assert "up to 7 positions" in text and f"{common:.0f}" in text
    assert "not at stake on 1 of 2 seeds" in why([{JOB: _with(runs, arrival_order_differs=0)},
                                                {JOB: runs}])


def test_buffering_is_the_mergers_wait_plus_its_lateness(runs: Runs) -> None:
    """The program's own wait (deadline - arrival) stays within c + delta + 2 eps under
    G1, whatever the machine's load; the buffering measured adds only how late the
    merger's timer delivered, and the check reads the buffering measured."""
    v = _values(BUFFER, runs)
    assert 0 < v["max deadline - arrival"] < v["bound"]
    assert v["max deadline - arrival"] <= v["max buffering"]
    assert v["max buffering"] <= v["max deadline - arrival"] + v["max lateness"]
    assert 0 <= v["median lateness"] <= v["max lateness"]
    assert (v["over bound"] > 0) == (v["max buffering"] > v["bound"])
    assert v["over bound"] <= v["delivered"]
    if v["max buffering"] <= v["bound"]:
        assert LIVE[BUFFER].check(v)
    on_time = _with(runs, max_buffering=runs[RUN]["max_to_deadline"], max_lateness=0)
    assert LIVE[BUFFER].check(_values(BUFFER, on_time))


def test_buffer_check_fails_on_values_that_break_the_claim(runs: Runs) -> None:
    check = LIVE[BUFFER].check
    bound = runs[RUN]["buffering_bound"]
    assert check(_values(BUFFER, _with(runs, max_buffering=bound, max_lateness=0)))
    assert not check(_values(BUFFER, _with(runs, max_buffering=bound + 1,
                                           max_to_deadline=bound + 1)))
    loop = runs[RUN]["loop_lateness_max"] + runs[RUN]["probe_every"]
    assert not check(_values(BUFFER, _with(runs, max_buffering=bound + 1,
                                           max_lateness=loop + CLOCK_TICKS + 1)))
    assert not check(_values(BUFFER, _with(runs, max_buffering=0, merger_delivered=0)))
    # outside G1: clocks further apart than epsilon
    assert not check(_values(BUFFER, _with(runs, max_buffering=0,
                                           clock_spread=EPSILON + 1)))


def test_buffer_check_forgives_only_the_loops_own_lateness(runs: Runs) -> None:
    """Past the bound by no more than a bare timer of the same loop was late (the
    machine), with the merger's wait within the bound and its deliveries on time as a
    rule: agrees. A wait past the bound, deliveries late as a rule, or later than the
    loop's own stalls: differs."""
    check = LIVE[BUFFER].check
    bound = runs[RUN]["buffering_bound"]
    machine = _with(runs, max_buffering=bound + 10, max_to_deadline=bound - 3,
                    max_lateness=13, median_lateness=1, loop_lateness_max=12.6,
                    probe_every=1)
    assert check(_values(BUFFER, machine))
    assert check(_values(BUFFER, _with(machine, max_lateness=12.6 + 1 + CLOCK_TICKS)))
    assert not check(_values(BUFFER, _with(machine, max_lateness=12.6 + 1 + CLOCK_TICKS
                                           + 0.5)))
    assert not check(_values(BUFFER, _with(machine, max_to_deadline=bound + 1)))
    assert not check(_values(BUFFER, _with(machine, median_lateness=CLOCK_TICKS + 1)))
    assert not check(_values(BUFFER, _with(machine, clock_spread=EPSILON + 1)))


def test_buffer_cause_quotes_the_runs(runs: Runs) -> None:
    why = LIVE[BUFFER].why
    assert callable(why)
    # late in bursts, as late as a bare timer of the same loop: the machine
    bound = DELTA + 3 * EPSILON
    late = _with(runs, max_buffering=bound + 25, max_to_deadline=bound - 7, max_lateness=33,
                 median_lateness=1, over_bound=3, merger_delivered=700, longest_delay=61.25,
                 loop_lateness_max=31.5, probe_every=1)
    text = why([{JOB: late}])
    assert "up to 33 ms after the deadline r + c + delta + eps (median 1 ms)" in text
    assert "for 3 of 700 deliveries" in text and f"at most {bound - 7} of {bound} ms" in text
    assert "its event loop ran the timer late" in text
    assert "woke up to 31.5 ms late" in text and "61.2 ms" in text
    # the figures are the largest over the seeds
    assert "up to 34 ms" in why([{JOB: late}, {JOB: _with(late, max_lateness=34)}])
    # later than the loop ever was: not the machine
    text = why([{JOB: _with(late, loop_lateness_max=20.0)}])
    assert "later than a bare timer in the same loop ever was (20.0 ms)" in text
    # late as a rule: the merger's deadline, not the machine
    text = why([{JOB: _with(late, median_lateness=9)}])
    assert "late as a rule" in text and "median 9 ms" in text
    assert "over the bound" in why([{JOB: _with(runs, max_to_deadline=bound + 5)}])
    assert "outside G1" in why([{JOB: _with(runs, clock_spread=EPSILON + 1)}])


def test_where_names_what_ran() -> None:
    """The rows' where states the service's sizes and faults as the live job runs them."""
    most = (JITTER + 1.5 * REORDER_DELAY) * 1000
    assert most < DELTA  # the proxies keep G2
    for live in LIVE.values():
        for text in (f"ds({EPSILON}, {DELTA}) ms", f"up to {JITTER * 1000:g} ms",
                     f"{REORDER_DELAY * 500:g}-{REORDER_DELAY * 1500:g} ms more",
                     f"at most {most:g} ms", f"{RATE:g} publications per second",
                     f"for {SECONDS:g} s ({QUICK_SECONDS:g} s with --quick)"):
            assert text in live.where, text
        assert REORDER == 0.25 and "a quarter of them" in live.where
        assert PUBLISHERS == 4 and live.where.startswith("live: four ")
