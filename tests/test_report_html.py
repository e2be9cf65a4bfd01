"""``timebound report``: one self-contained HTML page; every section, every image
decodes; claims beside our numbers; the report never imports the cores or Spark."""

from __future__ import annotations

import ast
import base64
import io
import json
import os
import pathlib
import re
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from timebound.cli import main

PROTOCOL_MEASURES = {
    "atmostonce": ["lost_rate", "table_mean", "lost_per_accepted", "messages"],
    "slotted": ["delay_mean.FR", "delay_mean.R", "buffer_p99", "buffer_max"],
    "stability": ["latency_mean", "ack_bytes_per_ack", "ack_bytes"],
    "merge": ["buffering_mean", "buffering_max", "late_rate"],
    "causal": ["c_max", "c_mean"],
}


def _output(folder: pathlib.Path, scenario: str, protocols: list[str]) -> None:
    runs = [f"r{i}" for i in range(3)]
    rows: list[dict[str, Any]] = []
    for protocol in protocols:
        for i, run in enumerate(runs):
            for measure in PROTOCOL_MEASURES[protocol]:
                rows.append({"run": run, "protocol": protocol, "measure": measure,
                             "value": float(i + 1), "t": None})
            if protocol == "atmostonce":
                for t in range(0, 100, 10):
                    rows += [{"run": run, "protocol": protocol, "measure": m,
                              "value": float(t * (i + 1)), "t": t}
                             for m in ("estimate", "table_size")]
    os.makedirs(folder / "metrics")
    schema = pa.schema([("run", pa.string()), ("protocol", pa.string()),
                        ("measure", pa.string()), ("value", pa.float64()), ("t", pa.int64())])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), folder / "metrics" / "part-0.parquet")
    params = {"atmostonce": "rho", "slotted": "slot", "stability": "n", "merge": "delta",
              "causal": "epsilon"}
    manifest = {
        "scenario": scenario, "seed": 42, "params": {"delay": "exponential:20"},
        "runs": [{"run": run, "params": {params[p]: 10 ** (i + 1) for p in protocols}
                  | {"scheme": "a" if i < 2 else "b", "acks": "timestamp"}}
                 for i, run in enumerate(runs)],
        "claims": [{"paper": "SCMP", "claim": "no loss at the bound", "measure": "lost_rate",
                    "expected": "~0"},
                   {"paper": "slotted FIFO", "claim": "FR delay small",
                    "measure": "delay_mean.FR", "expected": "70-80 ms"}],
        "created_by": "timebound simulate",
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))


def _images(page: str) -> list[tuple[str, bytes]]:
    return [(alt, base64.b64decode(data)) for alt, data in
            re.findall(r"alt='([^']*)' src='data:image/png;base64,([^']*)'", page)]


def test_report_of_one_output(tmp_path: pathlib.Path, capsys: Any) -> None:
    _output(tmp_path, "mixed", list(PROTOCOL_MEASURES))
    assert main(["report", str(tmp_path)]) == 0
    path = tmp_path / "report.html"
    assert capsys.readouterr().out.strip() == str(path)
    page = path.read_text()
    for protocol in PROTOCOL_MEASURES:
        assert f"<section id='mixed-{protocol}'>" in page
    images = _images(page)
    assert len(images) >= 12
    for _alt, data in images:
        Image.open(io.BytesIO(data)).verify()
    alts = {alt for alt, _ in images}
    assert any(alt.startswith("lost rate against rho (") for alt in alts)
    assert {"Lifetime estimate over time (per run)",
            "FR delivery delay (rows) against slot length, per scheme",
            "stability latency, mean (ticks) against N",
            "buffering, mean (ticks) against delta"} <= alts
    # claims and verdicts come from timebound.claims, per scenario (none for "mixed")
    assert "No paper claims for this scenario" in page and "<th>r2</th>" in page
    assert "seed <b>42</b>" in page and "delay=exponential:20" in page
    assert "http" not in page.replace("http-equiv", "")  # self-contained


def test_report_of_several_outputs_and_errors(tmp_path: pathlib.Path, capsys: Any) -> None:
    _output(tmp_path / "pipeline" / "one", "one", ["merge"])
    _output(tmp_path / "pipeline" / "two", "two", ["stability", "causal"])
    assert main(["report", str(tmp_path / "pipeline")]) == 0
    page = (tmp_path / "pipeline" / "report.html").read_text()
    for anchor in ("one-merge", "two-stability", "two-causal"):
        assert f"id='{anchor}'" in page
    os.makedirs(tmp_path / "nothing")
    assert main(["report", str(tmp_path / "nothing")]) == 2
    assert "holds no pipeline output" in capsys.readouterr().err


def test_report_imports_no_core_and_no_spark() -> None:
    folder = pathlib.Path(__file__).parent.parent / "src" / "timebound" / "report"
    for module in folder.glob("*.py"):
        tree = ast.parse(module.read_text())
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                assert not name.startswith(("timebound.core", "pyspark", "timebound.pipeline",
                                            "timebound.replay")), (module.name, name)


def test_reorder_window_plot_and_row(tmp_path: pathlib.Path) -> None:
    """The scmp reorder runs (ours) get one plot -- refused-genuine rate and
    table bytes against W on a log2 axis -- and their row of the claims table."""
    out = tmp_path / "scmp"
    assert main(["simulate", "scmp", "--out", str(out), "--seed", "1", "--quiet",
                 "--set", "experiments=reorder", "--set", "reorder_clients=10",
                 "--set", "reorder_calls=40"]) == 0
    assert main(["report", str(tmp_path)]) == 0
    page = (tmp_path / "report.html").read_text()
    images = dict(_images(page))
    title = ("Reorder window W (ours, beyond the papers): genuine messages refused and "
             "connection-table bytes, runs reorder W=*")
    assert title in images
    Image.open(io.BytesIO(images[title])).verify()
    assert "ours (beyond the papers)" in page and "reorder window W keeps" in page


def test_reorder_window_figure_needs_two_windows() -> None:
    import pandas as pd

    from timebound.report import _figures as fig

    one = pd.DataFrame({"W": [1.0], "refused_genuine_rate": [0.1],
                        "table_bytes_mean": [100.0]})
    assert fig.reorder_window(one) is None
    two = pd.concat([one, pd.DataFrame({"W": [8.0], "refused_genuine_rate": [0.0],
                                        "table_bytes_mean": [400.0]})])
    assert fig.reorder_window(two) is not None


def test_a_dataset_is_never_written_into(tmp_path: pathlib.Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """``report`` on a simulate (or sweep) dataset, an input: refused without --out, in
    one line, nothing written; with --out FILE.html the page goes there."""
    out = tmp_path / "scmp"
    assert main(["simulate", "scmp", "--out", str(out), "--seed", "1", "--quiet",
                 "--set", "experiments=reorder", "--set", "reorder_clients=10",
                 "--set", "reorder_calls=40"]) == 0
    before = sorted(p.name for p in out.iterdir())
    capsys.readouterr()
    assert main(["report", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"timebound: error: --out: '{out}' is a dataset of simulate or sweep (an input, "
        "never written into): give --out FILE.html, or run timebound pipeline on it and "
        "report on its output\n")
    assert main(["report", str(out), "--out", str(out / "metrics")]) == 2
    assert "expected a .html file name" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == before
    page = tmp_path / "page.html"
    assert main(["report", str(out), "--out", str(page)]) == 0
    assert capsys.readouterr().out.strip() == str(page)
    assert "timebound report" in page.read_text()
    assert sorted(p.name for p in out.iterdir()) == before
