"""The package ships ``py.typed`` (PEP 561): a downstream project checked with
``mypy --strict`` sees timebound's own types, not ``Any``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import timebound

DOWNSTREAM = '''
from timebound.core.atmostonce import Fixed, Receiver

receiver = Receiver(Fixed(10), gc_every=5)
verdict: str = receiver.receive("c", 1, now=1)  # a Verdict, not a str
'''


def test_py_typed_is_shipped_and_read_by_a_downstream_mypy(tmp_path: Path) -> None:
    assert (Path(timebound.__file__).parent / "py.typed").is_file()
    (tmp_path / "downstream.py").write_text(DOWNSTREAM, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                           "downstream.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert 'expression has type "Verdict", variable has type "str"' in done.stdout, done.stdout
    assert "py.typed" not in done.stdout and "missing library stubs" not in done.stdout
