"""The Spark driver: the same protocol cores over trace datasets, in batch.

``run_pipeline(dataset, out)`` (``timebound pipeline``) reads every input table present
(validated against ``schemas.py``), runs each protocol's operator -- the replay's own
row adapter inside each Spark group -- and writes decision tables and ``metrics``.
"""

from typing import Any

__all__ = ["build_session", "format_summary", "parse_conf", "run_pipeline"]


def __getattr__(name: str) -> Any:
    # Lazy: importing timebound.pipeline.<module> (e.g. the CLI's bench parser) must not
    # import pyspark, which is the optional extra `timebound[spark]` (tests/test_packaging.py).
    if name in ("format_summary", "run_pipeline"):
        from timebound.pipeline import job

        return getattr(job, name)
    if name in ("build_session", "parse_conf"):
        from timebound.pipeline import session

        return getattr(session, name)
    raise AttributeError(f"module 'timebound.pipeline' has no attribute {name!r}")
