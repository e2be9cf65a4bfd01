"""The Spark driver: the same protocol cores over trace datasets, in batch.

``run_pipeline(dataset, out)`` (``timebound pipeline``) reads every input table present
(validated against ``schemas.py``), runs each protocol's operator -- the replay's own
``Replayer`` inside each Spark group -- and writes decision tables and ``metrics``.
"""

from timebound.pipeline.job import format_summary, run_pipeline
from timebound.pipeline.session import build_session, parse_conf

__all__ = ["build_session", "format_summary", "parse_conf", "run_pipeline"]
