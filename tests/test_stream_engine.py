"""A checkpoint keeps the stateful operator it was started with: a new one gets the
column-wise ``transformWithStateInPandas`` (``columnar``), one started before it (a lock
naming no engine, or no lock) keeps ``transformWithState`` and the row processor
(``row``) -- Spark refuses to restart state under another operator
(STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA)."""

from __future__ import annotations

import json
from pathlib import Path

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
