"""``timebound.spark.compare`` on generated arrivals with known copies and known late
genuine messages: every column of every method against the truth computed here, apart
from the library: the at-most-once rows by the literal reference receiver
(tests/atmostonce_reference.py), the watermark rows by Spark's documented rule for
``dropDuplicatesWithinWatermark`` applied micro-batch by micro-batch, and the counts
the data was built with."""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.atmostonce_reference import Options, reference_replay
from timebound.errors import SchemaError, UsageError

MESSAGES = 1_200
CONNS = 20
LATE_DELAY = 3_000  # late genuine messages: every 50th, overtaken by 30 of their conn
SOON_GAP = 2  # copies of every 10th message, 2 ticks after it
LATE_GAP = 4_000  # copies of every 25th message, 4,000 ticks after it
#: Late rows only of the messages before these: they arrive among other arrivals
#: (not in the sparse tail, where one micro-batch spans thousands of ticks).
LATE_BEFORE, COPY_BEFORE = 580, 380
RHOS = (50, 5_000)
WATERMARKS = (50, 6_000)
BATCHES = 5
SCHEMA = "user string, sent long, recv long, id string, note string"


def generated() -> list[tuple[str, int, int, str, str]]:
    """(user, sent, recv, id, note) rows: MESSAGES messages, one every 5 ticks over
    CONNS users, arriving 1-3 ticks after they were sent (every 50th before LATE_BEFORE
    LATE_DELAY after), with copies SOON_GAP ticks after every 10th and LATE_GAP ticks
    after every 25th before COPY_BEFORE (the note says which)."""
    rows = []
    for i in range(MESSAGES):
        user, sent = f"u{i % CONNS}", 1 + 5 * i
        late = i % 50 == 7 and i < LATE_BEFORE
        recv = sent + (LATE_DELAY if late else 1 + i % 3)
        rows.append((user, sent, recv, f"m{i}", "late" if late else "genuine"))
        if i % 10 == 3:
            rows.append((user, sent, recv + SOON_GAP, f"m{i}", "soon copy"))
        if i % 25 == 11 and i < COPY_BEFORE:
            rows.append((user, sent, recv + LATE_GAP, f"m{i}", "late copy"))
    return rows


ROWS = generated()
LATE_GENUINE = sum(r[4] == "late" for r in ROWS)
SOON_COPIES = sum(r[4] == "soon copy" for r in ROWS)
LATE_COPIES = sum(r[4] == "late copy" for r in ROWS)
#: Arrival order: recv, then sent, user (what compare documents; the reference's order).
ORDERED = sorted(ROWS, key=lambda r: (r[2], r[1], r[0]))


def counts(kept: list[bool]) -> dict[str, int]:
    """The counts of the rows kept (in ORDERED's order), straight from the definition."""
    seen: set[str] = set()
    copies = 0
    for row, keep in zip(ORDERED, kept, strict=True):
        if keep:
            copies += row[3] in seen
            seen.add(row[3])
    return {"kept": sum(kept), "copies_let_through": copies,
            "genuine_lost": MESSAGES - len(seen)}


def reference(options: Options) -> dict[str, Any]:
    out = reference_replay([{"type": "msg", "receiver": "r", "conn": u, "ts": s, "at": a}
                            for u, s, a, _, _ in ORDERED], options)
    return {**counts([row["verdict"] == "accepted" for row in out]),
            "state_max": max(row["entries"] for row in out),
            "rho_final": out[-1]["rho"] if options.estimator != "fixed" else None}


