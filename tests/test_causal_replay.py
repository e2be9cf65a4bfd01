"""``timebound replay causal`` through the real CLI entry point."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.test_causal_execution import Execution, executions, simulate
from timebound.cli import main

TRACE = [
    {"type": "local", "proc": "p1", "rt": 1},
    {"type": "send", "proc": "p1", "rt": 3, "msg": "m1"},
    {"type": "recv", "proc": "p2", "rt": 2, "msg": "m1", "run": 7},
    {"type": "send", "proc": "p2", "rt": 4, "msg": "m2"},
    {"type": "recv", "proc": "p1", "rt": 5, "msg": "m2"},
]
# hand-computed with Fig. 1, ε = 2 (kn offsets -2..1)
RCKN = [((1, 0), [0, 1, 1, 0]), ((3, 0), [1, 0, 1, 0]), ((2, 1), [1, 1, 1, 1]),
        ((4, 0), [1, 1, 1, 0]), ((5, 0), [1, 1, 1, 0])]
RC = [(1, 0), (3, 0), (2, 2), (4, 0), (5, 0)]


def write_jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def replay(inp: Path, out: Path, *opts: str) -> int:
    return main(["replay", "causal", "--input", str(inp), "--output", str(out), *opts])


def test_rckn_hand_computed(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    assert replay(write_jsonl(tmp_path / "in.jsonl", TRACE), out, "--epsilon", "2") == 0
    rows = read_jsonl(out)
    assert rows == [dict(row, r=r, c=c, kn=kn) for row, ((r, c), kn) in zip(TRACE, RCKN, strict=True)]


def test_rc_hand_computed_and_parquet_both_ways(tmp_path: Path) -> None:
    src = tmp_path / "in.parquet"
    schema = pa.schema([("type", pa.string()), ("proc", pa.string()), ("rt", pa.int64()),
                        ("msg", pa.string()), ("run", pa.int64())])
    pq.write_table(pa.Table.from_pylist(TRACE, schema=schema), src)
    out = tmp_path / "out.parquet"
    assert replay(src, out, "--epsilon", "2", "--variant", "rc") == 0
    rows = pq.read_table(out).to_pylist()
    assert [(row["r"], row["c"]) for row in rows] == RC
    assert "kn" not in rows[0]
    assert [row["msg"] for row in rows] == [None, "m1", "m1", "m2", "m2"]


def test_reset_shows_on_the_triggering_row(tmp_path: Path) -> None:
    trace = [{"type": "send", "proc": "a", "rt": 9, "msg": "x"},
             {"type": "recv", "proc": "b", "rt": 3, "msg": "x"}]  # 9 + 0 >= 3 + 4
    out = tmp_path / "out.jsonl"
    assert replay(write_jsonl(tmp_path / "in.jsonl", trace), out, "--epsilon", "4") == 0
    assert read_jsonl(out)[1] == dict(trace[1], r=3, c=0, kn=[0, 0, 0, 0, 1, 0, 0, 0])


def _stamps(ex: Execution) -> list[tuple[int, int, list[int]]]:
    return [(e.stamp.r, e.stamp.c, list(e.stamp.kn)) for e in ex.events]


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=25)
@given(executions())
def test_guarantee_keeping_traces_never_reset_and_match_the_core(
    tmp_path: Path, ex: Execution
) -> None:
    """Every recv keeps r.m + c.m < rt + E (the generator's promise): no reset, and the
    replay gives the timestamps the processes computed (the default n and --n = the
    process count agree, as the replay module's docstring argues)."""
    src = write_jsonl(tmp_path / "in.jsonl", ex.rows())
    out = tmp_path / "out.jsonl"
    assert replay(src, out, "--epsilon", str(ex.epsilon)) == 0
    rows = read_jsonl(out)
    assert [(r["r"], r["c"], r["kn"]) for r in rows] == _stamps(ex)
    assert not any(e.reset for e in ex.events)
    procs = len({e.proc for e in ex.events})
    if procs:
        assert replay(src, out, "--epsilon", str(ex.epsilon), "--n", str(procs)) == 0
        assert read_jsonl(out) == rows


def test_default_n_equals_process_count() -> None:
    # the property above, pinned on one larger run so it is never vacuous
    ex = simulate(random.Random(3), 3, 4, 6, 80)
    assert len(ex.events) > 100
    assert all(max(e.stamp.kn) <= len({f.proc for f in ex.events}) for e in ex.events)


BAD = [
    ([{"type": "local", "proc": "p", "rt": 2}, {"type": "local", "proc": "p", "rt": 2}],
     2, "rt", "must increase"),
    ([{"type": "local", "proc": "p", "rt": 0}], 1, "rt", ">= 1"),
    ([{"type": "recv", "proc": "p", "rt": 1, "msg": "zz"}], 1, "msg", "never sent"),
    ([{"type": "send", "proc": "p", "rt": 1, "msg": "m"},
      {"type": "recv", "proc": "q", "rt": 1, "msg": "m"},
      {"type": "recv", "proc": "q", "rt": 2, "msg": "m"}], 3, "msg", "already received"),
    ([{"type": "send", "proc": "p", "rt": 1, "msg": "m"},
      {"type": "send", "proc": "q", "rt": 1, "msg": "m"}], 2, "msg", "already sent"),
    ([{"type": "send", "proc": "p", "rt": 1}], 1, "msg", "missing"),
    ([{"type": "jump", "proc": "p", "rt": 1}], 1, "type", "expected one of"),
    ([{"type": "local", "proc": "p", "rt": "1"}], 1, "rt", "integer"),
    ([{"type": "local", "rt": 1}], 1, "proc", "missing"),
]


@pytest.mark.parametrize(("rows", "line", "field", "reason"), BAD)
def test_bad_rows_exit_2_naming_file_line_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rows: list[dict[str, object]],
    line: int, field: str, reason: str,
) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out.jsonl"
    assert replay(src, out, "--epsilon", "2") == 2
    err = capsys.readouterr().err
    assert f"{src}:{line}: field '{field}'" in err and reason in err
    assert list(tmp_path.iterdir()) == [src]  # no output, no temporary left


@pytest.mark.parametrize(("opts", "option"), [
    ([], "--epsilon"), (["--epsilon", "0"], "--epsilon"),
    (["--epsilon", "2", "--n", "0"], "--n"),
    (["--epsilon", "2", "--variant", "rc", "--n", "3"], "--n"),
])
def test_bad_options_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                            opts: list[str], option: str) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", TRACE)
    assert replay(src, tmp_path / "out.jsonl", *opts) == 2
    assert option in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [src]


def test_small_n_triggers_lemma_3_4_reset(tmp_path: Path) -> None:
    trace = [{"type": "send", "proc": "a", "rt": 1, "msg": "x"},
             {"type": "recv", "proc": "b", "rt": 1, "msg": "x"}]  # kn[0] = 2 > n = 1
    out = tmp_path / "out.jsonl"
    assert replay(write_jsonl(tmp_path / "in.jsonl", trace), out, "--epsilon", "1",
                  "--n", "1") == 0
    assert read_jsonl(out)[1]["kn"] == [0, 1]
    assert replay(tmp_path / "in.jsonl", out, "--epsilon", "1") == 0
    assert read_jsonl(out)[1]["kn"] == [1, 2]


@given(st.integers(1, 3))
def test_example_runs(eps: int) -> None:
    from timebound.demo import example_path

    assert main(["replay", "causal", "--input", example_path("causal.jsonl"),
                 "--output", "-", "--epsilon", str(eps)]) == 0
