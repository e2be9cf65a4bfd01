"""The record-batch path of ``timebound replay atmostonce`` (replay/_batch.py) writes
exactly what the row path writes, Parquet -> Parquet, on generated traces: every
estimator, plain and resilient (crash rows), hash classes, reorder windows, several
receivers, batch boundaries anywhere (tiny batches), a ``down`` value carried by a
message row (the output's column order), malformed rows and time going back (the same
one-line error, nothing written)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.test_atmostonce_replay_matches_reference import options, traces
from tests.test_pipeline_fastpath import spoiled
from tests.test_safety_outputs import sigterm_mid_replay
from timebound.cli import main
from timebound.errors import TraceError
from timebound.replay import _batch, replay_rows
from timebound.replay.atmostonce import COMMAND

SCHEMA = pa.schema([("type", pa.string()), ("receiver", pa.string()), ("conn", pa.string()),
                    ("ts", pa.int64()), ("at", pa.int64()), ("down", pa.int64())])
OPTIONS = ("estimator", "rho", "gc_every", "window", "spikes", "p", "resilient", "beta",
           "latest_every", "recovery_grace", "classes")


def namespace(o: Any, src: Path, dst: Path, reorder: int | None) -> argparse.Namespace:
    values = {name: getattr(o, name) for name in OPTIONS}
    return argparse.Namespace(input=str(src), output=str(dst), stats=False,
                              reorder_window=reorder, **values)


def run(args: argparse.Namespace, batch_rows: int | None) -> tuple[Any, ...]:
    """(schema, rows, summary) of the output, or the error line; None: row path."""
    try:
        if batch_rows is None:
            adapter: Any = replay_rows(COMMAND, args, fast=False)
        else:
            adapter = COMMAND.build(args)
            assert _batch.applies(adapter, args.input, args.output)
            _batch.replay_parquet(adapter, args.input, args.output, batch_rows=batch_rows)
    except TraceError as exc:
        assert not os.path.exists(args.output)
        assert os.listdir(os.path.dirname(args.output)) == []  # no temporary file left
        return ("error", str(exc))
    table = pq.read_table(args.output)
    os.unlink(args.output)
    return (table.schema, table.to_pylist(), adapter.summary())


@given(data=st.data())
def test_batch_path_equals_row_path(data: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    o = data.draw(options())
    rows = data.draw(spoiled(data.draw(traces(o.resilient))))
    messages = [i for i, r in enumerate(rows) if r["type"] == "msg"]
    if messages and data.draw(st.integers(0, 3)) == 0:
        # a message row carrying `down`: the output gains the column (where it first came)
        rows[data.draw(st.sampled_from(messages))]["down"] = data.draw(st.integers(1, 9))
    reorder = data.draw(st.sampled_from([None, None, 1, 3]))
    batch_rows = data.draw(st.integers(1, 8))
    folder = tmp_path_factory.mktemp("trace")
    src, out = folder / "trace.parquet", tmp_path_factory.mktemp("out") / "out.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), src)
    args = namespace(o, src, out, reorder)
    assert run(args, batch_rows) == run(args, None)


def test_only_plain_parquet_takes_the_batch_path(tmp_path: Path) -> None:
    rows = [{"type": "msg", "receiver": "s", "conn": "c", "ts": 1, "at": 2}]
    plain, extra = tmp_path / "plain.parquet", tmp_path / "extra.parquet"
    pq.write_table(pa.Table.from_pylist(rows), plain)
    pq.write_table(pa.Table.from_pylist([dict(rows[0], note="x")]), extra)
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text('{"type":"msg","receiver":"s","conn":"c","ts":1,"at":2}\n')
    args = argparse.Namespace(estimator="unlimited", gc_every=10, classes=None)
    adapter = COMMAND.build(argparse.Namespace(
        **vars(args), rho=None, window=None, spikes=None, p=None, resilient=False, beta=None,
        latest_every=None, recovery_grace=None, reorder_window=None))
    out = str(tmp_path / "o.parquet")
    assert _batch.applies(adapter, str(plain), out)
    assert not _batch.applies(adapter, str(extra), out)  # a pass-through column: row path
    assert not _batch.applies(adapter, str(jsonl), out)
    assert not _batch.applies(adapter, str(plain), str(tmp_path / "o.jsonl"))
    assert not _batch.applies(adapter, str(plain), "-")


def test_malformed_row_in_a_big_file_same_error(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad row deep in a many-batch file: the batch path stops with the row path's
    one-line error (file:line:field), exit 2, and writes nothing."""
    import timebound.replay

    n, bad = 3 * _batch.BATCH_ROWS + 100, 2 * _batch.BATCH_ROWS + 37
    rows = [{"type": "msg", "receiver": f"s{i % 3}", "conn": f"c{i % 97}", "ts": 1 + i // 2,
             "at": i} for i in range(n)]
    rows[bad]["conn"] = ""
    src = tmp_path / "big.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), src)
    argv = ["replay", "atmostonce", "-i", str(src), "--estimator", "unlimited",
            "--gc-every", "50", "--classes", "2"]
    assert main([*argv, "-o", str(tmp_path / "fast.parquet")]) == 2
    fast = capsys.readouterr().err
    monkeypatch.setattr(timebound.replay, "replay_rows",
                        lambda command, args: replay_rows(command, args, fast=False))
    assert main([*argv, "-o", str(tmp_path / "row.parquet")]) == 2
    row = capsys.readouterr().err
    assert fast == row
    assert fast.strip() == (f"timebound: error: {src}:{bad + 1}: field 'conn': "
                            "expected a non-empty string, got ''")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.parquet"]  # nothing written


def test_sigterm_during_the_batch_path_leaves_no_temporary_file(tmp_path: Path) -> None:
    n = 2_000_000  # several seconds of work: SIGTERM lands before the end
    src = tmp_path / "big.parquet"
    pq.write_table(pa.table({
        "type": pa.array(["msg"] * n), "receiver": pa.array(["s1"] * n),
        "conn": pa.array([f"c{i % 1000}" for i in range(n)]),
        "ts": pa.array(range(1, n + 1), pa.int64()), "at": pa.array(range(n), pa.int64()),
    }), src)
    out = tmp_path / "out.parquet"
    returncode, err = sigterm_mid_replay(
        ["atmostonce", "-i", str(src), "-o", str(out), "--estimator", "unlimited",
         "--gc-every", "100"], tmp_path, temporaries=2)  # the output and its spool
    assert returncode == 143, err
    assert err.strip() == "timebound: terminated"
    assert sorted(os.listdir(tmp_path)) == ["big.parquet"]
