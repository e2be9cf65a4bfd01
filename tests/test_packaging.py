"""Packaging: the cores, the replay and the simulator need only the standard
library and pyarrow; Spark and the report are extras, and a command whose extra is
missing says which one to install, in one line, with exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from timebound.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[1]

#: Run in a fresh interpreter: pyspark, matplotlib, pandas and numpy cannot be imported.
BLOCKER = """
import sys
BLOCKED = {"pyspark", "py4j", "matplotlib", "pandas", "numpy"}

class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"blocked for the test: {name}")
        return None

sys.meta_path.insert(0, Blocker())
for name in list(sys.modules):
    if name.split(".")[0] in BLOCKED:
        del sys.modules[name]
from timebound.cli import main
sys.exit(main(sys.argv[1:]))
"""


def run_blocked(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", BLOCKER, *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_dependencies_are_split_into_extras() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = {dep.split("[")[0].split("<")[0].split(">")[0].split("=")[0].strip()
             for dep in project["dependencies"]}
    assert names == {"pyarrow"}
    extras = project["optional-dependencies"]

    def of(extra: str) -> set[str]:
        return {d.split("<")[0].split(">")[0].split("=")[0].strip() for d in extras[extra]}

    assert {"pyspark", "pandas", "numpy"} <= of("spark")
    assert "matplotlib" in of("report")
    every = set().union(*(of(extra) for extra in extras if extra not in ("all", "test")))
    assert of("all") == every  # all = every extra but the test tools
    assert '".[all,test]"' in (ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8")


def test_core_replay_and_simulator_work_without_spark_or_matplotlib(tmp_path: Path) -> None:
    trace = tmp_path / "in.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in [
        {"type": "send", "id": "a", "kind": "FR"}, {"type": "arrive", "id": "a"}]))
    done = run_blocked("replay", "slotted", "-i", "in.jsonl", "-o", "out.parquet",
                       cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # at-most-once Parquet -> Parquet: without numpy the row path, the same decisions
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"type": "msg", "receiver": "s1", "conn": f"c{i % 3}", "ts": 1 + i // 2,
             "at": 10 + i} for i in range(12)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "m.parquet")
    args = ["replay", "atmostonce", "-i", "m.parquet", "--estimator", "unlimited",
            "--gc-every", "5"]
    done = run_blocked(*args, "-o", "slow.parquet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert cli_main([*args[:3], str(tmp_path / "m.parquet"), *args[4:], "-o",
                 str(tmp_path / "fast.parquet")]) == 0
    assert pq.read_table(tmp_path / "slow.parquet").equals(
        pq.read_table(tmp_path / "fast.parquet"))
    done = run_blocked("simulate", "merge", "--out", "ds", "--set", "duration=200",
                       "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "ds" / "manifest.json").exists()
    done = run_blocked("--version", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("timebound ")


@pytest.mark.parametrize(("argv", "extra"), [
    (["pipeline", "ds", "--out", "o"], "spark"),
    (["report", "."], "report"),
    (["demo", "--out", "d"], "spark"),
])
def test_a_missing_extra_is_named_in_one_line(tmp_path: Path, argv: list[str],
                                              extra: str) -> None:
    (tmp_path / "ds").mkdir()
    done = run_blocked(*argv, cwd=tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"pip install 'timebound[{extra}]'" in lines[0], lines
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]  # demo: nothing ran
