"""Imports go downward only: ``timebound.core`` imports nothing of ours but ``core``
and ``timebound.errors``, and nothing that does I/O, reads clocks or draws randomness."""

from __future__ import annotations

import ast
from pathlib import Path

import timebound

PACKAGE = Path(timebound.__file__).parent
CORE = PACKAGE / "core"
FORBIDDEN_IN_CORE = {
    "socket", "asyncio", "time", "random", "threading", "os", "io", "secrets",
    "datetime", "subprocess", "multiprocessing", "pyarrow", "pyspark", "pandas",
    "selectors", "uuid", "pathlib", "tempfile", "shutil",
}


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def test_core_imports_only_core_errors_and_pure_stdlib() -> None:
    modules = sorted(CORE.rglob("*.py"))
    assert modules, "core has no modules"
    for module in modules:
        for name in _imports(module):
            top = name.split(".")[0]
            if top == "timebound":
                assert name.startswith("timebound.core") or name == "timebound.errors", (
                    f"{module.relative_to(PACKAGE)} imports {name}"
                )
            else:
                assert top not in FORBIDDEN_IN_CORE, f"{module.relative_to(PACKAGE)} imports {name}"


def test_report_does_not_import_protocol_objects() -> None:
    report = PACKAGE / "report"
    for module in sorted(report.rglob("*.py")) if report.exists() else []:
        for name in _imports(module):
            assert not name.startswith("timebound.core"), f"{module} imports {name}"


def test_no_layer_imports_upward() -> None:
    """Drivers may import core; core and errors never import a driver."""
    drivers = {"replay", "net", "sim", "pipeline", "report", "cli", "demo"}
    for module in sorted((PACKAGE / "core").rglob("*.py")):
        for name in _imports(module):
            parts = name.split(".")
            if parts[0] == "timebound" and len(parts) > 1:
                assert parts[1] not in drivers, f"{module} imports driver {name}"
