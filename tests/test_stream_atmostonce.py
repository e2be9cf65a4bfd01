"""``timebound stream atmostonce``: the replay-equality contract, late arrivals, errors.

Contract: with the files named in trace order and
``--max-files-per-trigger 1``, the streaming verdicts equal ``timebound replay
atmostonce`` on the concatenated files, row for row -- for every estimator, with
classes and with crash rows. One in-process query per configuration on the shared
Spark session; traces are small and seeded. The processor itself is unit-tested
without a stream through ``TwsTester``.
"""

from __future__ import annotations

import io
import json
import os
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from timebound.adapters.atmostonce import AtMostOnceOptions
from timebound.cli import main as cli_main
from timebound.errors import TraceError

SHUFFLE = {"spark.sql.shuffle.partitions": "2"}
KEY = ("receiver", "conn", "ts", "at", "verdict", "rho", "entries")
TYPES = pa.schema([("run", pa.string()), ("seq", pa.int64()), ("type", pa.string()),
                   ("receiver", pa.string()), ("conn", pa.string()), ("ts", pa.int64()),
                   ("at", pa.int64()), ("down", pa.int64())])


def amo_trace(seed: int, n: int, *, crashes: bool, receivers: tuple[str, ...] = ("s1", "s2"),
              conns: int = 8) -> list[dict[str, Any]]:
    """A small trace obeying the replay's rules: per receiver ``at`` never decreases,
    crash rows only when the receiver is up; ~20% resent copies."""
    rng = random.Random(seed)
    at = 0
    rows: list[dict[str, Any]] = []
    up_at = dict.fromkeys(receivers, 0)
    sent: list[tuple[str, int]] = []
    for _ in range(n):
        at += rng.randint(0, 7)
        receiver = rng.choice(receivers)
        if crashes and rng.random() < 0.05 and at >= up_at[receiver]:
            down = rng.randint(1, 25)
            rows.append({"type": "crash", "receiver": receiver, "at": at, "down": down})
            up_at[receiver] = at + down
            continue
        if sent and rng.random() < 0.2:
            conn, ts = rng.choice(sent)
        else:
            conn, ts = f"c{rng.randrange(conns)}é", max(1, at - rng.randint(0, 45))
            sent.append((conn, ts))
        rows.append({"type": "msg", "receiver": receiver, "conn": conn, "ts": ts, "at": at})
    return [{"run": "r1", "seq": i, **row} for i, row in enumerate(rows)]


def write_files(folder: Path, rows: list[dict[str, Any]], parts: int) -> list[Path]:
    """``rows`` split into ``parts`` files named in trace order, JSON Lines and Parquet
    alternating."""
    folder.mkdir(parents=True, exist_ok=True)
    size = -(-len(rows) // parts)
    paths = []
    for index in range(parts):
        chunk = rows[index * size:(index + 1) * size]
        if index % 2:
            path = folder / f"{index:03d}-part.parquet"
            pq.write_table(pa.Table.from_pylist(chunk, schema=TYPES), path)
        else:
            path = folder / f"{index:03d}-part.jsonl"
            path.write_text("".join(json.dumps(r) + "\n" for r in chunk))
        paths.append(path)
    return paths


def replay(tmp: Path, rows: list[dict[str, Any]], args: list[str]) -> list[dict[str, Any]]:
    """``timebound replay atmostonce`` on the concatenated trace."""
    src, dst = tmp / "trace.jsonl", tmp / "replayed.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert cli_main(["replay", "atmostonce", "--input", str(src), "--output", str(dst),
                     *args]) == 0
    return [json.loads(line) for line in dst.read_text().splitlines()]


