"""``timebound.spark.at_most_once``'s default ``reorder_window``
(reordered messages). The library keeps a window of timestamps per connection by
default; the commands keep SCMP's rule (``--reorder-window 1``).

- a genuine message overtaken by up to (default) later messages of its connection is
  accepted; one overtaken by more (the floor has passed it) is refused ``duplicate``;
  every copy is refused, quick or after GC forgot its connection;
- on a generated trace with reordering and copies the default's verdicts are
  ``timebound replay atmostonce --reorder-window <default>``'s, and differ from SCMP's
  rule (the trace tells the two apart);
- the default in the signature is the one docs/spark.md's argument table gives.
"""

from __future__ import annotations

import inspect
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.test_spark_library import decision_order, decisions, frame, replayed, trace

ROOT = Path(__file__).resolve().parents[1]
#: The library's default window (docs/spark.md, "Reordered messages").
DEFAULT = 8


def test_the_default_is_the_documented_one() -> None:
    pytest.importorskip("pyspark")
    from timebound.spark import at_most_once

    default = inspect.signature(at_most_once).parameters["reorder_window"].default
    text = (ROOT / "docs" / "spark.md").read_text(encoding="utf-8")
    documented = re.findall(r"^\| `reorder_window=(\d+)` \|", text, re.M)
    assert documented == [str(default)]
    assert default == DEFAULT


def overtaken_rows() -> list[tuple[str, int, int, str]]:
    """(conn, ts, at, what) on one connection ``u``, in arrival order, and one on ``v``."""
    d = DEFAULT
    rows = [("u", 100, 1, "first")]
    rows += [("u", 201 + i, 2 + i, "later") for i in range(d - 1)]
    rows += [("u", 200, d + 1, "overtaken by default - 1"),
             ("u", 200, d + 2, "copy"),            # of the message just accepted
             ("u", 201, d + 3, "copy"),            # of the first that overtook it
             ("v", 50, d + 4, "first"),
             ("u", 100, d + 5, "copy")]            # below the window: its floor
    rows += [("u", 301 + i, d + 6 + i, "later") for i in range(d)]
    rows += [("u", 300, 2 * d + 6, "overtaken by default")]
    rows += [("u", 401 + i, 2 * d + 7 + i, "later") for i in range(d + 1)]
    rows += [("u", 400, 3 * d + 8, "overtaken by default + 1"),
             ("v", 50, 5_000, "copy")]             # after GC forgot v: stale
    return rows


@pytest.mark.spark
def test_the_default_keeps_a_message_overtaken_by_default_later_ones(spark: Any) -> None:
    from timebound.spark import at_most_once

    rows = overtaken_rows()
    df = spark.createDataFrame([(*r, i) for i, r in enumerate(rows)],
                               "conn string, ts long, at long, what string, i long")
    out = at_most_once(df, conn="conn", ts="ts", at="at", rho=1_000, gc_every=100)
    got = sorted(out.collect(), key=lambda r: r["i"])
    verdicts = [(r["what"], r["verdict"]) for r in got]
    expected = {"first": "accepted", "later": "accepted",
                "overtaken by default - 1": "accepted",
                "overtaken by default": "accepted",
                "overtaken by default + 1": "duplicate"}
    assert verdicts[:-1] == [(w, expected.get(w, "duplicate")) for _, _, _, w in rows[:-1]]
    assert verdicts[-1] == ("copy", "stale")
    # u's window holds the default number of timestamps, v's one.
    assert max(r["entries"] for r in got) == DEFAULT + 1


@pytest.mark.spark
@pytest.mark.parametrize("kwargs", [
    {"estimator": "fixed", "rho": 30, "gc_every": 20, "classes": 3},
    {"estimator": "unlimited", "gc_every": 16},
], ids=["fixed-classes", "unlimited"])
def test_the_default_equals_the_replay_with_its_window(spark: Any, tmp_path: Path,
                                                      kwargs: dict[str, Any]) -> None:
    from timebound.spark import at_most_once

    rows = trace(38, 600, int_ids=False)
    ordered = decision_order(rows)
    expected = replayed(tmp_path, ordered, {**kwargs, "reorder_window": DEFAULT})
    got = decisions(at_most_once(frame(spark, rows, False), conn="user", ts="sent",
                                 at="recv", receiver="node", order="prio",
                                 **kwargs).collect())
    assert got == expected
    # The trace tells the default from SCMP's rule: it keeps overtaken messages.
    scmp = replayed(tmp_path, ordered, {**kwargs, "reorder_window": 1})
    kept = Counter(v for v, _, _ in expected.values())["accepted"]
    assert kept > Counter(v for v, _, _ in scmp.values())["accepted"]
    # Every copy refused: no (receiver, conn, ts) accepted twice.
    accepted = Counter((r["node"], r["user"], r["sent"]) for r in rows
                       if expected[r["id"]][0] == "accepted")
    assert accepted and max(accepted.values()) == 1
    copies = len(rows) - len({(r["node"], r["user"], r["sent"]) for r in rows})
    assert copies > 50  # the trace does resend
