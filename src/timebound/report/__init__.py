"""``timebound report DIR``: one self-contained HTML page from pipeline outputs.

Reads only metrics tables (``DIR/metrics/``, Parquet via pyarrow) and manifests
(``DIR/manifest.json``); never protocol objects, never Spark. DIR is one pipeline
output, or a folder of them (the demo's ``DIR/pipeline/<scenario>/``): one section per
scenario and protocol, with the figures a reader of the paper expects, the paper's
claims beside our numbers, and the scenario, seed and parameters that produced them.
"""

from timebound.report._build import REPO_ROOT, claim_rows, find_outputs, is_dataset, write_report

__all__ = ["REPO_ROOT", "claim_rows", "find_outputs", "is_dataset", "write_report"]
