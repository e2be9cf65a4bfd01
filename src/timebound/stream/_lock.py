"""A checkpoint remembers the query it belongs to: protocol, options, source and sink.

Spark's checkpoint records offsets, commits and state, not what the state *means*:
restarted with another ``--gc-every`` the same RocksDB snapshots would be decided by
another receiver, and with another ``--sink`` the output would split across two
folders. So the first start of a query writes ``CHECKPOINT/timebound-options.json``
(the protocol, every protocol option under its flag, and the absolute source and
sink), and every later start compares before Spark starts: the first option that
differs is refused in one line (``UsageError`` naming the flag, exit 2)::

    timebound: error: --gc-every: the checkpoint CK was started with 1000, not 2000;
    use a new --checkpoint or the same options

Not locked: ``--trigger``, ``--max-files-per-trigger``, ``--master`` and ``--conf`` (a
query may be restarted as a service, with another batch size or on a cluster; the
shuffle partitions are frozen by Spark itself, see ``_run.prepare_session``).

A checkpoint with no planned micro-batch (no ``offsets/`` folder: Spark never ran a
batch from it, the sink holds nothing of it) takes the new options: the lock is
rewritten. A checkpoint with batches and no lock (written before this file existed)
ran a retired row engine (at-most-once's and merge's alike) and is refused, as is
one whose lock names a retired engine (``_retired``). tests/test_stream_options_lock.py and
tests/test_stream_engine.py pin each case.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from typing import Any

from timebound.adapters.atmostonce import AtMostOnceOptions
from timebound.adapters.merge import MergeOptions
from timebound.errors import UsageError

LOCK_NAME = "timebound-options.json"
#: The stateful operator of a checkpoint whose lock names none (written before there
#: was a choice). Like ``columnar``, it is retired: such a checkpoint is refused.
LEGACY_ENGINE = "row"
#: Bumped if the lock's layout changes; a lock of another version is refused.
LOCK_VERSION = 1


def option_values(options: AtMostOnceOptions | MergeOptions) -> dict[str, Any]:
    """Every protocol option under its command-line flag (``--gc-every``), in the
    order the flags are declared."""
    if isinstance(options, AtMostOnceOptions):
        fields = dataclasses.asdict(options.receiver)
        fields["classes"] = options.classes
    else:
        fields = dataclasses.asdict(options)
    return {"--" + name.replace("_", "-"): value for name, value in fields.items()}


def _show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def lock_query(checkpoint: str, protocol: str, options: dict[str, Any], source: str,
               sink: str, engine: str | None = None) -> str | None:
    """Write the lock of a fresh checkpoint, or refuse a start that differs from it
    (module docstring). ``checkpoint``, ``source`` and ``sink`` are absolute paths.

    ``engine``: the stateful operator a fresh checkpoint gets (atmostonce: ``grouped``,
    ``applyInPandasWithState``, the one engine). Returns it. A checkpoint started by a
    retired engine -- ``columnar`` (``transformWithStateInPandas``), or ``row``
    (``transformWithState``: a lock that names no engine, or no lock) -- is refused in
    one line that says what to do: Spark restarts a query's state only under the
    operator that wrote it, and this version runs only ``engine``."""
    wanted: dict[str, Any] = {"version": LOCK_VERSION, "protocol": protocol,
                              "options": options, "--source": source, "--sink": sink}
    path = os.path.join(checkpoint, LOCK_NAME)
    started = os.path.isdir(os.path.join(checkpoint, "offsets"))
    saved = _read(path) if started else None
    if saved is None:
        if started and engine is not None:
            _retired(checkpoint, LEGACY_ENGINE, engine)
        if engine is not None:
            wanted["engine"] = engine
        _write(checkpoint, path, wanted)
        return engine
    refuse = "; use a new --checkpoint or the same options"
    if saved.get("version") != LOCK_VERSION or not isinstance(saved.get("options"), dict):
        raise UsageError("--checkpoint", f"{path} was not written by this version of "
                                         f"timebound; use a new --checkpoint")
    if saved.get("protocol") != protocol:
        raise UsageError("--checkpoint", f"the checkpoint {checkpoint} was started by "
                                         f"'timebound stream {saved.get('protocol')}', not "
                                         f"'{protocol}'; use a new --checkpoint")
    old: dict[str, Any] = saved["options"]
    for flag, value in list(options.items()) + [("--source", source), ("--sink", sink)]:
        before = saved.get(flag) if flag in ("--source", "--sink") else old.get(flag)
        if before != value:
            raise UsageError(flag, f"the checkpoint {checkpoint} was started with "
                                   f"{_show(before)}, not {_show(value)}{refuse}")
    extra = [flag for flag in old if flag not in options]
    if extra:
        raise UsageError(extra[0], f"the checkpoint {checkpoint} was started with "
                                   f"{_show(old[extra[0]])}, not none{refuse}")
    if engine is None:
        return None
    started_by = str(saved.get("engine", LEGACY_ENGINE))
    if started_by != engine:
        _retired(checkpoint, started_by, engine)
    return engine


def _retired(checkpoint: str, started_by: str, engine: str) -> None:
    raise UsageError("--checkpoint", f"the checkpoint {checkpoint} was started by the "
                     f"'{started_by}' engine of an earlier timebound, which this version "
                     f"no longer runs (it runs '{engine}'); start again with a new "
                     f"--checkpoint and a new --sink (the new query reads the source "
                     f"folder from its start)")


def _read(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise UsageError("--checkpoint", f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError("--checkpoint", f"{path} is not a timebound options lock")
    return data


def _write(checkpoint: str, path: str, data: dict[str, Any]) -> None:
    """Whole or not at all: a temporary file beside the lock, renamed."""
    try:
        os.makedirs(checkpoint, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=".timebound-options-", dir=checkpoint)
    except OSError as exc:
        raise UsageError("--checkpoint", f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, sort_keys=False)
            handle.write("\n")
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.remove(temp)
        raise
