"""``timebound stream merge``: the replay's order per merger, replicated mergers agree,
and the output does not depend on how the files fall into micro-batches.

A stream never ends, so the replay's final flush never happens: per merger, the
stream's rows are the replay's rows up to the flushed tail (every row the replay
emits before its end-of-input flush).
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest

from timebound.adapters.merge import MergeOptions
from timebound.cli import main as cli_main

SHUFFLE = {"spark.sql.shuffle.partitions": "2"}
ROW = ("msg", "proc", "action", "time")


def merge_trace(seed: int, *, mergers: tuple[str, ...] = ("M1", "M2", "M3"), messages: int = 24,
                epsilon: int = 2, delta: int = 3) -> list[dict[str, Any]]:
    """⟨r, c⟩ arrivals of the same messages at replicated mergers, each at its own
    delays (a few beyond delta: late), ~10% repeated; ``at`` non-decreasing per merger."""
    rng = random.Random(seed)
    sent = []
    for i in range(messages):
        r = 2 * i + rng.randint(0, 2)
        sent.append({"msg": f"m{i}", "proc": f"p{rng.randrange(3)}", "r": r,
                     "c": rng.randrange(epsilon)})
    arrivals = []
    for merger in mergers:
        for m in sent:
            for _ in range(2 if rng.random() < 0.1 else 1):
                lag = rng.randint(0, delta + epsilon) + (4 * delta if rng.random() < 0.05 else 0)
                arrivals.append({"merger": merger, **m, "at": m["r"] + lag})
    arrivals.sort(key=lambda a: (a["at"], a["merger"], a["msg"]))
    return [{"run": "r1", "seq": i, **a} for i, a in enumerate(arrivals)]


def write_parts(folder: Path, rows: list[dict[str, Any]], parts: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    size = -(-len(rows) // parts)
    for index in range(parts):
        chunk = rows[index * size:(index + 1) * size]
        (folder / f"{index:03d}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in chunk))


def replay_merge(tmp: Path, rows: list[dict[str, Any]], args: list[str]
                 ) -> dict[str, list[tuple[Any, ...]]]:
    """Per merger: the replay's rows before its end-of-input flush."""
    src, dst = tmp / "arrivals.jsonl", tmp / "order.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert cli_main(["replay", "merge", "--input", str(src), "--output", str(dst), *args]) == 0
    out: dict[str, list[tuple[Any, ...]]] = {}
    for line in dst.read_text().splitlines():
        row = json.loads(line)
        out.setdefault(row["merger"], []).append(tuple(row[k] for k in ROW))
    return out


def read_order(sink: Path) -> dict[str, list[tuple[Any, ...]]]:
    rows = ds.dataset(str(sink / "order"), format="parquet", partitioning="hive") \
        .to_table().to_pylist()
    out: dict[str, list[tuple[Any, ...]]] = {}
    for row in sorted(rows, key=lambda r: (r["merger"], r["seq"])):
        out.setdefault(row["merger"], []).append(tuple(row[k] for k in ROW))
    for merger, items in out.items():
        seqs = sorted(r["seq"] for r in rows if r["merger"] == merger)
        assert seqs == list(range(len(items)))  # each position once
    return out


def deliveries(order: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [(msg, proc) for msg, proc, action, _ in order if action == "deliver"]


def check_against_replay(stream: dict[str, list[tuple[Any, ...]]],
                         replayed: dict[str, list[tuple[Any, ...]]]) -> None:
    assert set(stream) == set(replayed)
    for merger, rows in stream.items():
        assert rows == replayed[merger][:len(rows)]
        assert len(rows) >= len(replayed[merger]) // 2  # only the flushed tail is missing
    # replicated mergers deliver their common messages in one order
    orders = [deliveries(rows) for rows in stream.values()]
    for a in orders:
        for b in orders:
            common = set(a) & set(b)
            assert [m for m in a if m in common] == [m for m in b if m in common]


def run_merge(spark: Any, tmp: Path, name: str, args: MergeOptions, max_files: int | None
              ) -> dict[str, list[tuple[Any, ...]]]:
    from timebound.stream import stream_merge

    stream_merge(str(tmp / "in"), str(tmp / f"ck-{name}"), str(tmp / f"sink-{name}"), args,
                 max_files=max_files, spark=spark, conf=SHUFFLE, out=io.StringIO())
    return read_order(tmp / f"sink-{name}")


@pytest.mark.spark
@pytest.mark.slow
def test_merge_order_is_the_replays_and_independent_of_batching(spark: Any,
                                                                  tmp_path: Path) -> None:
    rows = merge_trace(7)
    write_parts(tmp_path / "in", rows, parts=3)
    replayed = replay_merge(tmp_path, rows, ["--epsilon", "2", "--delta", "3", "--variant", "rc"])
    options = MergeOptions(2, 3, "rc")
    one_per_batch = run_merge(spark, tmp_path, "a", options, max_files=1)
    check_against_replay(one_per_batch, replayed)
    all_at_once = run_merge(spark, tmp_path, "b", options, max_files=None)
    assert all_at_once == one_per_batch
    assert any(a == "late" for rows_ in one_per_batch.values() for _, _, a, _ in rows_)


@pytest.mark.spark
def test_merge_bundled_example_rckn(spark: Any, tmp_path: Path) -> None:
    from importlib import resources

    text = resources.files("timebound.examples").joinpath("merge.jsonl").read_text()
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    folder = tmp_path / "in"
    folder.mkdir()
    for index in range(0, len(rows), 8):  # no run, no seq: file name then line order
        (folder / f"part-{index:03d}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows[index:index + 8]))
    replayed = replay_merge(tmp_path, rows, ["--epsilon", "2", "--delta", "3"])
    check_against_replay(run_merge(spark, tmp_path, "x", MergeOptions(2, 3), max_files=1),
                         replayed)
