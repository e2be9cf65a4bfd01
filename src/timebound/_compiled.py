"""The at-most-once core compiled with mypyc, when built and current; else pure Python.

The SCMP receiver (``timebound.core.atmostonce``: ``_events``, ``_estimators``,
``_receiver``) is plain typed Python and stays the one specification.
mypyc compiles those same files, unchanged, to C extensions (as black and mypy ship):
the Spark operator and the replay then decide a message in about 0.5 us instead of
0.7-0.9 us. Nothing else changes: same classes, same decisions (tests run on whichever
is in use, and ``tests/test_compiled_core.py`` checks the two equal on generated traces).

- ``scripts/compile_core.py build`` (``scripts/setup.sh`` runs it; it needs mypy
  and a C compiler, and failing leaves the pure Python in use) writes each extension
  beside its ``.py`` and mypyc's shared runtime library in the folder holding the
  ``timebound`` package, and records what it wrote and each source's SHA-256 in
  ``timebound/core/atmostonce/.compiled.json``; a failed or interrupted build removes
  what it wrote. ``... clean`` removes exactly the recorded files.
- At import (``timebound/__init__.py`` calls ``select``): if any compiled source has
  changed since the build, or ``TIMEBOUND_PURE_PYTHON=1``, a finder placed first on
  ``sys.meta_path`` loads all three modules from their ``.py`` files, so a stale build
  never runs and the compiled and pure modules never mix.
- ``status()`` says which is in use (benchmark output).
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import signal
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

PACKAGE = "timebound.core.atmostonce"
MODULES = ("_events", "_estimators", "_receiver", "_drive")
_HERE = os.path.dirname(os.path.abspath(__file__))
_FOLDER = os.path.join(_HERE, "core", "atmostonce")
RECORD = os.path.join(_FOLDER, ".compiled.json")
PURE_ENV = "TIMEBOUND_PURE_PYTHON"


def _digest(name: str) -> str:
    with open(os.path.join(_FOLDER, f"{name}.py"), "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def _record() -> dict[str, Any] | None:
    try:
        with open(RECORD, encoding="utf-8") as handle:
            found = json.load(handle)
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def current() -> bool:
    """A build exists for this interpreter and every compiled source is unchanged."""
    record = _record()
    if record is None or record.get("tag") != sys.implementation.cache_tag:
        return False
    sources = record.get("sources", {})
    try:
        return all(sources.get(name) == _digest(name) for name in MODULES) and all(
            os.path.exists(path) for path in record.get("files", []))
    except OSError:
        return False


class _PureFinder:
    """Finds the compiled modules' ``.py`` files (before the extension finder)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package != PACKAGE or name not in MODULES:
            return None
        return importlib.util.spec_from_file_location(
            fullname, os.path.join(_FOLDER, f"{name}.py"))


_selected: str | None = None


def select() -> None:
    """Decide, once per process, before the core is imported (module docstring)."""
    global _selected
    if _selected is not None:
        return
    built = os.path.exists(RECORD) or any(
        name.startswith(MODULES) and name.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
        for name in os.listdir(_FOLDER))
    if not built:
        _selected = "pure-Python core"
    elif os.environ.get(PURE_ENV) == "1" or not current():
        sys.meta_path.insert(0, _PureFinder())
        _selected = "pure-Python core" + ("" if os.environ.get(PURE_ENV) == "1"
                                          else " (compiled build is stale)")
    else:
        _selected = "mypyc-compiled core"


def status() -> str:
    """Which core this process runs: ``mypyc-compiled core`` or ``pure-Python core``."""
    select()
    module = sys.modules.get(f"{PACKAGE}._receiver")
    if module is not None:
        compiled = not (getattr(module, "__file__", "") or "").endswith(".py")
        return "mypyc-compiled core" if compiled else "pure-Python core"
    return _selected or "pure-Python core"


def build() -> list[str]:
    """Compile the three modules in place; returns the files written (see docstring)."""
    import tempfile

    from mypyc.build import mypycify
    from setuptools import Distribution  # type: ignore[import-untyped]

    root = os.path.dirname(_HERE)  # the folder holding the timebound package
    clean()
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    before = {folder: set(os.listdir(folder)) for folder in (root, _FOLDER)}

    def written() -> list[str]:
        return [os.path.join(folder, name) for folder, names in before.items()
                for name in set(os.listdir(folder)) - names if name.endswith(suffixes)]

    old = os.getcwd()
    try:
        with tempfile.TemporaryDirectory(prefix="timebound-mypyc-") as tmp:
            os.chdir(root)
            os.environ["MYPY_CACHE_DIR"] = os.path.join(tmp, "mypy-cache")  # not in src
            paths = [os.path.join("timebound", "core", "atmostonce", f"{n}.py") for n in MODULES]
            extensions = mypycify(paths, opt_level="3", target_dir=os.path.join(tmp, "c"))
            dist = Distribution({"name": "timebound-core", "ext_modules": extensions})
            command: Any = dist.get_command_obj("build_ext")
            command.inplace = True
            command.build_temp = os.path.join(tmp, "temp")
            command.build_lib = os.path.join(tmp, "lib")
            dist.run_command("build_ext")
    except BaseException:  # a failed or interrupted build leaves none of its files
        for path in written():
            os.remove(path)
        raise
    finally:
        os.chdir(old)
    files = written()
    with open(RECORD, "w", encoding="utf-8") as handle:
        json.dump({"tag": sys.implementation.cache_tag, "files": sorted(files),
                   "sources": {name: _digest(name) for name in MODULES}}, handle, indent=1)
    return sorted(files)


def clean() -> list[str]:
    """Remove the files a previous ``build`` recorded (and only those)."""
    record = _record() or {}
    removed = []
    for path in record.get("files", []):
        if isinstance(path, str) and os.path.exists(path):
            os.remove(path)
            removed.append(path)
    if os.path.exists(RECORD):
        os.remove(RECORD)
    return removed


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args not in (["build"], ["clean"], ["status"]):
        print("usage: scripts/compile_core.py build|clean|status", file=sys.stderr)
        return 2
    if args == ["status"]:
        print(status())
        return 0
    if args == ["clean"]:
        for path in clean():
            print(f"removed {path}")
        return 0
    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)  # unwinds through build(): its files are removed

    signal.signal(signal.SIGTERM, stop)
    try:
        files = build()
    except (KeyboardInterrupt, SystemExit) as exc:
        print("timebound: compiled core build interrupted: nothing of it was kept",
              file=sys.stderr)
        return exc.code if isinstance(exc, SystemExit) and isinstance(exc.code, int) else 130
    except Exception as exc:  # no mypy, no compiler...: the pure Python stays in use
        print(f"timebound: compiled core not built ({type(exc).__name__}: "
              f"{str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}); "
              "the pure-Python core is used", file=sys.stderr)
        return 1
    print(f"compiled core: {len(files)} files written")
    return 0
