"""A checkpoint keeps the stateful operator it was started with: a new one gets the one
the command names (``grouped``: ``applyInPandasWithState``), one started by an earlier
version keeps its own (``columnar``: ``transformWithStateInPandas``; a lock naming no
engine, or no lock: ``row``, ``transformWithState`` and the row processor) -- Spark
refuses to restart state under another operator
(STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA). The three give the same
verdict rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from timebound.stream._lock import LOCK_NAME, lock_query

OPTIONS = {"--gc-every": 50}


def test_a_fresh_checkpoint_gets_the_engine_and_keeps_it(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    assert lock_query(str(ck), "atmostonce", OPTIONS, "/in", "/out", "columnar") == "columnar"
    assert json.loads((ck / LOCK_NAME).read_text())["engine"] == "columnar"
    (ck / "offsets").mkdir()  # Spark planned a micro-batch
    assert lock_query(str(ck), "atmostonce", OPTIONS, "/in", "/out", "columnar") == "columnar"


def test_a_checkpoint_from_before_keeps_the_row_operator(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    lock_query(str(ck), "atmostonce", OPTIONS, "/in", "/out")  # as before: no engine
    (ck / "offsets").mkdir()
    assert "engine" not in json.loads((ck / LOCK_NAME).read_text())
    assert lock_query(str(ck), "atmostonce", OPTIONS, "/in", "/out", "columnar") == "row"


def test_a_started_checkpoint_without_a_lock_is_row(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    (ck / "offsets").mkdir(parents=True)
    assert lock_query(str(ck), "atmostonce", OPTIONS, "/in", "/out", "columnar") == "row"
    assert json.loads((ck / LOCK_NAME).read_text())["engine"] == "row"


def test_merge_names_no_engine(tmp_path: Path) -> None:
    assert lock_query(str(tmp_path / "ck"), "merge", {"--epsilon": 2}, "/in", "/out") is None


@pytest.mark.spark
@pytest.mark.slow
def test_grouped_and_columnar_engines_give_the_same_verdict_rows(spark: Any,
                                                                tmp_path: Path) -> None:
    """``grouped`` (``applyInPandasWithState``, a new checkpoint's) and ``columnar``
    (``transformWithStateInPandas``, the engine before it) decide the same stream, with
    crashes, hash classes and a late file, into the same rows batch by batch (``row``
    against ``columnar``: tests/test_stream_columnar.py)."""
    from tests.test_stream_atmostonce import SHUFFLE, amo_trace, options, write_files
    from timebound.spark.traces._stream_atmostonce import verdicts
    from timebound.stream._commands import _source
    from timebound.stream._run import prepare_session

    args = ["--estimator", "unlimited", "--gc-every", "16", "--resilient", "--beta", "60",
            "--latest-every", "25", "--classes", "2"]
    rows = amo_trace(3, 90, crashes=True)
    # crashes only in the first file: a late row must not reach a receiver still down
    rows = [r for i, r in enumerate(rows) if i < 30 or r["type"] != "crash"]
    files = write_files(tmp_path / "in", rows, parts=3)
    files[1].rename(files[1].with_name("zz-" + files[1].name))  # read last: a late file
    got: dict[str, list[tuple[Any, ...]]] = {}
    for engine in ("grouped", "columnar"):
        ck = str(tmp_path / f"ck-{engine}")
        prepare_session(spark, ck, SHUFFLE)
        seen: list[tuple[Any, ...]] = []

        def keep(df: Any, batch: int, seen: list[tuple[Any, ...]] = seen) -> None:
            seen.extend((batch, *r) for r in df.collect())

        query = verdicts(_source(spark, "messages", str(tmp_path / "in"), 1), options(args),
                         engine).writeStream.foreachBatch(keep) \
            .option("checkpointLocation", ck).trigger(availableNow=True).start()
        query.awaitTermination()
        got[engine] = sorted(seen, key=repr)
    assert len(got["grouped"]) >= sum(r["type"] == "msg" for r in rows)
    assert any(r[-3] for r in got["grouped"])  # late_arrival: the late file ran late
    assert {r[10] for r in got["grouped"]} >= {"accepted", "duplicate", "down"}
    assert got["grouped"] == got["columnar"]
