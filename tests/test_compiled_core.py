"""The mypyc-compiled core decides exactly as the pure Python (timebound/_compiled.py):
the same generated traces (every estimator, classes, resilient crashes, reorder windows,
duplicates, late and early copies) replayed in two processes, one forced to the pure
Python, row by row and column-wise (the Spark operator's and the Parquet replay's
``decide_table``, through the compiled ``_drive`` loop); and a stale build is never used. The RPC core and wire codec, compiled in the
same build: tests/test_compiled_rpc.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from timebound import _compiled

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

OPTIONS = [
    {"estimator": "fixed", "rho": 40, "gc_every": 7},
    {"estimator": "fixed", "rho": 300, "gc_every": 50, "classes": 3},
    {"estimator": "unlimited", "gc_every": 20, "resilient": True, "beta": 400,
     "latest_every": 100},
    {"estimator": "unlimited", "gc_every": 1, "classes": 2, "reorder_window": 4},
    {"estimator": "limited", "window": 4, "spikes": 1, "p": 2, "resilient": True,
     "beta": 50, "latest_every": 30, "recovery_grace": 100},
    {"estimator": "limited", "window": 1, "spikes": 0, "p": 1, "classes": 4,
     "reorder_window": 2},
]

SCRIPT = """
import json, sys
from timebound import _compiled
from timebound.adapters import Row
from timebound.adapters.atmostonce import AtMostOnceAdapter, AtMostOnceOptions
from timebound.errors import TraceError
from tests.test_pipeline_atmostonce import generated
import pyarrow as pa
from timebound.columnar import decide_table
SCHEMA = pa.schema([("seq", pa.int64()), ("type", pa.string()), ("receiver", pa.string()),
                    ("conn", pa.string()), ("ts", pa.int64()), ("at", pa.int64()),
                    ("down", pa.int64())])
options = json.loads(sys.argv[1])
out = {"core": None, "runs": [], "columns": []}
for i, values in enumerate(options):
    for seed in range(6):
        a = AtMostOnceAdapter(AtMostOnceOptions.from_values(values))
        rows = generated(seed * 31 + i, receivers=2, conns=15, rows=500,
                         crashes=bool(values.get("resilient")))
        got = []
        try:
            for line, row in enumerate(rows, start=1):
                for p in a.feed(Row("t", line, row)):
                    got.append([line, p["verdict"], p["rho"], p["entries"]])
            for p in a.finish():
                got.append([None, p.get("verdict"), p.get("rho"), p.get("entries")])
        except TraceError as exc:
            got.append(str(exc))
        out["runs"].append([values, seed, got, [list(x) for x in a.summary()]])
        # the column-wise path (core/atmostonce/_drive.py) over the same rows
        b = AtMostOnceAdapter(AtMostOnceOptions.from_values(values))
        table = pa.Table.from_pylist([dict(r, seq=line) for line, r in enumerate(rows, 1)],
                                     schema=SCHEMA)
        lines, pyrows = table.column("seq").to_numpy(), table.to_pylist()

        def feed(i):
            data = {k: v for k, v in pyrows[i].items() if v is not None and k != "seq"}
            return list(b.feed(Row("t", int(lines[i]), data)))
        try:
            d = decide_table(b, "t", table, lines, feed)
            columns = [d.keep.tolist(), d.verdict.to_pylist(), d.rho.to_pylist(),
                       d.entries.to_pylist(), d.fast_rows, [list(x) for x in b.summary()]]
        except TraceError as exc:
            columns = str(exc)
        out["columns"].append(columns)
out["core"] = _compiled.status()
print(json.dumps(out))
"""


def _replay(pure: bool) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    env.pop(_compiled.PURE_ENV, None)
    if pure:
        env[_compiled.PURE_ENV] = "1"
    done = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(OPTIONS)], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.mark.skipif(not _compiled.current(), reason="compiled core not built "
                    "(scripts/setup.sh builds it; scripts/compile_core.py build)")
def test_compiled_core_decides_as_the_pure_python() -> None:
    compiled, pure = _replay(pure=False), _replay(pure=True)
    assert compiled["core"] == "mypyc-compiled core"
    assert pure["core"] == "pure-Python core"
    assert len(compiled["runs"]) == len(OPTIONS) * 6
    verdicts = {row[1] for run in compiled["runs"] for row in run[2] if isinstance(row, list)}
    assert {"accepted", "duplicate", "stale", "down"} <= verdicts  # the traces reach them
    for got, want in zip(compiled["runs"], pure["runs"]):
        assert got == want
    # the column-wise path too: the same decisions, most rows through the compiled loop
    assert compiled["columns"] == pure["columns"]
    decided = [c for c in compiled["columns"] if isinstance(c, list)]
    assert len(decided) > len(OPTIONS) * 3 and sum(c[4] for c in decided) > 10_000


def test_a_changed_source_is_never_run_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    digests = {module: _compiled._digest(module) for module in _compiled.MODULES}
    record: dict[str, Any] = {"tag": sys.implementation.cache_tag, "files": [],
                              "sources": dict(digests)}
    monkeypatch.setattr(_compiled, "_record", lambda path=_compiled.RECORD: record)
    assert _compiled.current()
    # One changed source, of any package, and nothing runs compiled (the pure finder
    # is installed for every module).
    for module in ("timebound.core.atmostonce._receiver", "timebound.core.rpc._live",
                   "timebound.core.rpc._messages", "timebound.core.wire._frame"):
        record["sources"] = dict(digests, **{module: "0" * 64})
        assert not _compiled.current(), module
    record["sources"] = {m: d for m, d in digests.items() if m != "timebound.core.rpc._server"}
    assert not _compiled.current()  # a build that did not compile every module
    record["sources"] = dict(digests)
    record["files"] = [os.path.join(ROOT, "no-such-extension.so")]
    assert not _compiled.current()  # a recorded file is gone
    record["files"] = []
    record["tag"] = "cpython-0"
    assert not _compiled.current()
    finder = _compiled._PureFinder()
    for module in _compiled.MODULES:
        spec = finder.find_spec(module)
        assert spec is not None and spec.origin is not None and spec.origin.endswith(".py")
        assert os.path.exists(spec.origin)
    assert finder.find_spec("timebound.core.atmostonce._classes") is None
    assert finder.find_spec("timebound.core.atmostonce._resilience") is None
    assert finder.find_spec("timebound.core.wire._names") is None
