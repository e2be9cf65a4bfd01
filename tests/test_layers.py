"""Imports go downward only (the layering of docs/design.md), checked on EVERY module of
``src/timebound``:

- leaves: ``timebound.errors`` (nothing of ours), ``timebound.contract`` (errors only);
- ``timebound.core``: only core and errors, and no stdlib module that does I/O, reads
  clocks or draws randomness;
- the shared layer ``timebound.adapters``: only core, errors and contract (+ pure
  stdlib; no pyarrow, pyspark, numpy...);
- leaf helpers ``timebound.storage`` (errors, core), ``timebound.sparkutil`` (errors
  only: the Spark plumbing shared by ``pipeline`` and ``stream``) and
  ``timebound._safety``, ``timebound.claims`` (errors, contract), ``timebound._compiled``
  (nothing of ours: which build of the compiled core modules is imported),
  ``timebound.durations`` (errors: wall-clock durations with their unit),
  ``timebound.exitcodes`` (nothing of ours: every command's exit statuses),
  ``timebound.protocols`` (nothing of ours: each protocol's pieces, named),
  ``timebound.measures`` (contract, errors: each measure once, as an aggregate);
- ``timebound.arguments`` (adapters, contract, core, errors): command-line flags
  several drivers' commands share (``replay``, ``net`` and ``stream`` may import it);
  ``timebound.arrowtypes`` (contract: the contract's column types as Arrow types);
- ``timebound.columnar`` (the column-wise at-most-once decider the Spark drivers and
  the library share): adapters, contract, core, errors and the leaf helpers;
- ``timebound.spark`` (the library of DataFrame operators, with
  ``timebound.spark.traces``: the operators over the trace-dataset tables): adapters,
  contract, core, errors, columnar and the leaf helpers -- never a driver, ``cli``,
  ``demo`` or ``sweep``;
- drivers ``replay``, ``sim``, ``pipeline``, ``net``, ``stream``: adapters, contract,
  core, errors, columnar and the leaf helpers, and themselves -- never another driver, never
  ``report``, ``cli``, ``demo`` or ``sweep``; ``pipeline`` and ``stream`` also
  ``spark``, whose clients they are (every Spark operator they run is the library's);
- ``timebound.report``: never core or adapters (it reads metrics tables);
- top: ``cli``, ``demo``, ``sweep`` (orchestration) and the package ``__init__``.

Every module must belong to a layer: a new top-level module or package fails here
until it is given one. No package imports another package's private module or name
(a package: every folder, sub-packages such as ``spark.traces`` and ``core.<x>``
included; a sub-package may use its ancestors' private parts, never the reverse);
what one uses of another is exported under a public name (only the house's own
private helpers, ``HOUSE_PRIVATE``, are exempt).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

import timebound

PACKAGE = Path(timebound.__file__).parent

FORBIDDEN_IN_CORE = {
    "socket", "asyncio", "time", "random", "threading", "os", "io", "secrets",
    "datetime", "subprocess", "multiprocessing", "pyarrow", "pyspark", "pandas",
    "selectors", "uuid", "pathlib", "tempfile", "shutil", "numpy", "signal",
}

LEAF_HELPERS = {"storage", "sparkutil", "_safety", "claims", "_compiled", "durations",
                "arrowtypes", "exitcodes", "protocols", "measures"}
DRIVERS = {"replay", "sim", "pipeline", "net", "stream"}
TOP = {"cli", "demo", "sweep", "examples_cli", "__init__"}

#: layer -> the timebound layers it may import (besides itself).
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "contract": {"errors"},
    "measures": {"errors", "contract"},
    "core": {"errors"},
    "adapters": {"core", "errors", "contract"},
    "storage": {"errors", "core"},
    "sparkutil": {"errors"},
    "durations": {"errors"},
    "exitcodes": set(),
    "protocols": set(),
    "arguments": {"adapters", "contract", "core", "errors"},
    "arrowtypes": {"contract"},
    "_compiled": set(),
    "_safety": {"errors", "contract"},
    "claims": {"errors", "contract"},
    "examples": set(),
    "report": {"errors", "contract", "claims", "_safety", "protocols"},
    "columnar": {"adapters", "contract", "core", "errors", *LEAF_HELPERS},
    **{driver: {"adapters", "contract", "core", "errors", "columnar", *LEAF_HELPERS}
       for driver in DRIVERS},
    "spark": {"adapters", "contract", "core", "errors", "columnar", *LEAF_HELPERS},
}
# The command lines of the drivers that run an at-most-once receiver declare its flags
# in one place.
for _driver in ("replay", "net", "stream"):
    ALLOWED[_driver] |= {"arguments"}
# ``timebound.spark.compare(report=...)`` writes the report layer's page (lazily).
ALLOWED["spark"] |= {"report"}
# The Spark drivers are clients of the library: every operator they run is its own.
ALLOWED["pipeline"] |= {"spark"}
ALLOWED["stream"] |= {"spark"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> list[str]:
    """Absolute names of every module ``path`` imports (lazy and TYPE_CHECKING imports
    included; relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = _module_name(path).split(".")
    if path.name != "__init__.py":
        here = here[:-1]  # the package a plain module is in
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names.append(module)
            # ``from timebound import adapters`` imports the layer ``adapters``
            if module == "timebound":
                names.extend(f"timebound.{alias.name}" for alias in node.names)
    return names


def _layer(name: str) -> str:
    """The layer of a module ``timebound.x...``: ``x`` (``__init__`` for the package)."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _modules() -> list[Path]:
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 50, "the walk found too few modules"
    return modules


def test_every_module_has_a_layer() -> None:
    known = set(ALLOWED) | TOP
    for module in _modules():
        layer = _layer(_module_name(module))
        assert layer in known, (
            f"{module.relative_to(PACKAGE)}: new top-level module or package '{layer}' "
            "has no layer in tests/test_layers.py (add it to ALLOWED or TOP)")


def test_imports_go_downward_only() -> None:
    problems: list[str] = []
    for module in _modules():
        layer = _layer(_module_name(module))
        if layer in TOP:
            continue
        allowed = ALLOWED[layer] | {layer}
        for name in _imports(module):
            if name.split(".")[0] != "timebound" or name == "timebound":
                continue
            target = _layer(name)
            if target not in allowed:
                problems.append(f"{module.relative_to(PACKAGE)} ({layer}) imports {name}")
    assert not problems, "imports that run back up the house:\n" + "\n".join(problems)


def test_core_imports_only_core_errors_and_pure_stdlib() -> None:
    modules = sorted((PACKAGE / "core").rglob("*.py"))
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


def test_leaves_and_shared_layer_import_only_the_standard_library() -> None:
    """contract, errors and adapters run anywhere a core runs: no third-party import."""
    roots = [PACKAGE / "contract.py", PACKAGE / "errors.py",
             *sorted((PACKAGE / "adapters").rglob("*.py"))]
    for module in roots:
        for name in _imports(module):
            top = name.split(".")[0]
            assert top == "timebound" or top in sys.stdlib_module_names or top == "__future__", (
                f"{module.relative_to(PACKAGE)} imports {name} (not the standard library)")


def test_report_does_not_import_protocol_objects() -> None:
    report = PACKAGE / "report"
    for module in sorted(report.rglob("*.py")):
        for name in _imports(module):
            assert not name.startswith(("timebound.core", "timebound.adapters")), (
                f"{module} imports {name}")


def test_no_driver_imports_another_driver_or_the_cli() -> None:
    for module in _modules():
        layer = _layer(_module_name(module))
        if layer not in DRIVERS:
            continue
        for name in _imports(module):
            target = _layer(name) if name.startswith("timebound.") else None
            assert target is None or target == layer or target not in DRIVERS | TOP, (
                f"{module.relative_to(PACKAGE)} imports {name}")


def test_the_walk_sees_relative_and_lazy_imports(tmp_path: Path) -> None:
    """The checker itself: a lazy import inside a function is found."""
    probe = PACKAGE / "sim" / "_replay.py"
    assert "timebound.adapters" in _imports(probe)
    assert _layer("timebound.sim._replay") == "sim" and _layer("timebound") == "__init__"


#: Private modules the whole house shares (leaf helpers named as private to timebound).
HOUSE_PRIVATE = {"timebound._safety", "timebound._compiled", "timebound.core._frozen"}


def _package(name: str) -> str:
    """The package that owns module ``name`` (``timebound.x.y._z``): its folder,
    ``x.y`` (a sub-package is a package of its own); the top-level package itself is
    ``__init__``."""
    parts = name.split(".")
    if PACKAGE.parent.joinpath(*parts).is_dir():
        return ".".join(parts[1:]) or "__init__"
    return ".".join(parts[1:-1]) or "__init__"


def _private_owner(module: str, names: list[str]) -> list[tuple[str, str]]:
    """What of ``module`` (and of the ``names`` imported from it) is private, each with
    the package it is private to: the package holding the first private part."""
    parts = module.split(".")
    found: list[tuple[str, str]] = []
    for i, part in enumerate(parts):
        if part.startswith("_") and i > 0:
            found.append((module, ".".join(parts[1:i]) or "__init__"))
            break
    found += [(f"{module}.{n}", _package(module)) for n in names
              if n.startswith("_") and not n.startswith("__")]
    return found


def _private_reaches(path: Path, name: str | None = None) -> list[str]:
    """Imports in ``path`` (the module ``name``, by default its own) of a private
    module or name of a package it is not inside. Private means private to a
    package's subtree: a sub-package may use its ancestors' private modules (they
    are one package, split for size), while a parent reaching into its sub-package's
    private modules, or a sibling into a sibling's, is a reach (``spark`` into
    ``spark.traces._x``, ``core.rpc`` into ``core.atmostonce._x``)."""
    own = _package(name or _module_name(path))
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            modules = [(node.module, [a.name for a in node.names])]
        elif isinstance(node, ast.Import):
            modules = [(a.name, []) for a in node.names]
        else:
            continue
        for module, names in modules:
            if not module.startswith("timebound.") or module in HOUSE_PRIVATE:
                continue
            found += [what for what, owner in _private_owner(module, names)
                      if own != owner and not own.startswith(owner + ".")]
    return found


def test_no_package_reaches_into_another_packages_private_parts() -> None:
    problems = []
    for module in _modules():
        rel = module.relative_to(PACKAGE).as_posix()
        problems += [f"{rel} imports {name}" for name in _private_reaches(module)]
    assert not problems, ("private modules or names of another package (export them "
                          "under a public name):\n" + "\n".join(problems))


def test_the_private_reach_check_finds_one(tmp_path: Path) -> None:
    probe = tmp_path / "sweep.py"
    probe.write_text("def f():\n    from timebound.sim._spark import map_tasks\n"
                     "from timebound.pipeline.job import _publish\n")
    assert sorted(_private_reaches(probe, "timebound.sweep")) == [
        "timebound.pipeline.job._publish", "timebound.sim._spark"]
    # Sub-packages: a parent reaching into its sub-package's private modules, or a
    # sibling into a sibling's, is a reach; a sub-package using its parent's is not.
    probe.write_text("from timebound.spark.traces._rows import grouping_key\n"
                     "from timebound.spark._check import locked\n"
                     "from timebound.core.atmostonce._table import ConnectionTable\n")
    assert sorted(_private_reaches(probe, "timebound.spark._batch")) == [
        "timebound.core.atmostonce._table", "timebound.spark.traces._rows"]
    assert _private_reaches(probe, "timebound.spark.traces._rows") == [
        "timebound.core.atmostonce._table"]
    assert sorted(_private_reaches(probe, "timebound.core.rpc._live")) == [
        "timebound.core.atmostonce._table", "timebound.spark._check",
        "timebound.spark.traces._rows"]


def _module_graph(paths: list[Path], root: Path) -> dict[str, list[str]]:
    """Module -> the modules of ``paths`` it imports (lazy and TYPE_CHECKING imports
    included; ``from pkg import sub`` imports ``pkg.sub``, not ``pkg`` again)."""
    def name_of(path: Path) -> str:
        parts = list(path.relative_to(root).with_suffix("").parts)
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    names = {name_of(p): p for p in paths}
    graph: dict[str, list[str]] = {}
    for name, path in names.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        found: list[str] = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                module = (".".join(here[: len(here) - (node.level - 1)]
                                   + ([node.module] if node.module else []))
                          if node.level else node.module or "")
                subs = [f"{module}.{a.name}" for a in node.names
                        if f"{module}.{a.name}" in names]
                found += subs if len(subs) == len(node.names) else [module, *subs]
        graph[name] = [m for m in found if m in names and m != name]
    return graph


def _circles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Every back edge of a depth-first walk, as the circle it closes (iterative: no
    change of the interpreter's recursion limit, which other tests rely on)."""
    state: dict[str, int] = {}
    found: list[list[str]] = []
    for root in graph:
        if root in state:
            continue
        path: list[str] = [root]
        todo: list[list[str]] = [list(graph[root])]
        state[root] = 1
        while path:
            if not todo[-1]:
                state[path.pop()] = 2
                todo.pop()
                continue
            nxt = todo[-1].pop(0)
            if state.get(nxt) == 1:
                found.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                todo.append(list(graph[nxt]))
    return found


