"""The driver of tests/test_spark_cluster.py: ``timebound.spark.at_most_once`` on a
standalone Spark cluster, run in its own process so the tests' shared local session
is untouched.

``python tests/spark_cluster_job.py MASTER JOB.json [JAVA_OPTIONS]`` reads
``{"rows": [...], "kwargs": {...}}`` (rows in the SCHEMA below, the operator's keyword
options), builds a session on MASTER (loopback only, small executors), runs
``at_most_once`` with the columns renamed (``conn="user"``, ``ts="sent"``,
``at="recv"``, ``receiver="node"``, ``order="prio"``) and prints one JSON line:
``{"master": ..., "columns": [...], "rows": [...]}``, the result's rows sorted by
``id``. JAVA_OPTIONS go to the driver's and the executor's JVM.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

SCHEMA = "id long, node string, user string, sent long, recv long, prio long, note string"

#: Loopback only, one small executor: the whole cluster fits the test machine.
CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.executor.memory": "512m",
    "spark.executor.cores": "2",
    "spark.cores.max": "2",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
}


def run(master: str, job: dict[str, Any], java_options: str = "") -> dict[str, Any]:
    from timebound.pipeline.session import build_session
    from timebound.spark import at_most_once, typed_errors

    conf = dict(CONF)
    if java_options:
        conf["spark.driver.extraJavaOptions"] = java_options
        conf["spark.executor.extraJavaOptions"] = java_options
    spark = build_session(master, conf, app_name="timebound-cluster-test")
    try:
        df = spark.createDataFrame(job["rows"], SCHEMA)
        out = at_most_once(df, conn="user", ts="sent", at="recv", receiver="node",
                           order="prio", **job["kwargs"])
        with typed_errors():
            rows = [r.asDict() for r in out.orderBy("id").collect()]
        return {"master": spark.sparkContext.master, "columns": out.columns, "rows": rows}
    finally:
        spark.stop()


def main(argv: list[str]) -> int:
    master, path, *java_options = argv
    job = json.loads(Path(path).read_text())
    print(json.dumps(run(master, job, " ".join(java_options))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
