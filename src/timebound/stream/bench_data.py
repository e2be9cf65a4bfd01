"""The generated streams of ``timebound bench stream`` (``bench``): a data engineer's
payment-like rows, and arrivals for one causal merger.

``generate_user`` writes one Parquet file per micro-batch in ``received_ms`` order
(the files' modification times in that order, which is the order Spark's file
source takes them in): about ``LATE_SHARE`` of the messages arrive later than the
watermark delay, ``RESEND_SHARE`` of them are resent, half the copies within half
the watermark delay, half 2-3 micro-batches after their original. A copy is a later
arrival of an already seen (``account``, ``sent_ms``); a message's first arrival is
the genuine row. ``generate_arrivals`` writes ``MERGE_PUBLISHERS`` writers' messages
stamped by ``CausalProcess`` (merge paper section 5), each arriving within
-epsilon..delta of its send.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from typing import Any

REGIONS = ("eu-west", "eu-north", "us-east", "ap-south")
RECEIVERS = len(REGIONS)
EPOCH_MS = 1_700_000_000_000  # sent_ms of the first message, minus 1
NOTES = ("invoice", "refund", "top-up", "transfer", "fee")
RESEND_SHARE = 0.10
LATE_SHARE = 0.03  # genuine messages arriving later than the watermark delay
MERGE_SCHEMA = ("replica string, event string, writer string, arrived long, r long, "
                "c long, kn array<long>")
MERGE_PUBLISHERS = 4
MERGE_EPSILON = 4  # ticks
MERGE_DELTA = 10  # ticks
FILE_TIME = 1_600_000_000  # the first file's modification time (s); one more per file


def _write_files(folder: str, tables: Sequence[Any]) -> None:
    """One Parquet file per table, named and dated in order (Spark's file source takes
    new files by modification time)."""
    import pyarrow.parquet as pq

    os.makedirs(folder, exist_ok=True)
    for index, table in enumerate(tables):
        path = os.path.join(folder, f"part-{index:05d}.parquet")
        pq.write_table(table, path)
        os.utime(path, (FILE_TIME + index, FILE_TIME + index))


def generate_user(folder: str, firsts: str, rows: int, connections: int, files: int,
                  watermark: int, seed: int = 1) -> dict[str, int]:
    """The stream as ``files`` Parquet files in ``received_ms`` order under ``folder``,
    and each message's first arrival (``account``, ``sent_ms``, ``received_ms``) in the
    Parquet file ``firsts``; returns its rows, messages, copies, copies later than the
    watermark, genuine rows later than it and genuine rows that came after a later-sent
    message of their account."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(seed)
    originals = int(rows / (1 + RESEND_SHARE))
    # Late rows come 2-3 files (micro-batches) after they were sent: later than the
    # watermark delay by at least a micro-batch, so the built-in has dropped the
    # original's state by then (it evicts at the end of a micro-batch).
    span = max(1, originals // files)
    late_low = max(watermark + watermark // 4, 2 * span)
    out: list[tuple[int, str, str, int, int, str]] = []
    first: list[tuple[str, int, int]] = []
    late_copies = late_genuine = 0
    for i in range(originals):
        conn = rng.randrange(connections)
        sent = EPOCH_MS + i + 1  # the senders' clocks: one tick per message on the whole
        if rng.random() < LATE_SHARE:
            received = sent + rng.randint(late_low, late_low + span)
            late_genuine += 1
        else:
            received = sent + rng.randint(1, 20)
        account, region = f"acct-{conn}", REGIONS[conn % RECEIVERS]
        row = (received, region, account, sent, rng.randint(1, 100_000), NOTES[i % 5])
        out.append(row)
        first.append((account, sent, received))
        if rng.random() < RESEND_SHARE:
            if rng.random() < 0.5:
                gap = rng.randint(10, max(10, watermark // 2))
            else:
                gap = rng.randint(late_low, late_low + span)
                late_copies += 1
            out.append((received + gap, *row[1:]))
    out.sort()
    # first arrivals after a later-sent message of their account (SCMP keeps a
    # connection's latest timestamp: such a message is refused as older)
    newest: dict[str, int] = {}
    overtaken = 0
    for account, sent, _ in sorted(first, key=lambda f: f[2]):
        overtaken += newest.get(account, 0) > sent
        newest[account] = max(newest.get(account, 0), sent)
    schema = pa.schema([("region", pa.string()), ("account", pa.string()),
                        ("sent_ms", pa.int64()), ("received_ms", pa.int64()),
                        ("amount", pa.int64()), ("note", pa.string())])
    size = -(-len(out) // files)
    chunks = [out[index * size:(index + 1) * size] for index in range(files)]
    _write_files(folder, [pa.table({
        "region": [c[1] for c in chunk], "account": [c[2] for c in chunk],
        "sent_ms": [c[3] for c in chunk], "received_ms": [c[0] for c in chunk],
        "amount": [c[4] for c in chunk], "note": [c[5] for c in chunk],
    }, schema=schema) for chunk in chunks])
    pq.write_table(pa.table({"account": [f[0] for f in first],
                             "sent_ms": pa.array([f[1] for f in first], pa.int64()),
                             "received_ms": pa.array([f[2] for f in first], pa.int64())}),
                   firsts)
    return {"rows": len(out), "messages": originals, "copies": len(out) - originals,
            "late_copies": late_copies, "late_genuine": late_genuine,
            "overtaken": overtaken}



def generate_arrivals(folder: str, rows: int, files: int = 2, seed: int = 2) -> int:
    """An arrivals stream for one merger (``MERGE_SCHEMA``): ``rows`` messages of
    MERGE_PUBLISHERS writers (rckn stamps), each arriving within -epsilon..delta of
    its send; returns the rows written."""
    import pyarrow as pa

    from timebound.core.causal import CausalProcess

    rng = random.Random(seed)
    n = MERGE_PUBLISHERS
    procs = [CausalProcess(MERGE_EPSILON, n) for _ in range(n)]
    offsets = [rng.randint(0, MERGE_EPSILON) for _ in range(n)]
    last = [0] * n
    out: list[tuple[int, int, str, str, int, int, list[int]]] = []
    for tick in range(1, rows + 1):
        j = rng.randrange(n)
        rt = max(tick + offsets[j], last[j] + 1)
        last[j] = rt
        stamp = procs[j].send(now=rt)
        at = max(1, rt + rng.randint(-MERGE_EPSILON, MERGE_DELTA))
        out.append((at, tick, f"e{tick}", f"w{j}", stamp.r, stamp.c, list(stamp.kn)))
    out.sort()
    size = -(-len(out) // files)
    chunks = [out[index * size:(index + 1) * size] for index in range(files)]
    _write_files(folder, [pa.table({
        "replica": pa.array(["r1"] * len(chunk), pa.string()),
        "event": [c[2] for c in chunk], "writer": [c[3] for c in chunk],
        "arrived": pa.array([c[0] for c in chunk], pa.int64()),
        "r": pa.array([c[4] for c in chunk], pa.int64()),
        "c": pa.array([c[5] for c in chunk], pa.int64()),
        "kn": pa.array([c[6] for c in chunk], pa.list_(pa.int64())),
    }) for chunk in chunks])
    return len(out)