def test_the_import_graph_has_no_circle() -> None:
    """No module imports, even lazily, a module that imports it back."""
    assert _circles(_module_graph(_modules(), PACKAGE.parent)) == []


def test_the_circle_check_finds_one(tmp_path: Path) -> None:
    package = tmp_path / "timebound" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from timebound.pkg import b\n")
    (package / "b.py").write_text("def f():\n    from timebound.pkg import a  # lazy\n")
    graph = _module_graph(sorted(package.rglob("*.py")), tmp_path)
    assert _circles(graph) == [["timebound.pkg.a", "timebound.pkg.b", "timebound.pkg.a"]]


#: Private fields of the standard library the house reads (argparse keeps the parsers
#: of a command's subcommands only there).
STDLIB_PRIVATE_FIELDS = {"_actions"}


def _private_fields(paths: list[Path], name_of: Any) -> list[str]:
    """``obj._field`` reads or writes (``obj`` not ``self``/``cls``) of a private name
    no module of the same package (or of an ancestor: a sub-package is part of it)
    defines, but one of another package does: one package reaching into another's
    objects."""
    defined: dict[str, set[str]] = {}
    uses: list[tuple[str, str, str, int]] = []
    for path in paths:
        module = name_of(path)
        package = _package(module)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = defined.setdefault(package, set())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                  and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and node.value.isidentifier():
                names.add(node.value)  # __slots__ entries
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__")
                    and node.attr not in STDLIB_PRIVATE_FIELDS
                    and not (isinstance(node.value, ast.Name)
                             and node.value.id in ("self", "cls"))):
                uses.append((package, module, node.attr, node.lineno))
    def own(package: str, other: str) -> bool:  # the package itself or an ancestor
        return package == other or package.startswith(other + ".")

    return [f"{module}:{line} reaches {attr}" for package, module, attr, line in uses
            if not any(attr in names for other, names in defined.items() if own(package, other))
            and any(attr in names for other, names in defined.items() if not own(package, other))]


