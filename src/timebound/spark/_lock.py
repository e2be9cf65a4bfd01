"""A library stream's checkpoint remembers what decides its keys and verdicts.

Spark's checkpoint keeps offsets, commits and state, not what the state *means*: a
stream restarted with ``classes=4`` instead of 1 would look its rows up under other
keys and accept resent copies a second time. ``at_most_once`` and ``causal_merge``
on a stream therefore write a lock into the query's checkpoint at its first start
(every option, the role columns with their types, the engine) and refuse a restart
that differs, naming the first difference with both values::

    UsageError: classes: this checkpoint was started with 1, got 4

How, without a hook of our own in ``DataStreamWriter.start``:

- each streaming operator gets a token (``register``), a name that shows in the
  query's analyzed plan (the grouped function's ``__name__``, which Spark prints in
  ``FlatMapGroupsInPandasWithState``, or a working column's name), and its lock
  content is kept here under that token;
- a ``StreamingQueryListener`` (one per session) gets ``onQueryStarted``, which Spark
  calls synchronously on the query's own thread before its first micro-batch. It
  finds the tokens in the query's plan, reads the checkpoint root Spark resolved,
  and compares each operator's lock with ``CHECKPOINT/timebound-operators.json``
  (written whole, through the checkpoint's own Hadoop file system, when absent). Its
  answer -- ``ok`` or the refusal -- goes into a Spark local property of that thread,
  which Spark hands to every task of the query;
- the operator's function reads the property in each task (``verdict``) before it
  decides a row, and raises the refusal (a ``UsageError``; ``typed_errors()`` turns
  Spark's exception back into it). The micro-batch fails before any row is decided
  and nothing is committed; a restart with the same options goes on.

Fail closed: a task that finds no answer (the listener did not run: not a classic
Spark session) raises too. A checkpoint that already has micro-batches but no lock
(started by an earlier version, whose engine Spark cannot restart under this one, or
by a query without these operators) is refused, saying to start on a new
checkpoint. A restart whose first micro-batch reads no row raises nothing until a
row comes: nothing is decided before then.
"""

from __future__ import annotations

import json
import threading
import uuid
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from timebound.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

#: The lock file in the checkpoint root: one entry per locked operator, plan order.
LOCK_NAME = "timebound-operators.json"
LOCK_VERSION = 1
#: The local property prefix of each token's answer.
PROPERTY = "timebound.lock."
OK = "ok"
_TOKEN_PREFIX = "timebound_lock_"

_locks: dict[str, dict[str, Any]] = {}
_guard = threading.Lock()
_listened: weakref.WeakSet[Any] = weakref.WeakSet()


def register(spark: SparkSession, operator: str, fields: Mapping[str, Any]) -> str:
    """A new token for one streaming operator whose lock is ``fields`` (name ->
    JSON value, in the order differences are reported); installs the session's
    listener once. Raises ``UsageError`` on a session that cannot run it."""
    try:
        spark._jsparkSession  # noqa: B018 - a classic session has one
    except AttributeError:
        raise UsageError(operator, "a stream needs a classic Spark session (the restart "
                                   "check runs on the driver's JVM); Spark Connect is "
                                   "not supported") from None
    token = _TOKEN_PREFIX + uuid.uuid4().hex
    with _guard:
        _locks[token] = {"operator": operator, "fields": dict(fields)}
        if spark not in _listened:
            spark.streams.addListener(_listener(spark))
            _listened.add(spark)
    return token


def verdict(token: str) -> None:
    """In a task: raise the refusal of ``token``'s restart check, if any (module
    docstring); nothing when the check passed."""
    from pyspark import TaskContext

    context = TaskContext.get()
    answer = None if context is None else context.getLocalProperty(PROPERTY + token)
    if answer == OK:
        return
    if answer is None:
        raise UsageError("checkpoint", "the restart check did not run for this query "
                                       "(start it from a classic Spark session in the "
                                       "process that built it)")
    option, reason = json.loads(answer)
    raise UsageError(option, reason)


def in_task(token: str) -> None:
    """``verdict`` in an operator's function: the refusal marked as a task's errors are
    (``typed_errors()`` turns Spark's exception back into the ``UsageError``)."""
    from timebound.errors import TimeboundError
    from timebound.sparkutil import marked

    try:
        verdict(token)
    except TimeboundError as exc:
        raise marked(exc) from None


def _show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, list) and len(value) == 2:  # a column: [name, type]
        return f"column {value[0]!r} ({value[1]})"
    return str(value)


