"""The SCMP section 2.3 rows (slow and fast clocks) check the paper's statement inside
its hypotheses.

Small real runs of the ``scmp`` scenario's skew experiment (five runs on the same
traffic: ``clients-synced`` and the four skewed clocks), with more datagram loss than
the defaults so that the rare late message the section talks about shows up in a few
thousand messages. With the defaults' skews (behind by less than rho, ahead by less
than beta, pinned here) both rows agree; a slow skew beyond rho loses nearly every
first copy of the slow clients (outside the section); no skew at all loses nothing
more than the synchronized run, and the rows differ.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from timebound.claims import Row, evaluate
from timebound.sim import read_table, run_scenario
from timebound.sim.scenarios.scmp import PARAMS as PARAMS_OF_SCMP

#: 2,000 messages per run, 5 % loss: a message needing a retransmission arrives more
#: than rho - skew after it was stamped by a slow client.
PARAMS = {"experiments": "skew", "clients": "400", "calls": "5", "loss": "0.05"}
SKEW_RUNS = ("clients-synced", "clients-slow", "clients-fast", "server-slow", "server-fast")
CLIENT_ROW = "a slow client clock"
SERVER_ROW = "a fast server clock"


def _scalars(path: Path) -> dict[str, dict[str, float]]:
    got: dict[str, dict[str, float]] = {}
    for row in read_table(str(path), "metrics").to_pylist():
        if row["t"] is None:
            got.setdefault(row["run"], {})[row["measure"]] = row["value"]
    return got


def _run(base: Path, seed: int, **over: str) -> dict[str, dict[str, float]]:
    out = base / f"s{seed}-{'-'.join(f'{k}{v}' for k, v in sorted(over.items()))}"
    run_scenario("scmp", str(out), seed=seed, params={**PARAMS, **over})
    return _scalars(out)


def _rows(per_seed: list[dict[str, dict[str, float]]]) -> dict[str, Row]:
    rows = evaluate([{"scmp": runs} for runs in per_seed], only=["scmp"])
    return {prefix: next(r for r in rows if r.claim.startswith(prefix))
            for prefix in (CLIENT_ROW, SERVER_ROW)}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("scmp-rows")


@pytest.fixture(scope="module")
def defaults(base: Path) -> list[dict[str, dict[str, float]]]:
    return [_run(base, seed) for seed in (1, 2, 3)]


def test_skew_runs_see_the_same_traffic(defaults: list[dict[str, Any]]) -> None:
    # Common random numbers: the clocks' offsets change nothing but the verdicts, so
    # every skew run sends, loses and retransmits the same datagrams.
    for runs in defaults:
        assert set(SKEW_RUNS) <= set(runs)
        for measure in ("messages_sent", "rows", "retransmissions"):
            assert len({runs[r][measure] for r in SKEW_RUNS}) == 1, measure


def test_default_skews_are_inside_section_2_3() -> None:
    # The rows read "more likely", which holds only while a skewed clock still gets
    # some messages through: behind by more than eps and less than rho, ahead by more
    # than beta - latest_every (so that "too early" can show) and less than beta.
    d = {p.name: int(p.default) for p in PARAMS_OF_SCMP
         if p.name in ("skew", "skew_early", "rho", "epsilon", "beta", "latest_every")}
    assert d["epsilon"] < d["skew"] < d["rho"]
    assert d["beta"] - d["latest_every"] < d["skew_early"] < d["beta"]


def test_rows_agree_with_skews_inside_the_section(
        defaults: list[dict[str, dict[str, float]]]) -> None:
    rows = _rows(defaults)
    for row in rows.values():
        assert row.verdict == "agrees", (row.claim, row.measured, row.verdict)
    for runs in defaults:
        synced = runs["clients-synced"]["lost_rate"]
        # More likely, not certain: the slow half loses some first copies, not most.
        assert synced < runs["clients-slow"]["lost_rate"] < 0.25
        assert synced < runs["clients-fast"]["lost_rate"] < 0.5
        assert runs["clients-fast"].get("rows_early", 0) > 0
        assert runs["clients-synced"].get("rows_early", 0) == 0


def test_a_skew_beyond_rho_flags_every_first_copy(base: Path) -> None:
    # Outside the section (the old default, 1.5 s behind with rho = 1 s): the slow half
    # of the clients loses nearly every first copy -- certain, not "more likely".
    runs = _run(base, 1, skew="1500000")
    assert runs["clients-slow"]["lost_rate"] > 0.4  # of the 0.5 that is slow


def test_no_skew_loses_nothing_more_and_differs(base: Path) -> None:
    runs = _run(base, 1, skew="0", skew_early="0")
    assert runs["clients-slow"]["lost_rate"] == runs["clients-synced"]["lost_rate"]
    rows = _rows([runs])
    assert rows[CLIENT_ROW].verdict.startswith("differs"), rows[CLIENT_ROW]
    assert rows[SERVER_ROW].verdict.startswith("differs"), rows[SERVER_ROW]
