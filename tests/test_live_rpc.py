"""The live check ``rpc``: at-most-once RPC under loss, duplication
and a SIGKILL of the server, run once at the quick size (a server process, killed
and restarted, behind a FaultProxy), and the two SCMP rows it checks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import timebound.claims as claims
from timebound.claims import Live, Runs
from timebound.net import _live_rpc, live

DUPLICATE_ROW = "no duplicate accepted, whatever rho or the clocks (2.3)"
CRASH_ROW = ("after a crash, all messages sent after t_cr + beta are accepted, if GC waits "
             "for pending messages after the restart (2.4)")


def _children() -> list[int]:
    """Processes whose parent is this one."""
    me, out = os.getpid(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == me:
                out.append(int(entry))
    return out


@pytest.fixture(scope="module")
def runs() -> Runs:
    before = set(_children())
    measured = live.measure("rpc", 1, quick=True)
    assert set(_children()) <= before, "a server process outlived the check"
    return measured


def _row(claim: str) -> Live:
    (found,) = [c.live for c in claims.CLAIMS if c.claim == claim]
    assert found is not None
    return found


def _values(row: Live, runs: Runs) -> dict[str, float]:
    return {label: value for label, value, _ in row.measure({row.job: runs})}


def _changed(runs: Runs, run: str, **measures: float) -> Runs:
    return {name: {**values, **(measures if name == run else {})}
            for name, values in runs.items()}


def test_runs_hold_what_the_rows_read(runs: Runs) -> None:
    assert set(runs) == {"loss", "kill", claims.LATENESS.run}
    runs = {k: v for k, v in runs.items() if k != claims.LATENESS.run}
    for name in ("calls", "answered", "timeouts", "refused", "executions", "duplicates",
                 "answered_not_run_once", "datagrams_lost", "datagrams_duplicated",
                 "server_duplicates"):
        assert all(name in runs[run] for run in runs), name
    for name in ("restart_s", "beta_s", "refused_down", "sent_after_crash_beta",
                 "refused_after_crash_beta", "answered_after_crash_beta"):
        assert name in runs["kill"], name
    # The faults happened: the proxy dropped and duplicated datagrams in both runs, and
    # every outcome is counted once.
    for values in runs.values():
        assert values["datagrams_lost"] > 0 and values["datagrams_duplicated"] > 0
        assert values["answered"] + values["timeouts"] + values["refused"] == values["calls"]
        # an answered call ran; a timeout or a refusal may have run (at most once)
        assert values["answered"] <= values["executions"] <= values["calls"]
    assert runs["loss"]["refused"] == 0  # no crash yet: nothing refused
    assert 0 < runs["kill"]["restart_s"] < runs["kill"]["beta_s"]


def test_duplicate_row_agrees_and_can_fail(runs: Runs) -> None:
    row = _row(DUPLICATE_ROW)
    assert row.job in claims.LIVE_JOBS and claims.LIVE_JOBS[row.job] == "rpc"
    values = _values(row, runs)
    assert values["duplicates"] == 0 and values["answered not run once"] == 0
    assert row.check(values)
    # A call run twice, or an answered call missing from the ledger: differs.
    assert not row.check(_values(row, _changed(runs, "kill", duplicates=1)))
    assert not row.check(_values(row, _changed(runs, "loss", answered_not_run_once=1)))
    # A run that could not show a duplicate: differs too.
    no_dups = _changed(_changed(runs, "loss", datagrams_duplicated=0), "kill",
                       datagrams_duplicated=0)
    assert not row.check(_values(row, no_dups))
    uncaught = _changed(_changed(runs, "loss", server_duplicates=0), "kill",
                        server_duplicates=0)
    assert not row.check(_values(row, uncaught))


def test_crash_row_agrees_and_can_fail(runs: Runs) -> None:
    row = _row(CRASH_ROW)
    values = _values(row, runs)
    assert values["refused after t_cr + beta"] == 0 and values["of"] > 0
    assert values["refused down (recovered bound)"] > 0
    assert row.check(values)
    assert not row.check(_values(row, _changed(runs, "kill", refused_after_crash_beta=1)))
    assert not row.check(_values(row, _changed(runs, "kill", sent_after_crash_beta=0)))
    assert not row.check(_values(row, _changed(runs, "kill", refused_down=0)))


def test_table_judges_both_rows_live(runs: Runs) -> None:
    # the checks on these runs (their lateness, this machine's, left out: its rule is
    # tests/test_claims_live_lateness.py's)
    runs = {k: v for k, v in runs.items() if k != claims.LATENESS.run}
    rows = {r.claim: r for r in claims.evaluate([{"live-rpc": runs}] * 3)}
    for claim in (DUPLICATE_ROW, CRASH_ROW):
        assert rows[claim].live_verdict == "agrees" and rows[claim].live_seeds == 3
    broken = _changed(runs, "kill", duplicates=2)
    rows = {r.claim: r for r in claims.evaluate([{"live-rpc": runs}, {"live-rpc": broken},
                                                  {"live-rpc": runs}])}
    assert rows[DUPLICATE_ROW].live_verdict.startswith("differs (2 of 3 seeds agree)")


def test_where_quotes_the_sizes_that_ran() -> None:
    """The rows' ``where`` states the sizes and faults of ``timebound.net._live_rpc``."""
    full, quick = _live_rpc.FULL, _live_rpc.QUICK
    quoted = [f"losing {_live_rpc.LOSS:.0%}", f"duplicating {_live_rpc.DUPLICATE:.0%}",
              f"{full.callers} callers ({quick.callers} with --quick)",
              f"SIGKILL after {full.before_kill:g} s ({quick.before_kill:g} s)",
              f"beta {full.beta_us / 1e6:g} s ({quick.beta_us / 1e6:g} s)",
              f"until {full.after:g} s ({quick.after:g} s) past t_cr + beta"]
    for claim in (DUPLICATE_ROW, CRASH_ROW):
        where = _row(claim).where
        assert all(text in where for text in quoted), (where, quoted)
