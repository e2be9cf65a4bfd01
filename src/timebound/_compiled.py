"""The core compiled with mypyc, when built and current; else pure Python.

Compiled (``MODULES``): the SCMP receiver (``timebound.core.atmostonce``: ``_events``,
``_estimators``, ``_table``, ``_receiver``, and ``_drive``, its loop over a column of
messages), the at-most-once RPC (``timebound.core.rpc``: ``_records``, ``_messages``,
``_client``, ``_server``, ``_live_messages``, ``_live``, ``_caller``), the datagram
frame codec (``timebound.core.wire._frame``) and the live RPC's asyncio driver
(``timebound.net``: ``_clock``, ``_client``, ``_handlers``, ``_server``; not core, but a live null
call runs it on both sides and reads its clock four times). They are plain typed
Python and stay the one specification: mypyc compiles those same files to C
extensions (as black and mypy ship). Why: the Spark operator and the replay decide a
message in about 0.5 us instead of 0.7-0.9 us, and one live null call costs the client
and server cores about 3.5 us of CPU instead of 9 pure
(``timebound.net._bench.core_round_trip_cpu_us``); compiling the driver too takes
about 2 us more off a null call in one process (``benchmarks/README.md``).
Nothing else changes: same classes, same decisions (tests run on whichever is in use;
``tests/test_compiled_core.py`` and ``tests/test_compiled_rpc.py`` check the two equal
on generated traces). What mypyc cannot compile stays in uncompiled modules beside
them (``atmostonce/_resilience.py``: classes a driver may subclass), the records of
``rpc/_records.py`` are written out by hand and not ``Generic`` (mypyc cannot build a
``Generic`` dataclass, and mishandles a generic class's weak references), and frozen
records pickle through their constructor (``core/_frozen.py``).

- ``scripts/compile_core.py build`` (``scripts/setup.sh`` runs it; it needs mypy
  and a C compiler, and failing leaves the pure Python in use) compiles every module
  of ``MODULES`` in one mypyc group (they call each other's classes directly), writes
  each extension beside its ``.py`` and mypyc's shared runtime library in the folder
  holding the ``timebound`` package, and records what it wrote and each source's
  SHA-256 in one file, ``timebound/core/.compiled.json``; a failed or interrupted
  build removes what it wrote. ``... clean`` removes exactly the recorded files (and
  those of a build recorded in ``core/atmostonce/.compiled.json`` by an older
  version, which compiled the receiver alone).
- At import (``timebound/__init__.py`` calls ``select``): if any compiled source has
  changed since the build, or ``TIMEBOUND_PURE_PYTHON=1``, a finder placed first on
  ``sys.meta_path`` loads every module of ``MODULES`` from its ``.py`` file, so a
  stale build never runs and the compiled and pure modules never mix (a compiled
  module calling a pure one of its group as if compiled would crash).
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

#: The compiled modules, by package. They are built together (one mypyc group: they
#: call each other's classes directly) and loaded together, all compiled or all pure.
PACKAGES: dict[str, tuple[str, ...]] = {
    "timebound.core.atmostonce": ("_events", "_estimators", "_table", "_receiver", "_drive"),
    "timebound.core.wire": ("_frame", "_records"),
    "timebound.core.rpc": ("_records", "_messages", "_client", "_server", "_live_messages",
                           "_live", "_caller"),
    "timebound.net": ("_clock", "_client", "_handlers", "_workers", "_server"),
}
MODULES = tuple(f"{package}.{name}" for package, names in PACKAGES.items() for name in names)
_HERE = os.path.dirname(os.path.abspath(__file__))
_FOLDERS = {package: os.path.join(os.path.dirname(_HERE), *package.split("."))
            for package in PACKAGES}
RECORD = os.path.join(_HERE, "core", ".compiled.json")
#: Where builds of the at-most-once modules alone recorded themselves (``clean`` and
#: ``build`` remove what such a build wrote; ``select`` sees its extensions as stale).
_OLD_RECORD = os.path.join(_FOLDERS["timebound.core.atmostonce"], ".compiled.json")
PURE_ENV = "TIMEBOUND_PURE_PYTHON"


def _source(module: str) -> str:
    package, _, name = module.rpartition(".")
    return os.path.join(_FOLDERS[package], f"{name}.py")


def _digest(module: str) -> str:
    with open(_source(module), "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def _record(path: str = RECORD) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
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
        return all(sources.get(module) == _digest(module) for module in MODULES) and all(
            os.path.exists(path) for path in record.get("files", []))
    except OSError:
        return False


class _PureFinder:
    """Finds the compiled modules' ``.py`` files (before the extension finder)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MODULES:
            return None
        return importlib.util.spec_from_file_location(fullname, _source(fullname))


_selected: str | None = None


def _extensions() -> bool:
    """Whether an extension of a compiled module lies beside its source."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    for package, names in PACKAGES.items():
        for found in os.listdir(_FOLDERS[package]):
            if found.endswith(suffixes) and found.split(".")[0] in names:
                return True
    return False


def select() -> None:
    """Decide, once per process, before the core is imported (module docstring)."""
    global _selected
    if _selected is not None:
        return
    if not (os.path.exists(RECORD) or _extensions()):
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
    for module in MODULES:  # the first one imported tells (they load all alike)
        loaded = sys.modules.get(module)
        if loaded is not None:
            compiled = not (getattr(loaded, "__file__", "") or "").endswith(".py")
            return "mypyc-compiled core" if compiled else "pure-Python core"
    return _selected or "pure-Python core"


def build() -> list[str]:
    """Compile every module of ``MODULES`` in place, in one mypyc group; returns the
    files written (see the module docstring)."""
    import tempfile

    from mypyc.build import mypycify
    from setuptools import Distribution  # type: ignore[import-untyped]

    root = os.path.dirname(_HERE)  # the folder holding the timebound package
    clean()
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    folders = [root, *_FOLDERS.values()]
    before = {folder: set(os.listdir(folder)) for folder in folders}

    def written() -> list[str]:
        return [os.path.join(folder, name) for folder, names in before.items()
                for name in set(os.listdir(folder)) - names if name.endswith(suffixes)]

    old, old_cache = os.getcwd(), os.environ.get("MYPY_CACHE_DIR")
    try:
        with tempfile.TemporaryDirectory(prefix="timebound-mypyc-") as tmp:
            os.chdir(root)
            os.environ["MYPY_CACHE_DIR"] = os.path.join(tmp, "mypy-cache")  # not in src
            paths = [os.path.relpath(_source(module), root) for module in MODULES]
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
        if old_cache is None:
            os.environ.pop("MYPY_CACHE_DIR", None)
        else:
            os.environ["MYPY_CACHE_DIR"] = old_cache
    files = written()
    with open(RECORD, "w", encoding="utf-8") as handle:
        json.dump({"tag": sys.implementation.cache_tag, "files": sorted(files),
                   "sources": {module: _digest(module) for module in MODULES}},
                  handle, indent=1)
    return sorted(files)


def clean() -> list[str]:
    """Remove the files a previous ``build`` recorded (and only those), and the record."""
    removed = []
    for path in (RECORD, _OLD_RECORD):
        record = _record(path) or {}
        for built in record.get("files", []):
            if isinstance(built, str) and os.path.exists(built):
                os.remove(built)
                removed.append(built)
        if os.path.exists(path):
            os.remove(path)
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