def watermark(column: int, delay: int) -> dict[str, Any]:
    """Spark's rule, micro-batch by micro-batch over the files compare writes (BATCHES
    runs of consecutive rows in arrival order). Event time: the row's ``column`` (2:
    recv, 1: sent) minus the smallest sent or recv, plus 1. A batch's watermark is the
    largest event time of the batches before it minus ``delay`` (0 before any). A row
    at or below the previous batch's watermark is dropped as late (Spark filters late
    rows by the watermark of the batch before, evicts by the current one); a row whose
    message is held is dropped as a duplicate; any other row is kept and its message
    held until the end of the first batch whose watermark reaches its event time plus
    ``delay``. The state held: its size after each batch."""
    base = min(min(r[1], r[2]) for r in ROWS) - 1
    size = -(-len(ORDERED) // BATCHES)
    state: dict[str, int] = {}
    kept: list[bool] = []
    held, highest, before = 0, 0, 0
    for start in range(0, len(ORDERED), size):
        mark = max(0, highest - delay) if start else 0
        for row in ORDERED[start:start + size]:
            event = row[column] - base
            keep = event > before and row[3] not in state
            if keep:
                state[row[3]] = event + delay
            kept.append(keep)
            highest = max(highest, event)
        state = {key: expires for key, expires in state.items() if expires > mark}
        held, before = max(held, len(state)), mark
    return {**counts(kept), "state_max": held, "rho_final": None}


@pytest.fixture(scope="module")
def page(tmp_path_factory: Any) -> Path:
    """Where the shared call writes its page (``report=``)."""
    return Path(tmp_path_factory.mktemp("compare")) / "page.html"


@pytest.fixture(scope="module")
def table(spark: Any, page: Path) -> Any:
    from timebound.spark import compare

    df = spark.createDataFrame(ROWS, SCHEMA)
    lines: list[str] = []
    out = compare(df, conn="user", ts="sent", at="recv", msg="id", rhos=list(RHOS),
                  reorder_windows=[1], watermarks=list(WATERMARKS), micro_batches=BATCHES,
                  progress=lines.append, report=str(page))
    assert len(lines) == len(out) + 1 and lines[0] == "compare: reading the arrivals"
    return out


def test_report_writes_the_tables_page(table: Any, page: Path) -> None:
    """``report=``: the page ``timebound compare --out`` writes, for this table."""
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and text.count("<img") >= 3
    assert f"{int(table.attrs['rows']):,} arrivals" in text


def test_report_is_checked_before_any_run(spark: Any, tmp_path: Path) -> None:
    from timebound.spark import compare

    df = spark.createDataFrame([("a", 1, 2)], "c string, s long, r long")
    for bad in (str(tmp_path / "page.txt"), str(tmp_path / "missing" / "page.html")):
        with pytest.raises(UsageError) as raised:
            compare(df, conn="c", ts="s", at="r", report=bad)
        assert raised.value.option == "report"


def row_of(table: Any, method: str, setting: int | None) -> dict[str, Any]:
    got = table[(table["method"] == method)
                & (table["setting"].isna() if setting is None
                   else table["setting"] == setting)]
    assert len(got) == 1, (method, setting, table)
    row = got.iloc[0]
    return {name: None if pd.isna(row[name]) else int(row[name])
            for name in ("kept", "copies_let_through", "genuine_lost", "state_max",
                         "rho_final")}


@pytest.mark.spark
def test_the_table_has_one_row_per_method_and_setting(table: Any) -> None:
    assert list(table.columns) == ["method", "setting", "reorder_window", "kept",
                                   "copies_let_through", "genuine_lost", "state_max",
                                   "rho_final", "seconds"]
    assert list(zip(table["method"], table["setting"].astype(object), strict=True)) == [
        ("at_most_once", 50), ("at_most_once", 5_000), ("adaptive_unlimited", pd.NA),
        ("adaptive_limited", pd.NA), ("watermark_on_arrival", 50),
        ("watermark_on_arrival", 6_000), ("watermark_on_send", 50),
        ("watermark_on_send", 6_000)]
    attrs = dict(table.attrs)
    series = attrs.pop("delays"), attrs.pop("estimates")
    assert series[0]["at"] == [r[2] for r in ORDERED]  # fewer rows than the sample
    assert series[0]["delay"] == [r[2] - r[1] for r in ORDERED]
    assert sorted(series[1]) == ["adaptive_limited", "adaptive_unlimited"]
    assert all(e["at"] == series[0]["at"] and e["rho"][-1] == row_of(table, m, None)[
        "rho_final"] for m, e in series[1].items())
    assert attrs == {"rows": len(ROWS), "messages": MESSAGES,
                           "copies": SOON_COPIES + LATE_COPIES, "micro_batches": BATCHES,
                           "gc_every_adaptive": gc_adaptive(),
                           "limited": {"window": len(ROWS) // 10, "spikes": 1, "p": 100}}


def gc_adaptive() -> int:
    """The 99th percentile delay (the nearest at or above) / 4, rounded up."""
    delays = sorted(r[2] - r[1] for r in ROWS)
    return max(1, math.ceil(delays[math.ceil(0.99 * (len(delays) - 1))] / 4))


@pytest.mark.spark
@pytest.mark.parametrize("rho", RHOS)
def test_at_most_once_matches_the_reference_and_the_data(table: Any, rho: int) -> None:
    got = row_of(table, "at_most_once", rho)
    assert got == reference(Options(rho=rho, gc_every=math.ceil(rho / 4)))
    # Known truth: every copy refused; the late genuine messages, overtaken by later
    # messages of their user, refused (SCMP's rule, reorder_window=1).
    assert got["copies_let_through"] == 0 and got["genuine_lost"] == LATE_GENUINE
    assert got["kept"] == MESSAGES - LATE_GENUINE


@pytest.mark.spark
def test_adaptive_estimators_match_the_reference(table: Any) -> None:
    unlimited = row_of(table, "adaptive_unlimited", None)
    assert unlimited == reference(Options(estimator="unlimited", gc_every=gc_adaptive()))
    limited = row_of(table, "adaptive_limited", None)
    window = min(1_000, len(ROWS) // 10)  # a tenth of the rows, spikes 1% of it
    assert limited == reference(Options(estimator="limited", window=window,
                                        spikes=window // 100, p=100))
    for got in (unlimited, limited):
        assert got["copies_let_through"] == 0 and got["rho_final"] is not None


@pytest.mark.spark
@pytest.mark.parametrize("delay", WATERMARKS)
def test_watermark_on_arrival_is_sparks_rule(table: Any, delay: int) -> None:
    got = row_of(table, "watermark_on_arrival", delay)
    assert got == watermark(2, delay)
    # Known truth: nothing is late on the arrival time; the copies 4,000 ticks after
    # their original come back once the 50-tick state is gone.
    assert got["genuine_lost"] == 0
    assert got["copies_let_through"] == (LATE_COPIES if delay == 50 else 0)


@pytest.mark.spark
@pytest.mark.parametrize("delay", WATERMARKS)
def test_watermark_on_send_is_sparks_rule(table: Any, delay: int) -> None:
    got = row_of(table, "watermark_on_send", delay)
    assert got == watermark(1, delay)
    # Known truth: late rows dropped, genuine or not, below the watermark's delay.
    assert got["copies_let_through"] == 0
    assert got["genuine_lost"] == (LATE_GENUINE if delay == 50 else 0)


# -- the defaults, the checks, the temporary folder ------------------------------------


def leftovers() -> set[str]:
    return {name for name in os.listdir(tempfile.gettempdir())
            if name.startswith("timebound-compare-")}


@pytest.mark.spark
def test_a_bare_call_takes_its_settings_from_the_delays(spark: Any,
                                                        monkeypatch: Any) -> None:
    from timebound.spark import _compare, compare

    ran: list[tuple[str, Any, Any]] = []

    def batch(self: Any, method: str, setting: Any, window: int, options: Any) -> Any:
        ran.append((method, setting, window))
        return {"method": method, "setting": setting, "reorder_window": window}

    def watermark(self: Any, method: str, column: str, delay: int, base: int) -> Any:
        ran.append((method, delay, column))
        return {"method": method, "setting": delay}

    monkeypatch.setattr(_compare._Runner, "batch", batch)
    monkeypatch.setattr(_compare._Runner, "watermark", watermark)
    rows = [("a", t, t + 1 + t % 5) for t in range(1, 200)] + [("a", 10, 400)]
    out = compare(spark.createDataFrame(rows, "c string, s long, r long"), conn="c",
                  ts="s", at="r")
    delays = sorted(r - s for _, s, r in rows)
    picks = sorted({delays[math.ceil(0.5 * 199)], delays[math.ceil(0.99 * 199)],
                    delays[-1]})
    assert picks == [3, 5, 390]
    assert ran == [*[("at_most_once", p, 8) for p in picks],
                   ("adaptive_unlimited", None, 8), ("adaptive_limited", None, 8),
                   *[("watermark_on_arrival", p, "at") for p in picks],
                   *[("watermark_on_send", p, "ts") for p in picks]]
    assert out.attrs["micro_batches"] == 4 and out.attrs["copies"] == 1
    assert out.attrs["estimates"] == {}  # the runs were not made
    assert out.attrs["gc_every_adaptive"] == 2  # the 99th percentile delay 5, / 4


@pytest.mark.spark
@pytest.mark.parametrize(("kwargs", "error", "name", "reason"), [
    ({"conn": "nope"}, SchemaError, "nope", "missing (conn=)"),
    ({"ts": "c"}, SchemaError, "c", "ts= needs an integer column"),
    ({"msg": "f"}, SchemaError, "f", "msg= needs a string or integer column"),
    ({"ts": "n"}, SchemaError, "n", "ts must not be null (1 rows)"),
    ({"rhos": [0]}, UsageError, "rhos", "every value must be an integer >= 1"),
    ({"watermarks": []}, UsageError, "watermarks", "expected a non-empty list"),
    ({"micro_batches": 0}, UsageError, "micro_batches", "expected an integer >= 1"),
    ({"receiver": 3}, UsageError, "receiver", "expected a column name"),
])
def test_bad_input_is_one_error_naming_it(spark: Any, kwargs: dict[str, Any], error: Any,
                                          name: str, reason: str) -> None:
    from timebound.spark import compare

    df = spark.createDataFrame([("a", 1, 2, 1.5, None), ("a", 2, 3, 2.5, 4)],
                               "c string, s long, r long, f double, n long")
    with pytest.raises(error) as raised:
        compare(df, **{"conn": "c", "ts": "s", "at": "r", **kwargs})
    where = raised.value.column if error is SchemaError else raised.value.option
    assert where == name and raised.value.reason.startswith(reason)


@pytest.mark.spark
@pytest.mark.parametrize("step", ["batch", "watermark"])
def test_the_folder_goes_when_a_run_fails(spark: Any, monkeypatch: Any, step: str,
                                         tmp_path: Path) -> None:
    from timebound.spark import _compare, compare

    def fail(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    if step == "watermark":
        monkeypatch.setattr(_compare._Runner, "batch", lambda *a, **k: {})
    monkeypatch.setattr(_compare._Runner, step, fail)
    # a folder of its own, which no other test's run (another worker's) writes into
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    before = leftovers()
    with pytest.raises(KeyboardInterrupt):
        compare(spark.createDataFrame([("a", 1, 2)], "c string, s long, r long"),
                conn="c", ts="s", at="r")
    assert leftovers() <= before


def test_state_of_several_receivers_is_what_they_held_together_in_one_tick() -> None:
    """Receiver 0 holds 4 entries at tick 1, then 1 at tick 3; receiver 1 holds 1 at
    tick 2, then 3 at tick 3 (2 earlier within the tick): together at most 5 (tick 1:
    4; tick 2: 4 + 1; tick 3: 1 + 3), not the 7 of their separate peaks."""
    import numpy as np
    import pyarrow as pa

    from timebound.spark._compare import Arrivals, held_together

    receiver = np.array([0, 0, 1, 1, 0, 1])
    at = np.array([1, 1, 2, 3, 3, 3])
    entries = np.array([3, 4, 1, 2, 1, 3])
    arrivals = Arrivals(receiver, at, at, np.arange(6), 6, pa.table({}))
    assert held_together(arrivals, entries) == 5
    one = Arrivals(np.zeros(6, dtype=np.int64), at, at, np.arange(6), 6, pa.table({}))
    assert held_together(one, entries) == 4
