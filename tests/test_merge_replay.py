"""``timebound replay merge`` through the real CLI entry point, against hand-computed
outputs and against a plain reference reading of the contract in docs/replay-merge.md."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.test_causal_replay import read_jsonl, write_jsonl
from timebound.cli import main

ROWS = [
    {"merger": "M1", "msg": "m2", "proc": "p2", "at": 5, "r": 4, "c": 0, "kn": [1, 1, 1, 0]},
    {"merger": "M2", "msg": "m1", "proc": "p1", "at": 4, "r": 3, "c": 0, "kn": [1, 0, 1, 0]},
    {"merger": "M1", "msg": "m1", "proc": "p1", "at": 5, "r": 3, "c": 0, "kn": [1, 0, 1, 0]},
    {"merger": "M1", "msg": "m1", "proc": "p1", "at": 6, "r": 3, "c": 0, "kn": [1, 0, 1, 0]},
    {"merger": "M1", "msg": "m0", "proc": "p1", "at": 9, "r": 1, "c": 0, "kn": [0, 1, 1, 0]},
    {"merger": "M1", "msg": "m3", "proc": "p3", "at": 9, "r": 3, "c": 1, "kn": [0, 1, 1, 1]},
]
# ε = 2, δ = 3: deadlines m2 9, m1 8, m0 6 (late at 9), m3 9 (kn[c] 1 < m2's kn[c] 1?
# equal: kn[c-1] 1 == 1, then proc p2 < p3)
EXPECTED = [
    {"merger": "M1", "msg": "m1", "proc": "p1", "action": "duplicate", "time": 6},
    {"merger": "M1", "msg": "m1", "proc": "p1", "action": "deliver", "time": 8},
    {"merger": "M1", "msg": "m0", "proc": "p1", "action": "late", "time": 9},
    {"merger": "M1", "msg": "m2", "proc": "p2", "action": "deliver", "time": 9},
    {"merger": "M1", "msg": "m3", "proc": "p3", "action": "deliver", "time": 9},
    {"merger": "M2", "msg": "m1", "proc": "p1", "action": "deliver", "time": 8},
]


def replay(inp: Path, out: Path, *opts: str) -> int:
    return main(["replay", "merge", "--input", str(inp), "--output", str(out), *opts])


def test_hand_computed(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    assert replay(write_jsonl(tmp_path / "in.jsonl", ROWS), out,
                  "--epsilon", "2", "--delta", "3") == 0
    assert read_jsonl(out) == EXPECTED


def test_rc_parquet_both_ways(tmp_path: Path) -> None:
    src = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist([{k: v for k, v in r.items() if k != "kn"}
                                         for r in ROWS]), src)  # every row has every key
    out = tmp_path / "out.parquet"
    assert replay(src, out, "--epsilon", "2", "--delta", "3", "--variant", "rc") == 0
    got = pq.read_table(out).to_pylist()
    # rc: equal deadlines by r: m3 (r 3) before m2 (r 4)
    assert [(r["msg"], r["action"], r["time"]) for r in got] == [
        ("m1", "duplicate", 6), ("m1", "deliver", 8), ("m0", "late", 9),
        ("m3", "deliver", 9), ("m2", "deliver", 9), ("m1", "deliver", 8)]


def reference(rows: list[dict[str, object]], eps: int, delta: int, rc: bool) -> list[dict[str, object]]:
    """The contract, read plainly: per merger, per distinct time T in order."""
    out: list[dict[str, object]] = []
    names = list(dict.fromkeys(r["merger"] for r in rows))
    for name in names:
        mine = [r for r in rows if r["merger"] == name]
        buffered: list[tuple[object, ...]] = []
        seen: set[tuple[object, object]] = set()

        def key(r: dict[str, object]) -> tuple[object, ...]:
            d = r["r"] + r["c"] + delta + eps  # type: ignore[operator]
            if rc:
                tie: tuple[int, ...] = (r["r"],)  # type: ignore[assignment]
            else:
                kn, c = r["kn"], r["c"]
                tie = tuple(kn[c - k + eps] if 0 <= c - k + eps < 2 * eps else 0  # type: ignore[index,operator]
                            for k in range(eps))
            return (d, tie, r["proc"], r["msg"])

        def deliver(cond, name=name) -> None:  # type: ignore[no-untyped-def]
            nonlocal buffered
            due = sorted(k for k in buffered if cond(k[0]))
            buffered = [k for k in buffered if not cond(k[0])]
            out.extend({"merger": name, "msg": k[3], "proc": k[2], "action": "deliver",
                        "time": k[0]} for k in due)

        for T in sorted({r["at"] for r in mine}):  # type: ignore[type-var]
            deliver(lambda d, T=T: d < T)
            for r in (r for r in mine if r["at"] == T):
                k = key(r)
                if k[0] < T:  # type: ignore[operator]
                    out.append({"merger": name, "msg": r["msg"], "proc": r["proc"],
                                "action": "late", "time": T})
                elif (r["proc"], r["msg"]) in seen:
                    out.append({"merger": name, "msg": r["msg"], "proc": r["proc"],
                                "action": "duplicate", "time": T})
                else:
                    seen.add((r["proc"], r["msg"]))
                    buffered.append(k)
            deliver(lambda d, T=T: d == T)
        deliver(lambda d: True)
    return out


@st.composite
def traces(draw: st.DrawFn) -> tuple[list[dict[str, object]], int, int, bool]:
    eps = draw(st.integers(1, 3))
    delta = draw(st.integers(0, 4))
    rc = draw(st.booleans())
    rng = random.Random(draw(st.integers(0, 2**32)))
    rows = []
    clocks = {m: 0 for m in ("A", "B", "C")}
    for _ in range(draw(st.integers(0, 40))):
        m = rng.choice("ABC")
        clocks[m] += rng.choice((0, 0, 1, 2))
        row = {"merger": m, "msg": f"m{rng.randrange(8)}", "proc": f"p{rng.randrange(3)}",
               "at": clocks[m], "r": max(0, clocks[m] + rng.randint(-6, 2)),
               "c": rng.randint(0, eps + 1)}  # corrupt values too (negative ones are bad rows)
        if not rc:
            row["kn"] = [rng.randint(0, 3) for _ in range(2 * eps)]
        rows.append(row)
    return rows, eps, delta, rc


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(traces())
def test_matches_the_plain_reading_of_the_contract(
    tmp_path: Path, case: tuple[list[dict[str, object]], int, int, bool]
) -> None:
    rows, eps, delta, rc = case
    out = tmp_path / "out.jsonl"
    opts = ["--epsilon", str(eps), "--delta", str(delta)] + (["--variant", "rc"] if rc else [])
    assert replay(write_jsonl(tmp_path / "in.jsonl", rows), out, *opts) == 0
    assert read_jsonl(out) == reference(rows, eps, delta, rc)


BAD = [
    ([ROWS[0], dict(ROWS[0], at=4)], 2, "at", "backwards"),
    ([dict(ROWS[0], kn=[1, 2])], 1, "kn", "expected 4 integers"),
    ([{k: v for k, v in ROWS[0].items() if k != "kn"}], 1, "kn", "missing"),
    ([dict(ROWS[0], r="4")], 1, "r", "integer"),
    ([dict(ROWS[0], merger="")], 1, "merger", "non-empty"),
    ([{k: v for k, v in ROWS[0].items() if k != "c"}], 1, "c", "missing"),
]


@pytest.mark.parametrize(("rows", "line", "field", "reason"), BAD)
def test_bad_rows_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                         rows: list[dict[str, object]], line: int, field: str,
                         reason: str) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    assert replay(src, tmp_path / "out.parquet", "--epsilon", "2", "--delta", "3") == 2
    err = capsys.readouterr().err
    assert f"{src}:{line}: field '{field}'" in err and reason in err
    assert list(tmp_path.iterdir()) == [src]


@pytest.mark.parametrize(("opts", "option"), [
    (["--delta", "3"], "--epsilon"), (["--epsilon", "2"], "--delta"),
    (["--epsilon", "0", "--delta", "3"], "--epsilon"),
    (["--epsilon", "2", "--delta", "-1"], "--delta"),
])
def test_bad_options_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                            opts: list[str], option: str) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", ROWS)
    assert replay(src, tmp_path / "out.jsonl", *opts) == 2
    assert option in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [src]


def test_example_runs_and_shows_every_action(tmp_path: Path) -> None:
    from timebound.demo import example_path

    out = tmp_path / "out.jsonl"
    assert main(["replay", "merge", "--input", example_path("merge.jsonl"), "--output",
                 str(out), "--epsilon", "2", "--delta", "3"]) == 0
    actions = {row["action"] for row in read_jsonl(out)}
    assert actions == {"deliver", "late", "duplicate"}
    json.dumps(actions, default=list)
