"""The one SparkSession builder of the pipeline.

``local[*]`` unless ``--master`` says otherwise; every ``--conf k=v`` is passed through
unchanged, so the same job runs on a standalone, YARN or Kubernetes cluster (the
workers need ``timebound`` importable: ship it with ``--conf spark.submit.pyFiles=...``
or install it in the cluster's Python). The UI is off unless a ``--conf`` turns it on,
and the log level is WARN.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from timebound.errors import UsageError
from timebound.sparkutil import build_session as _build_session
from timebound.sparkutil import check_master as check_master
from timebound.sparkutil import parse_conf as parse_conf  # the pipeline's --conf
from timebound.sparkutil import stopped_after as stopped_after

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

#: Bytes of input Parquet per shuffle partition when sizing shuffles to the data.
BYTES_PER_PARTITION = 32 * 1024 * 1024
MAX_PARTITIONS = 2000

#: Settings we choose besides ``sparkutil.BASE_CONF``; any ``--conf`` of the same key
#: wins.
DEFAULT_CONF = {
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
}


def build_session(
    master: str | None = None,
    conf: dict[str, str] | None = None,
    *,
    app_name: str = "timebound",
) -> SparkSession:
    """The pipeline's session: ``sparkutil.build_session`` with ``DEFAULT_CONF``. With
    ``timebound.logLevel`` OFF (every command without ``--verbose``) the JVM's output is
    kept off the terminal."""
    spark: SparkSession = _build_session(master, conf, app_name=app_name,
                                         defaults=DEFAULT_CONF)
    return spark


def size_shuffles(spark: SparkSession, input_bytes: int, user_conf: dict[str, str]) -> int:
    """Set ``spark.sql.shuffle.partitions`` for ``input_bytes`` of input (unless the user
    set it): one partition per 32 MiB, at least the default parallelism, at most 2000."""
    key = "spark.sql.shuffle.partitions"
    if key in user_conf:
        try:
            value = int(user_conf[key])
        except ValueError:
            value = 0
        if value < 1:
            raise UsageError("--conf", f"{key} must be a positive integer, got "
                             f"{user_conf[key]!r}")
        return value
    parallelism = spark.sparkContext.defaultParallelism
    wanted = max(parallelism, math.ceil(input_bytes / BYTES_PER_PARTITION))
    partitions = min(MAX_PARTITIONS, wanted)
    spark.conf.set(key, str(partitions))
    return partitions