def test_no_package_reaches_into_another_packages_objects() -> None:
    """No ``obj._field`` of another package's object: what one package needs
    of another's objects is a public method or property."""
    assert _private_fields(_modules(), _module_name) == []


def test_the_private_field_check_finds_one(tmp_path: Path) -> None:
    (tmp_path / "adapters").mkdir()
    (tmp_path / "replay").mkdir()
    (tmp_path / "adapters" / "a.py").write_text(
        "class A:\n    def __init__(self):\n        self._count = 0\n")
    (tmp_path / "replay" / "b.py").write_text("def f(a):\n    a._count += 1\n")

    def name_of(path: Path) -> str:
        return "timebound." + ".".join(path.relative_to(tmp_path).with_suffix("").parts)

    found = _private_fields(sorted(tmp_path.rglob("*.py")), name_of)
    assert found == ["timebound.replay.b:2 reaches _count"]


#: The Spark calls that run a protocol's operator over rows (grouped, stateful or
#: per-batch Python code): the library's (``timebound.spark``), never a command's.
OPERATOR_CALLS = {"applyInArrow", "applyInPandas", "applyInPandasWithState",
                  "transformWithState", "transformWithStateInPandas", "mapInArrow",
                  "mapInPandas", "arrow_udf", "pandas_udf", "udf"}