def compare(saved: Mapping[str, Any], wanted: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first field (in ``wanted``'s order) whose value differs, as (option,
    reason); None when they agree."""
    for name in dict.fromkeys([*wanted, *saved]):
        before, now = saved.get(name), wanted.get(name)
        if before != now:
            return name, (f"this checkpoint was started with {_show(before)}, got "
                          f"{_show(now)} (use a new checkpoint, or the options it was "
                          "started with)")
    return None


def check(entries: list[dict[str, Any]], saved: Any, started: bool
          ) -> tuple[list[tuple[str, str] | None], bool]:
    """Each entry's refusal (or None) against the saved lock, and whether the lock
    must be written. ``started``: the checkpoint has micro-batches."""
    if saved is None:
        if started:
            why = ("checkpoint", "this checkpoint has micro-batches but no timebound "
                   "lock: it was started by an earlier version of timebound or by a "
                   "query without this operator, and cannot be restarted by this one; "
                   "start the query on a new checkpoint")
            return [why] * len(entries), False
        return [None] * len(entries), True
    kept = saved.get("operators") if isinstance(saved, dict) else None
    if (not isinstance(saved, dict) or saved.get("version") != LOCK_VERSION
            or not isinstance(kept, list)):
        why = ("checkpoint", f"its {LOCK_NAME} was not written by this version of "
               "timebound; start the query on a new checkpoint")
        return [why] * len(entries), False
    answers: list[tuple[str, str] | None] = []
    for i, entry in enumerate(entries):
        old = kept[i] if i < len(kept) and isinstance(kept[i], dict) else {}
        if old.get("operator") != entry["operator"]:
            answers.append(("checkpoint", f"this checkpoint was started by a query whose "
                            f"operator {i + 1} is {old.get('operator', 'none')}, not "
                            f"{entry['operator']}; start the query on a new checkpoint"))
            continue
        answers.append(compare(old.get("fields", {}), entry["fields"]))
    if len(kept) > len(entries) and all(a is None for a in answers):
        answers = [("checkpoint", f"this checkpoint was started with {len(kept)} "
                    f"timebound operators, got {len(entries)}; start the query on a new "
                    "checkpoint")] * len(entries)
    return answers, False


def _listener(spark: SparkSession) -> Any:
    """The session's ``StreamingQueryListener`` (pyspark's class, imported here)."""
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class Listener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:  # noqa: N802 - Spark's name
            _started(spark, str(event.id))

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            pass

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            pass

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            pass

    return Listener()


def _started(spark: SparkSession, query_id: str) -> None:
    """``onQueryStarted``, on the query's thread: answer each of its tokens."""
    jquery = spark._jsparkSession.streams().get(query_id)
    if jquery is None:
        return
    execution = jquery.streamingQuery()
    plan = execution.logicalPlan().toString()
    with _guard:
        found = sorted((plan.index(token), token) for token in _locks if token in plan)
        entries = [_locks[token] for _, token in found]
    if not found:
        return
    answers: list[tuple[str, str] | None]
    try:
        files = _Files(spark, execution.resolvedCheckpointRoot())
        saved = files.read()
        answers, write = check(entries, saved, files.started())
        if write:
            files.write({"version": LOCK_VERSION, "operators": entries})
    except Exception as exc:  # noqa: BLE001 - any failure refuses, in one line
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        answers = [("checkpoint", f"cannot read or write the timebound lock: {reason}")] \
            * len(entries)
    jsc = spark.sparkContext._jsc
    for (_, token), answer in zip(found, answers):
        jsc.setLocalProperty(PROPERTY + token,
                             OK if answer is None else json.dumps(list(answer)))


class _Files:
    """The lock file and the offset log in the checkpoint, through Hadoop's file
    system of the checkpoint (local, HDFS, object stores alike)."""

    def __init__(self, spark: SparkSession, root: str) -> None:
        jvm = spark._jvm
        assert jvm is not None
        self.jvm = jvm
        self.root = root
        self.path = jvm.org.apache.hadoop.fs.Path(root, LOCK_NAME)
        self.fs = self.path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())

    def started(self) -> bool:
        offsets = self.jvm.org.apache.hadoop.fs.Path(self.root, "offsets")
        if not self.fs.exists(offsets):
            return False
        return any(not s.getPath().getName().startswith(".")
                   for s in self.fs.listStatus(offsets))

    def read(self) -> Any:
        if not self.fs.exists(self.path):
            return None
        stream = self.fs.open(self.path)
        try:
            text = self.jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
        finally:
            stream.close()
        try:
            return json.loads(text)
        except ValueError:
            return {"version": None}

    def write(self, data: Mapping[str, Any]) -> None:
        """Whole or not at all: a hidden file beside the lock, renamed."""
        temp = self.jvm.org.apache.hadoop.fs.Path(self.root, "." + LOCK_NAME + ".tmp")
        out = self.fs.create(temp, True)
        try:
            out.write(bytearray(json.dumps(data, indent=1).encode("utf-8") + b"\n"))
        finally:
            out.close()
        if not self.fs.rename(temp, self.path):
            self.fs.delete(temp, False)
            raise OSError(f"cannot rename {temp} to {self.path}")
