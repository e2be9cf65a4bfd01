"""One engine per protocol: a new at-most-once checkpoint gets ``grouped``
(``applyInPandasWithState``) and keeps it; a checkpoint started by a retired engine --
``columnar`` (``transformWithStateInPandas``), or ``row`` (``transformWithState``: a lock
that names no engine, or no lock at all) -- is refused in one line that says what to
do, since Spark restarts state only under the operator that wrote it. A new merge
checkpoint (``timebound stream merge`` and ``causal_merge`` on a stream) gets
``columnar`` (``transformWithStateInPandas``); one the retired ``row`` engine started is
refused the same way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from timebound.errors import UsageError
from timebound.spark import _lock as library_lock
from timebound.spark._merge_stream import ENGINE as LIBRARY_MERGE_ENGINE
from timebound.spark.traces import MERGE_ENGINE
from timebound.stream._lock import LOCK_NAME, lock_query

OPTIONS = {"--gc-every": 50}


def test_a_fresh_checkpoint_gets_the_engine_and_keeps_it(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    assert lock_query(str(ck), "atmostonce", OPTIONS, "/in", "/out", "grouped") == "grouped"
    assert json.loads((ck / LOCK_NAME).read_text())["engine"] == "grouped"
    (ck / "offsets").mkdir()  # Spark planned a micro-batch
    assert lock_query(str(ck), "atmostonce", OPTIONS, "/in", "/out", "grouped") == "grouped"


@pytest.mark.parametrize("engine", ["columnar", "row", None])
def test_a_checkpoint_of_a_retired_engine_is_refused(tmp_path: Path, engine: str | None
                                                     ) -> None:
    ck = tmp_path / "ck"
    lock_query(str(ck), "atmostonce", OPTIONS, "/in", "/out", "grouped")
    saved = json.loads((ck / LOCK_NAME).read_text())
    if engine is None:  # a lock from before there was a choice of engine
        del saved["engine"]
    else:
        saved["engine"] = engine
    (ck / LOCK_NAME).write_text(json.dumps(saved))
    (ck / "offsets").mkdir()
    with pytest.raises(UsageError) as refused:
        lock_query(str(ck), "atmostonce", OPTIONS, "/in", "/out", "grouped")
    assert refused.value.option == "--checkpoint"
    assert f"started by the '{engine or 'row'}' engine" in refused.value.reason
    assert "new --checkpoint and a new --sink" in refused.value.reason


def test_a_started_checkpoint_without_a_lock_is_refused(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    (ck / "offsets").mkdir(parents=True)
    with pytest.raises(UsageError, match="'row' engine"):
        lock_query(str(ck), "atmostonce", OPTIONS, "/in", "/out", "grouped")
    assert not (ck / LOCK_NAME).exists()


def test_a_checkpoint_that_never_ran_a_batch_takes_the_engine(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / LOCK_NAME).write_text(json.dumps({"version": 1, "protocol": "atmostonce",
                                            "options": OPTIONS, "--source": "/in",
                                            "--sink": "/out", "engine": "columnar"}))
    assert lock_query(str(ck), "atmostonce", OPTIONS, "/in", "/out", "grouped") == "grouped"


MERGE = {"--epsilon": 2, "--delta": 3, "--variant": "rckn"}


def test_a_fresh_merge_checkpoint_gets_the_columnar_engine(tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    assert MERGE_ENGINE == LIBRARY_MERGE_ENGINE == "columnar"
    assert lock_query(str(ck), "merge", MERGE, "/in", "/out", MERGE_ENGINE) == "columnar"
    assert json.loads((ck / LOCK_NAME).read_text())["engine"] == "columnar"
    (ck / "offsets").mkdir()
    assert lock_query(str(ck), "merge", MERGE, "/in", "/out", MERGE_ENGINE) == "columnar"


@pytest.mark.parametrize("lock", [True, False])
def test_a_merge_checkpoint_of_the_row_engine_is_refused(tmp_path: Path, lock: bool
                                                         ) -> None:
    """``timebound stream merge``'s row engine wrote a lock without an engine (or, before
    the lock existed, none at all)."""
    ck = tmp_path / "ck"
    (ck / "offsets").mkdir(parents=True)
    if lock:
        (ck / LOCK_NAME).write_text(json.dumps({"version": 1, "protocol": "merge",
                                                "options": MERGE, "--source": "/in",
                                                "--sink": "/out"}))
    with pytest.raises(UsageError) as refused:
        lock_query(str(ck), "merge", MERGE, "/in", "/out", MERGE_ENGINE)
    assert refused.value.option == "--checkpoint"
    assert "started by the 'row' engine" in refused.value.reason
    assert "(it runs 'columnar')" in refused.value.reason
    assert "new --checkpoint and a new --sink" in refused.value.reason


def test_a_causal_merge_checkpoint_of_the_row_engine_is_refused() -> None:
    """``causal_merge`` on a stream: the lock in the checkpoint names the engine, and a
    checkpoint the row engine started is refused before a row is decided."""
    fields = {"epsilon": 2, "delta": 3, "variant": "rckn", "timers": "processing",
              "tick_us": 1000, "merger": ["box", "string"]}
    saved = {"version": library_lock.LOCK_VERSION, "operators": [
        {"operator": "causal_merge", "fields": {**fields, "engine": "row"}}]}
    wanted = [{"operator": "causal_merge", "fields": {**fields,
                                                      "engine": LIBRARY_MERGE_ENGINE}}]
    answers, write = library_lock.check(wanted, saved, started=True)
    assert not write
    assert answers == [("engine", "this checkpoint was started with row, got columnar "
                                  "(use a new checkpoint, or the options it was started "
                                  "with)")]
    same = [{"operator": "causal_merge", "fields": {**fields, "engine": "row"}}]
    assert library_lock.check(same, saved, started=True) == ([None], False)