def _operator_calls(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else (
                func.id if isinstance(func, ast.Name) else None)
            if name in OPERATOR_CALLS:
                found.append(f"{name} (line {node.lineno})")
    return found


def test_the_spark_commands_are_clients_of_the_library() -> None:
    """``timebound pipeline`` and ``timebound stream`` run no operator of their own: every
    Spark operator over a protocol's rows is ``timebound.spark``'s."""
    problems = []
    for package in ("pipeline", "stream"):
        for module in sorted((PACKAGE / package).rglob("*.py")):
            rel = module.relative_to(PACKAGE.parent)
            problems += [f"{rel}: {call}" for call in _operator_calls(module)]
    assert not problems, ("a command runs an operator of its own (move it into "
                          f"timebound.spark.traces): {problems}")
    library = [call for module in sorted((PACKAGE / "spark").rglob("*.py"))
               for call in _operator_calls(module)]
    assert len(library) >= 5, library  # the check sees the library's own calls


def test_the_operator_check_finds_one(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def f(df, g, s):\n    return df.groupBy('run').applyInArrow(g, s)\n")
    assert _operator_calls(probe) == ["applyInArrow (line 2)"]


#: The command layer: the modules that may build or read a command line (argparse).
#: Everything else takes typed values, so a library caller never meets argparse.
COMMAND_LAYER = {
    "cli", "demo", "sweep", "examples_cli", "arguments", "durations", "_safety",
    "net._bench", "net._config", "net._keygen", "net.live", "stream.bench",
}


def _in_command_layer(name: str) -> bool:
    """Whether module ``timebound.<name>`` is of the command layer: a module or
    package named ``cli`` or ``*_cli``, a replay command, or one of ``COMMAND_LAYER``."""
    parts = name.split(".")
    return (any(p == "cli" or p.endswith("_cli") for p in parts) or parts[0] == "replay"
            or name in COMMAND_LAYER)


def _imports_argparse(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import) and any(
                a.name.split(".")[0] == "argparse" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "argparse":
            return True
    return False


def _argparse_users(named: list[tuple[Path, str]]) -> list[str]:
    """The modules of ``named`` (path, ``timebound.x.y``) outside the command layer
    that import argparse."""
    return [name for path, name in named
            if not _in_command_layer(name.removeprefix("timebound."))
            and _imports_argparse(path)]


def test_argparse_only_in_the_command_layer() -> None:
    assert _argparse_users([(m, _module_name(m)) for m in _modules()]) == []


def test_the_argparse_check_finds_one(tmp_path: Path) -> None:
    fake = tmp_path / "causal.py"
    fake.write_text("def f():\n    from argparse import Namespace\n")
    assert _argparse_users([(fake, "timebound.adapters.causal"),
                            (fake, "timebound.net.cli.rpc"),
                            (fake, "timebound.replay.causal")]) == ["timebound.adapters.causal"]


#: The longest a module may be (CONTRIBUTING.md: small modules named for what they do).
MAX_MODULE_LINES = 600


def test_no_module_is_over_600_lines() -> None:
    long = {module.relative_to(PACKAGE).as_posix(): n for module in _modules()
            if (n := len(module.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}, f"modules over {MAX_MODULE_LINES} lines (split them): {long}"
