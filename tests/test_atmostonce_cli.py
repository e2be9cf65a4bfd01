"""``timebound replay atmostonce`` end to end through the real CLI entry point."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from timebound.cli import main

FIXED = ["--estimator", "fixed", "--rho", "100", "--gc-every", "50"]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def run(tmp_path: Path, rows: list[dict], options: list[str], out: str = "out.jsonl") -> list[dict]:
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    dst = tmp_path / out
    assert main(["replay", "atmostonce", "-i", str(src), "-o", str(dst), *options]) == 0
    if out.endswith(".parquet"):
        return pq.read_table(dst).to_pylist()
    return read_jsonl(dst)


def msg(conn: str, ts: int, at: int, receiver: str = "s1", **extra) -> dict:
    return {"type": "msg", "receiver": receiver, "conn": conn, "ts": ts, "at": at, **extra}


def test_hand_computed_fixed_trace(tmp_path: Path) -> None:
    rows = [
        msg("c1", 10, 20),     # accepted, table {c1:10}
        msg("c1", 10, 30),     # duplicate
        msg("c2", 40, 45),     # accepted
        msg("c1", 5, 60),      # out of order: duplicate
        # GC at 50 (nothing <= -50), GC at 100 (nothing <= 0), GC at 150: c1 (10), c2 (40)
        msg("c3", 30, 150),    # GC at 150 first: upper = 40 -> stale
        msg("c1", 41, 151),    # not in table, 41 > 40 -> accepted
        msg("c9", 200, 160, run=7),  # extra fields pass through
    ]
    out = run(tmp_path, rows, FIXED)
    assert [(r["verdict"], r["rho"], r["entries"]) for r in out] == [
        ("accepted", 100, 1), ("duplicate", 100, 1), ("accepted", 100, 2),
        ("duplicate", 100, 2), ("stale", 100, 0), ("accepted", 100, 1),
        ("accepted", 100, 2),
    ]
    assert out[0] == {**rows[0], "verdict": "accepted", "rho": 100, "entries": 1}
    assert out[-1]["run"] == 7


def test_resilient_crash_down_recovery_and_early(tmp_path: Path) -> None:
    options = [*FIXED, "--resilient", "--beta", "100", "--latest-every", "1000"]
    rows = [
        msg("c1", 90, 95),                      # latest = 100: accepted
        msg("c2", 150, 96),                     # 150 > latest: early
        {"type": "crash", "receiver": "s1", "at": 200, "down": 50},
        msg("c1", 90, 210),                     # down
        msg("c1", 90, 250),                     # recovered at 250: upper = 100 -> stale
        msg("c3", 300, 251),                    # latest = max(100, 250+100) = 350: accepted
        msg("c4", 351, 252),                    # early
    ]
    out = run(tmp_path, rows, options)
    assert [(r["verdict"], r["rho"], r["entries"]) for r in out] == [
        ("accepted", 100, 1), ("early", 100, 1), ("down", None, None),
        ("stale", 100, 0), ("accepted", 100, 1), ("early", 100, 1),
    ]


def test_limited_gc_runs_after_the_sth_lifetime(tmp_path: Path) -> None:
    options = ["--estimator", "limited", "--window", "3", "--spikes", "1", "--p", "1"]
    rows = [msg("a", 1, 11), msg("b", 2, 42), msg("c", 33, 43),  # lifetimes 10, 40, 10
            msg("d", 40, 44)]
    out = run(tmp_path, rows, options)
    # After the 3rd lifetime the 2nd largest is 10 > 1 -> estimate 16; the GC at 43
    # forgets a and b (<= 43 - 16), so c's row already shows 1 entry.
    assert [(r["rho"], r["entries"]) for r in out] == [(1, 1), (1, 2), (1, 1), (16, 2)]


def test_classes_split_receivers(tmp_path: Path) -> None:
    rows = [msg(f"c{i}", 10, 20) for i in range(20)]
    out = run(tmp_path, rows, [*FIXED, "--classes", "4"])
    assert all(r["verdict"] == "accepted" for r in out)
    # Entries count the class's own table, so they stay below the total.
    assert max(r["entries"] for r in out) < 20


def test_parquet_in_and_out(tmp_path: Path) -> None:
    rows = [msg("c1", 10, 20), msg("c1", 10, 30)]
    src = tmp_path / "in.parquet"
    import pyarrow as pa

    pq.write_table(pa.Table.from_pylist(rows), src)
    dst = tmp_path / "out.parquet"
    assert main(["replay", "atmostonce", "-i", str(src), "-o", str(dst), *FIXED]) == 0
    table = pq.read_table(dst)
    assert table.column("verdict").to_pylist() == ["accepted", "duplicate"]
    assert str(table.schema.field("rho").type) == "int64"


def test_stdin_to_stdout(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(msg("c", 5, 6)) + "\n"))
    assert main(["replay", "atmostonce", "-i", "-", "-o", "-", *FIXED]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "accepted"


@pytest.mark.parametrize(
    ("rows", "options", "expected"),
    [
        ([{"type": "msg", "receiver": "s1", "ts": 1, "at": 2}], FIXED, "in.jsonl:1: field 'conn': missing"),
        ([msg("c", "7", 2)], FIXED, "in.jsonl:1: field 'ts': expected an integer"),
        ([msg("c", 0, 2)], FIXED, "in.jsonl:1: field 'ts': must be >= 1"),
        ([msg("c", 1, 2), msg("c", 2, 1)], FIXED, "in.jsonl:2: field 'at': goes back in time"),
        ([{"type": "crash", "receiver": "s1", "at": 3, "down": 5}], FIXED,
         "in.jsonl:1: field 'type': crash rows need --resilient"),
        ([{"type": "nap", "receiver": "s1", "at": 3}], FIXED, "in.jsonl:1: field 'type': expected one of"),
        ([{"type": "crash", "receiver": "s1", "at": 3, "down": 5},
          {"type": "crash", "receiver": "s1", "at": 7, "down": 5}],
         [*FIXED, "--resilient", "--beta", "1", "--latest-every", "9"],
         "in.jsonl:2: field 'at': receiver 's1' is still down"),
        ([{"type": "crash", "receiver": "s1", "at": 3, "down": 0}],
         [*FIXED, "--resilient", "--beta", "1", "--latest-every", "9"],
         "in.jsonl:1: field 'down': must be >= 1"),
    ],
)
def test_bad_rows_exit_2_naming_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rows: list[dict], options: list[str], expected: str
) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    dst = tmp_path / "out.jsonl"
    dst.write_text("previous content\n")
    assert main(["replay", "atmostonce", "-i", str(src), "-o", str(dst), *options]) == 2
    err = capsys.readouterr().err.strip()
    assert expected in err and "\n" not in err
    # Never half-written: the previous file is untouched and no temporary is left.
    assert dst.read_text() == "previous content\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out.jsonl"]


def test_invalid_json_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(msg("c", 1, 2)) + "\n{oops\n")
    assert main(["replay", "atmostonce", "-i", str(src), "-o", str(tmp_path / "o.jsonl"), *FIXED]) == 2
    assert "in.jsonl:2: field '<row>': not valid JSON" in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize(
    ("options", "flag"),
    [
        (["--estimator", "fixed", "--gc-every", "5"], "--rho"),
        (["--estimator", "fixed", "--rho", "5"], "--gc-every"),
        (["--estimator", "fixed", "--rho", "0", "--gc-every", "5"], "--rho"),
        (["--estimator", "unlimited", "--gc-every", "5", "--rho", "3"], "--rho"),
        (["--estimator", "limited", "--window", "4", "--spikes", "1", "--p", "1", "--gc-every", "3"], "--gc-every"),
        (["--estimator", "limited", "--window", "4", "--spikes", "4", "--p", "1"], "--spikes"),
        (["--estimator", "limited", "--window", "4", "--spikes", "-1", "--p", "1"], "--spikes"),
        (["--estimator", "limited", "--window", "4", "--spikes", "1", "--p", "0"], "--p"),
        (["--estimator", "limited", "--window", "0", "--spikes", "0", "--p", "1"], "--window"),
        ([*FIXED, "--beta", "3"], "--beta"),
        ([*FIXED, "--resilient", "--beta", "3"], "--latest-every"),
        ([*FIXED, "--resilient", "--beta", "-1", "--latest-every", "3"], "--beta"),
        ([*FIXED, "--resilient", "--beta", "1", "--latest-every", "0"], "--latest-every"),
        ([*FIXED, "--classes", "0"], "--classes"),
        ([*FIXED, "--recovery-grace", "5"], "--recovery-grace"),
        ([*FIXED, "--resilient", "--beta", "1", "--latest-every", "3", "--recovery-grace", "-1"],
         "--recovery-grace"),
    ],
)
def test_bad_options_exit_2_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], flag: str
) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [msg("c", 1, 2)])
    assert main(["replay", "atmostonce", "-i", str(src), "-o", str(tmp_path / "o.jsonl"), *options]) == 2
    err = capsys.readouterr().err
    assert f"error: {flag}:" in err
    assert not (tmp_path / "o.jsonl").exists()


def test_unknown_output_extension(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [msg("c", 1, 2)])
    assert main(["replay", "atmostonce", "-i", str(src), "-o", str(tmp_path / "o.csv"), *FIXED]) == 2
    assert "--output:" in capsys.readouterr().err


def test_idle_gaps_cost_nothing(tmp_path: Path) -> None:
    """Times up to 10**15 with GC every tick replay as fast as small times."""
    options = ["--estimator", "unlimited", "--gc-every", "1", "--resilient", "--beta", "10",
               "--latest-every", "1"]
    small = [msg(f"c{i % 7}", 10 * i + 1, 10 * i + 5) for i in range(400)]
    huge = [msg(f"c{i % 7}", 10**12 * i + 1, 10**12 * i + 5) for i in range(400)]
    start = time.perf_counter()
    run(tmp_path, small, options, "small.jsonl")
    small_time = time.perf_counter() - start
    start = time.perf_counter()
    out = run(tmp_path, huge, options, "huge.jsonl")
    huge_time = time.perf_counter() - start
    assert len(out) == 400
    # Not a benchmark: a replay that walked 10**14 ticks would take hours.
    assert huge_time < 20 * small_time + 1.0


def test_recovery_grace_option(tmp_path: Path) -> None:
    base = ["--estimator", "fixed", "--rho", "10", "--gc-every", "5", "--resilient",
            "--beta", "20", "--latest-every", "100"]
    rows = [{"type": "crash", "receiver": "s1", "at": 1, "down": 99},   # recovers at 100
            msg("new", 110, 101), msg("old", 60, 130)]
    # Without a pause the GC at 125 forgets "new" (upper = 110): "old" is stale.
    assert [r["verdict"] for r in run(tmp_path, rows, base)] == ["accepted", "stale"]
    graced = run(tmp_path, rows, [*base, "--recovery-grace", "50"], "g.jsonl")
    assert [r["verdict"] for r in graced] == ["accepted", "accepted"]
