"""Progress inside a pipeline table (an ETA on long pipeline runs):
while a table's decision action runs, ``timebound.pipeline._watch`` says the tasks
done of Spark's running jobs, with an ETA, read from Spark's own status tracker.

- On the shared session, a merge table decided with a watch every 0.05 s: the lines
  come between the table's "reading" line and its "decision rows" line, their counts
  never exceed their totals and never go back (within one total), and the table is
  whole;
- ``progress_every=0`` (``--quiet``) says nothing inside the table;
- the line and its ETA: the time so far applied to the tasks left.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest

from tests.test_spark_failures_oneline import merge_dataset
from timebound.pipeline import run_pipeline
from timebound.pipeline._watch import running_tasks, tasks_line, watching

INSIDE = re.compile(r"^pipeline ds \[1/1\] merge: deciding, tasks ([\d,]+)/([\d,]+) "
                    r"\((\d+)%\)( ETA \S+)?$")


@pytest.mark.spark
def test_tasks_move_inside_a_table(spark: Any, tmp_path: Path) -> None:
    data = merge_dataset(tmp_path / "ds", 60)
    lines: list[str] = []
    run_pipeline(str(data), str(tmp_path / "out"), spark=spark, progress=lines.append,
                 progress_every=0.05)
    inside = [(i, m) for i, m in ((i, INSIDE.match(line)) for i, line in enumerate(lines))
              if m]
    assert inside, lines
    reading = next(i for i, line in enumerate(lines) if line.endswith("reading arrivals"))
    decided = next(i for i, line in enumerate(lines) if "decision rows -> arrivals/" in line)
    assert all(reading < i < decided for i, _m in inside), lines
    counts = [(int(m.group(1).replace(",", "")), int(m.group(2).replace(",", "")))
              for _i, m in inside]
    assert all(0 <= done <= total and total > 0 for done, total in counts), counts
    for (done, total), (later, later_total) in zip(counts, counts[1:]):
        assert later >= done or later_total != total, counts

    assert ds.dataset(str(tmp_path / "out" / "arrivals"), format="parquet").count_rows() \
        == 1380  # the table is whole


@pytest.mark.spark
def test_every_zero_says_nothing(spark: Any) -> None:
    said: list[str] = []
    with watching(spark, said.append, 0):
        assert spark.range(0, 200_000, numPartitions=8).selectExpr("sum(id)").first()[0] \
            == 199_999 * 100_000
    assert said == []


@pytest.mark.spark
def test_no_job_runs_no_task(spark: Any) -> None:
    assert running_tasks(spark.sparkContext.statusTracker()) == (0, 0)


def test_the_line_and_its_eta() -> None:
    assert tasks_line(8, 20, 10.0) == "tasks 8/20 (40%) ETA 15s"
    assert tasks_line(1_500, 3_000, 90.0) == "tasks 1,500/3,000 (50%) ETA 1m30s"
    assert tasks_line(20, 20, 10.0) == "tasks 20/20 (100%)"  # nothing left: no ETA
    assert tasks_line(0, 4, 10.0) == "tasks 0/4 (0%)"  # no task done: no rate yet
