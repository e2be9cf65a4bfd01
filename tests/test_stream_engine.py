"""One engine: a new at-most-once checkpoint gets ``grouped`` (``applyInPandasWithState``)
and keeps it; a checkpoint started by a retired engine -- ``columnar``
(``transformWithStateInPandas``), or ``row`` (``transformWithState``: a lock that names
no engine, or no lock at all) -- is refused in one line that says what to do, since
Spark restarts state only under the operator that wrote it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from timebound.errors import UsageError
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


def test_merge_names_no_engine(tmp_path: Path) -> None:
    assert lock_query(str(tmp_path / "ck"), "merge", {"--epsilon": 2}, "/in", "/out") is None