def read_table(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return ds.dataset(str(path), format="parquet", partitioning="hive").to_table().to_pylist()


def options(args: list[str]) -> AtMostOnceOptions:
    import argparse

    from timebound.arguments import add_receiver_arguments

    parser = argparse.ArgumentParser()
    add_receiver_arguments(parser)
    return AtMostOnceOptions.from_values(vars(parser.parse_args(args)))


def run_stream(spark: Any, tmp: Path, args: list[str], *, max_files: int | None = 1
               ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    from timebound.stream import stream_atmostonce

    out = io.StringIO()
    stream_atmostonce(str(tmp / "in"), str(tmp / "ck"), str(tmp / "sink"), options(args),
                      max_files=max_files, spark=spark, conf=SHUFFLE, out=out)
    verdicts = sorted(read_table(tmp / "sink" / "verdicts"),
                      key=lambda r: (r["seq"] is None, r["seq"] or 0, r["file"], r["line"]))
    return verdicts, read_table(tmp / "sink" / "accepted"), out.getvalue()


CASES = [
    pytest.param(["--estimator", "fixed", "--rho", "30", "--gc-every", "20", "--classes", "3"],
                 False, id="fixed-classes"),
    pytest.param(["--estimator", "unlimited", "--gc-every", "16", "--resilient", "--beta", "60",
                  "--latest-every", "25"], True, id="unlimited-crashes"),
    pytest.param(["--estimator", "limited", "--window", "6", "--spikes", "1", "--p", "2",
                  "--resilient", "--beta", "50", "--latest-every", "20", "--classes", "2"],
                 True, id="limited-crashes-classes"),
]


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize(("args", "crashes"), CASES)
def test_verdicts_equal_the_replay(spark: Any, tmp_path: Path, args: list[str],
                                   crashes: bool) -> None:
    rows = amo_trace(len(args), 90, crashes=crashes)
    write_files(tmp_path / "in", rows, parts=4)
    expected = replay(tmp_path, rows, args)
    verdicts, accepted, printed = run_stream(spark, tmp_path, args)
    assert [tuple(r[k] for k in KEY) for r in verdicts] == \
        [tuple(r.get(k) for k in KEY) for r in expected]
    assert not any(r["late_arrival"] for r in verdicts)
    assert sorted(r["batch"] for r in verdicts)[-1] == 3  # one file per micro-batch
    # accepted/ holds each accepted message once, with its input columns
    want = sorted((r["seq"], r["conn"], r["ts"]) for r in verdicts if r["verdict"] == "accepted")
    assert sorted((r["seq"], r["conn"], r["ts"]) for r in accepted) == want
    assert "batch 3:" in printed and "state " in printed
    if crashes:
        assert any(r["verdict"] == "down" for r in verdicts)


@pytest.mark.spark
def test_late_file_is_decided_at_the_receivers_clock(spark: Any, tmp_path: Path) -> None:
    """A file whose rows are behind the receiver's clock: every row gets a verdict,
    decided at the clock and marked late_arrival; a late copy of an accepted message is
    still a duplicate. Reference: the replay of the trace with ``at`` clamped to the
    receiver's clock."""
    first = [{"type": "msg", "receiver": "s1", "conn": f"c{i}", "ts": 10 * i + 5, "at": 10 * i + 8}
             for i in range(1, 7)]
    late = [{"type": "msg", "receiver": "s1", "conn": "c2", "ts": 25, "at": 30},  # copy
            {"type": "msg", "receiver": "s1", "conn": "c9", "ts": 33, "at": 35},  # new
            {"type": "msg", "receiver": "s1", "conn": "c3", "ts": 36, "at": 70}]  # on time
    rows = [{"run": "r1", "seq": i, **r} for i, r in enumerate(first + late)]
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:6]))
    (folder / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[6:]))
    args = ["--estimator", "fixed", "--rho", "40", "--gc-every", "10"]
    clamped, clock = [], 0
    for row in rows:
        clock = max(clock, row["at"])
        clamped.append({**row, "at": clock})
    expected = replay(tmp_path, clamped, args)
    verdicts, accepted, _ = run_stream(spark, tmp_path, args)
    assert [r["late_arrival"] for r in verdicts] == [False] * 6 + [True, True, False]
    assert [r["at"] for r in verdicts] == [r["at"] for r in rows]  # own at kept
    assert [(r["verdict"], r["rho"], r["entries"]) for r in verdicts] == \
        [(r["verdict"], r["rho"], r["entries"]) for r in expected]
    assert verdicts[6]["verdict"] == "duplicate"
    assert len(accepted) == sum(r["verdict"] == "accepted" for r in verdicts)


@pytest.mark.spark
def test_malformed_row_names_file_line_and_field(spark: Any, tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "001.jsonl").write_text(
        '{"type":"msg","receiver":"s1","conn":"c1","ts":5,"at":6}\n'
        '{"type":"msg","receiver":"s1","conn":"c1","ts":"x","at":7}\n')
    with pytest.raises(TraceError) as caught:
        run_stream(spark, tmp_path, ["--rho", "5", "--gc-every", "5"])
    assert (caught.value.source, caught.value.line, caught.value.field) == ("001.jsonl", 2, "ts")
    sink = tmp_path / "sink" / "verdicts"
    assert not sink.exists() or not os.listdir(sink)  # no half-written batch left


def test_processor_keeps_each_keys_receiver_between_batches() -> None:
    """The processor without a stream: the key's state survives between micro-batches,
    and each key is its own receiver."""
    from tests.test_stream_columnar import State, as_spark_frame, decider

    engine = decider(options(["--rho", "10", "--gc-every", "5"]))
    states = {("r1", "s1", 0): State(), ("r1", "s2", 0): State()}

    def feed(key: tuple[str, str, int], rows: list[dict[str, Any]]) -> list[str]:
        base = {"run": key[0], "seq": None, "down": None, "original": None,
                "_file": "f", "_line": 1}
        out = engine.decide_frame(key, as_spark_frame([{**base, **r} for r in rows]),
                                  states[key])
        return list(out["verdict"])

    key = ("r1", "s1", 0)
    msg = {"type": "msg", "receiver": "s1", "conn": "c1"}
    assert feed(key, [{**msg, "ts": 3, "at": 4}]) == ["accepted"]
    assert feed(key, [{**msg, "ts": 3, "at": 6}]) == ["duplicate"]  # restored table
    assert feed(("r1", "s2", 0), [{**msg, "receiver": "s2", "ts": 3, "at": 6}]) == ["accepted"]
    assert states[key].value is not None
