"""Spark plumbing shared by the drivers that run on Spark (``pipeline``, ``stream``).

Drivers never import each other, so what both need lives here, a leaf helper beside
``timebound.storage``: it imports only ``timebound.errors`` and the standard library
(never pyspark at import time, never a driver).

Errors: a ``TimeboundError`` raised inside a Spark task (a malformed row met by a
source or a row adapter) reaches the driver as an opaque Spark exception. ``marked``
wraps it in a plain exception whose message is one sentence a user reads as it is
(``carried``), which is also an exact encoding of the typed error:

- ``timebound TraceError: 'SOURCE', line N, field 'FIELD': "REASON"``
- ``timebound SchemaError: table 'TABLE', column 'COLUMN': "REASON"``
- ``timebound UsageError: option 'OPTION': "REASON"``
- ``timebound NAME: "MESSAGE"`` (any other ``TimeboundError``, ``NAME`` its class)

Names are quoted as ``repr`` quotes them (``'...'``, or ``"..."`` when the name holds a
``'`` and no ``"``), reasons always with ``"``; inside the quotes a backslash escapes a
backslash, the quote, and every character that is not printable (``\\n``, ``\\r``,
``\\t``, ``\\xhh``, ``\\uhhhh``, ``\\Uhhhhhhhh``), so the sentence is one line and ends
at its closing quote whatever the text holds (``quoted``, ``unquoted``).
``timebound.spark`` hands the sentence of a row its checks refused to Spark's
``raise_error``. ``rebuild`` finds the sentence in any text (the
exception's message, the JVM's trace, Spark's ``[USER_RAISED_EXCEPTION] ...
SQLSTATE: P0001``) and undoes the quoting; ``translate_errors`` re-raises the typed
error on the driver, so the CLI prints its one line and exits 2.

Session options: ``parse_conf`` turns the ``--conf KEY=VALUE`` items of both drivers'
commands into a dict; ``check_master`` refuses a ``--master`` that is not a Spark master
URL before anything starts.

Spark failures are one line (docs/errors.md). ``start_session`` starts a session so that:

- a start-up failure is one ``UsageError`` naming the option to blame (``--conf K=V``
  when Spark's reason names the key, its words or the value, or when only ``--conf`` was
  given; ``--master`` when only it was given) and Spark's reason, read from the
  exception or from what the JVM printed before it died;
- ``quiet`` (every command without ``--verbose``): the JVM's stderr (its start-up banner,
  its log, a dying JVM's trace) goes to a scratch file instead of the terminal, and
  Py4J's log records (a Py4J call interrupted by Ctrl-C logs its traceback on the root
  logger) are dropped;
- Ctrl-C raises ``KeyboardInterrupt`` at once: PySpark's own SIGINT handler calls the JVM
  from inside the signal handler, re-entering the Py4J connection the main thread is
  waiting on, and prints chained tracebacks. Whoever started the session cancels its
  jobs (``stop_quietly``) before removing its temporary output.

``spark_failure`` turns any other exception raised by Spark on the driver (a JVM error,
a lost connection to the JVM) into one line with Spark's reason; a Python error inside a
task that is not one of our typed errors stays a bug of ours (the CLI's internal error).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import sys
import tempfile
import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from timebound.errors import SchemaError, TimeboundError, TraceError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame

__all__ = ["MARK", "carried", "check_master", "marked", "parse_conf", "quoted",
           "rebuild", "spark_failure", "spark_reason",
           "start_session", "stop_quietly", "stopped_after", "translate_errors",
           "unquoted"]

#: The Spark master a command uses without ``--master``.
DEFAULT_MASTER = "local[*]"
#: How every carried error's sentence starts (``carried``; ``rebuild`` looks for it).
MARK = "timebound "
#: The state store provider ``transformWithState`` needs (the stream and the library).
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
#: The provenance columns ``timebound stream``'s file source adds to every row (the
#: file's name, the row's line in it), which the processors name in errors. Here, not
#: beside the processors, so that the source's Python workers need not import them.
FILE_COLUMN = "_file"
LINE_COLUMN = "_line"
#: A quoted text as ``quoted`` writes it (either quote; a backslash escapes one char).
_QUOTED = r"""(?:'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")"""
_CARRIED = re.compile(
    r"timebound (?:"
    rf"TraceError: (?P<source>{_QUOTED}), line (?P<line>-?\d+), field (?P<field>{_QUOTED})"
    rf": (?P<trace>{_QUOTED})"
    rf"|SchemaError: table (?P<table>{_QUOTED}), column (?P<column>{_QUOTED})"
    rf": (?P<schema>{_QUOTED})"
    rf"|UsageError: option (?P<option>{_QUOTED}): (?P<usage>{_QUOTED})"
    rf"|[A-Za-z_]\w*: (?P<other>{_QUOTED}))")
#: The quote of reasons and messages.
_Q = '"'
_NAMED = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)", re.S)
_UNNAMED = {"n": "\n", "r": "\r", "t": "\t"}


def _escaped(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    if char.isprintable():
        return char
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else (
        f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")


def quoted(text: str, quote: str | None = None) -> str:
    """``text`` between quotes, one line, as ``repr`` would write it: ``quote``, or
    without one ``'`` (``"`` when ``text`` holds a ``'`` and no ``"``); a backslash
    escapes a backslash, the quote and each character that is not printable. ``unquoted``
    undoes it."""
    if quote is None:
        quote = '"' if "'" in text and '"' not in text else "'"
    body = "".join("\\" + c if c == quote else _escaped(c) for c in text)
    return quote + body + quote


def unquoted(text: str) -> str:
    """What ``quoted`` turned into ``text`` (its quotes included)."""
    def one(match: re.Match[str]) -> str:
        escape = match.group(1)
        if len(escape) > 1:
            return chr(int(escape[1:], 16))
        return _UNNAMED.get(escape, escape)

    return _ESCAPE.sub(one, text[1:-1])


def carried(exc: TimeboundError) -> str:
    """The one sentence that says ``exc`` and that ``rebuild`` reads back as it:
    ``timebound SchemaError: table 'DataFrame', column 'sent': "ts must not be null
    (row with user = u1, sent = null, at = 5)"``."""
    if isinstance(exc, TraceError):
        return (f"{MARK}TraceError: {quoted(exc.source)}, line {int(exc.line)}, field "
                f"{quoted(exc.field)}: {quoted(exc.reason, _Q)}")
    if isinstance(exc, SchemaError):
        return (f"{MARK}SchemaError: table {quoted(exc.table)}, column {quoted(exc.column)}: "
                f"{quoted(exc.reason, _Q)}")
    if isinstance(exc, UsageError):
        return f"{MARK}UsageError: option {quoted(exc.option)}: {quoted(exc.reason, _Q)}"
    return f"{MARK}{type(exc).__name__}: {quoted(str(exc), _Q)}"


def marked(exc: TimeboundError) -> RuntimeError:
    """A plain exception whose message is ``carried(exc)`` (``rebuild`` undoes it)."""
    return RuntimeError(carried(exc))


def rebuild(text: str) -> TimeboundError | None:
    """The typed error ``carried`` wrote in ``text`` (anywhere in it: the first), or
    None."""
    match = _CARRIED.search(text)
    if match is None:
        return None
    got = {key: unquoted(value) for key, value in match.groupdict().items()
           if value is not None and key != "line"}
    if match.group("trace") is not None:
        return TraceError(got["source"], int(match.group("line")), got["field"], got["trace"])
    if match.group("schema") is not None:
        return SchemaError(got["table"], got["column"], got["schema"])
    if match.group("usage") is not None:
        return UsageError(got["option"], got["usage"])
    return TimeboundError(got["other"])


@contextlib.contextmanager
def translate_errors() -> Iterator[None]:
    """Re-raise a worker's marked error as itself on the driver."""
    try:
        yield
    except TimeboundError:
        raise
    except Exception as exc:
        typed = rebuild(str(exc))
        if typed is None:
            raise
        raise typed from None


def hash_class(conn: Any, classes: Any) -> Any:
    """A connection's hash class as Spark computes it, ``crc32(utf-8 conn) mod
    classes`` (``conn``: a string column; ``classes``: an int or a long column): the
    core's classifier (``crc32_classifier``), since Spark's ``crc32`` is
    ``java.util.zip.CRC32`` and the core's ``zlib.crc32``, over the same bytes. The one
    copy every Spark operator that routes rows by class uses."""
    from pyspark.sql import functions as F

    k = F.lit(classes) if isinstance(classes, int) else classes
    return F.pmod(F.crc32(conn), k.cast("long"))


def with_hash_class(df: DataFrame, name: str, conn: Column, classes: int | Column,
                    crash: Column | None = None) -> DataFrame:
    """``df`` with column ``name``: each row's hash class of ``conn`` (``hash_class``;
    ``classes``: an int or a long column); a crash row (where the column ``crash``
    holds) goes to every class, one copy each, since every class of a receiver is down
    while it is. The one copy of that rule: the library's streams (one ``classes``) and
    the pipeline's per-class plan (each run's own, a column) both call it."""
    from pyspark.sql import functions as F

    if isinstance(classes, int) and classes == 1:
        return df.withColumn(name, F.lit(0).cast("long"))
    cls = hash_class(conn, classes)
    if crash is None:
        return df.withColumn(name, cls)
    k = F.lit(classes) if isinstance(classes, int) else classes
    every = F.sequence(F.lit(0).cast("long"), (k - 1).cast("long"))
    return df.withColumn(name, F.explode_outer(F.when(crash, every).otherwise(F.array(cls))))


def spark_types() -> dict[str, Any]:
    """The contract's column types (``contract.TYPES``) as Spark types, for the Spark
    drivers' schemas (pyspark imported here, when called)."""
    from pyspark.sql.types import (
        ArrayType,
        BooleanType,
        DoubleType,
        LongType,
        MapType,
        StringType,
    )

    long, string = LongType(), StringType()
    return {"string": string, "int64": long, "bool": BooleanType(), "double": DoubleType(),
            "list<int64>": ArrayType(long, containsNull=True),
            "map<string,int64>": MapType(string, long)}


def parse_conf(items: Sequence[str]) -> dict[str, str]:
    """``["k=v", ...]`` -> dict; a malformed item is a UsageError naming ``--conf``."""
    conf: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError("--conf", f"expected KEY=VALUE, got {item!r}")
        conf[key.strip()] = value
    return conf


@contextlib.contextmanager
def stopped_after(spark: Any, owned: bool = True) -> Iterator[Any]:
    """Stop ``spark`` (if ``owned``) when the block ends. When the block ends by an
    exception, a failure to stop never replaces it: a SIGTERM or Ctrl-C in the middle of
    a Py4J call leaves the connection unusable, and ``stop`` then raises a Py4J error
    that would turn "terminated" into an internal error."""
    try:
        yield spark
    except BaseException:
        if owned:
            stop_quietly(spark, owned)
        raise
    if owned:
        spark.stop()


# -- starting a session: one line on failure, a quiet JVM ------------------------------

#: Spark's master URL forms (spark-submit --master).
_MASTER = re.compile(r"local(\[(\*|[1-9]\d*)(,\s*[1-9]\d*)?\])?|local-cluster\[.+\]"
                     r"|(spark|mesos|k8s)://\S+|yarn")


def check_master(master: str | None, option: str = "--master") -> None:
    """A ``--master`` Spark would accept, checked before anything starts (UsageError)."""
    if master is not None and not _MASTER.fullmatch(master):
        raise UsageError(option, f"{master!r} is not a Spark master URL (local, "
                         "local[N], local[*], spark://HOST:PORT, yarn, k8s://URL, ...)")


#: A Java exception line: ``[Caused by: ]pkg.Class[$Inner]: message`` (``Exception in
#: thread "main" ...`` and Py4J's ``: ...`` prefixes allowed).
_JAVA_EXCEPTION = re.compile(
    r'^(?:Exception in thread "[^"]*" |Caused by: |: )?'
    r"((?:[a-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error|Throwable)):\s*(.*)$")
#: PySpark's own error classes at the start of a message: ``[JAVA_GATEWAY_EXITED] ...``.
_ERROR_CLASS = re.compile(r"^\[[A-Z_]+(?:\.[A-Z_]+)*\]\s*")
_MAX_REASON = 300


def spark_reason(*texts: str | None) -> str | None:
    """Spark's reason in ``texts`` (exception messages, JVM traces, a JVM's stderr): the
    message of the deepest Java cause of the first text that has one, else None."""
    for text in texts:
        if not text:
            continue
        found: list[tuple[str, str]] = []
        for line in text.splitlines():
            match = _JAVA_EXCEPTION.match(line.strip())
            if match:
                found.append((match.group(1), match.group(2).strip()))
        causes = [item for item in found if item[1]]
        if causes:
            name, message = causes[-1]
            return _one_line(f"{message} ({name.rsplit('.', 1)[-1]})")
    return None


#: What a healthy JVM prints on start-up (never a reason).
_BANNER = re.compile(r"WARNING: Using incubator modules|Using Spark's default log4j"
                     r"|Setting default log level|To adjust logging level"
                     r"|\d\d/\d\d/\d\d \d\d:\d\d:\d\d (?:INFO|WARN) ")


def _jvm_said(printed: str) -> str | None:
    """The first line a JVM that died at start printed that is not its banner
    (``Invalid maximum heap size: -Xmxabc``)."""
    for line in printed.splitlines():
        if line.strip() and not _BANNER.match(line.strip()):
            return _one_line(line)
    return None


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _MAX_REASON else line[:_MAX_REASON - 3] + "..."


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return _ERROR_CLASS.sub("", lines[0]) if lines else type(exc).__name__


def _words(key: str) -> str:
    """``spark.executor.memory`` -> ``executor memory`` (how Spark's messages say it)."""
    parts = [p for p in re.split(r"[.\s]", key) if p and p != "spark"]
    spaced = [re.sub(r"(?<=[a-z])(?=[A-Z])", " ", p).lower() for p in parts[-2:]]
    return " ".join(spaced)


def _mentioned(reason: str, conf: Mapping[str, str]) -> str | None:
    """The ``K=V`` item of ``conf`` that Spark's reason names: its key, its words
    (``Executor memory must be...``), its value (quoted, or of 2 characters or more)."""
    text = reason.lower()
    for key, value in conf.items():
        low = value.lower()
        if (key.lower() in text or (len(low) >= 2 and low in text)
                or any(f"{q}{low}{q}" in text for q in "\"'")
                or (len(_words(key)) > 3 and _words(key) in text)):
            return f"{key}={value}"
    return None


def _blame(reason: str, master: str | None, conf: Mapping[str, str]) -> tuple[str, str]:
    """(option, what) to name for a start-up failure with ``reason``."""
    mentioned = _mentioned(reason, conf)
    if mentioned is not None:
        return "--conf", mentioned
    items = " ".join(f"{k}={v}" for k, v in conf.items())
    if conf and master is None:
        return "--conf", items
    if master is not None and not conf:
        return "--master", master
    if conf:
        return "--master/--conf", f"{master} with {items}"
    return "Spark", "the default settings"


class _DropPy4J(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "py4j" not in (record.pathname or "") and not record.name.startswith("py4j")


_QUIET_LOGS = _DropPy4J()


def _quiet_logs() -> None:
    """Py4J logs an interrupted call's traceback with ``logging.exception`` on the root
    logger (which, without a handler, configures one on stderr): drop those records."""
    root = logging.getLogger()
    if _QUIET_LOGS not in root.filters:
        root.addFilter(_QUIET_LOGS)
    if not root.handlers:
        root.addHandler(logging.NullHandler())


@contextlib.contextmanager
def _jvm_output(target: int | None) -> Iterator[None]:
    """While inside, file descriptors 1 and 2 are what a JVM started now inherits for
    its whole life: both ``target`` (a log or scratch file), or without one, our stderr
    for both (Spark's streaming Python runners print their start-up chatter on 1; stdout
    stays the command's). Ours are restored at the end."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        os.dup2(2 if target is None else target, 1)
        if target is not None:
            os.dup2(target, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)


@contextlib.contextmanager
def _jvm_ignores_sigterm() -> Iterator[None]:
    """While inside, a JVM PySpark starts ignores SIGTERM, as PySpark has it ignore
    SIGINT. A SIGTERM sent to the whole process group (``timeout``, a supervisor) then
    reaches the driver alone, which stops its query and then Spark and ends as a
    SIGTERM to the driver alone ends it, instead of finding its JVM gone. The JVM still
    ends with its driver: it exits when the driver's end of its stdin closes, SIGKILL
    included. ``java_gateway.Popen`` is PySpark's module global, not a public API: the
    group-SIGTERM test in ``tests/test_stream_kill.py`` fails if an upgrade moves it."""
    from pyspark import java_gateway

    gateway: Any = java_gateway  # its ``Popen`` (subprocess's), replaced while inside
    original = gateway.Popen

    def popen(*args: Any, **kwargs: Any) -> Any:
        given = kwargs.get("preexec_fn")

        def preexec() -> None:
            if given is not None:
                given()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)

        kwargs["preexec_fn"] = preexec
        return original(*args, **kwargs)

    gateway.Popen = popen
    try:
        yield
    finally:
        gateway.Popen = original


def _plain_interrupts() -> None:
    """Ctrl-C raises KeyboardInterrupt in the main thread, nothing else (PySpark's handler
    re-enters the Py4J connection the main thread is using and prints tracebacks)."""
    if threading.current_thread() is not threading.main_thread():
        return
    handler = signal.getsignal(signal.SIGINT)
    if getattr(handler, "__module__", "").startswith("pyspark"):
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _read(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def start_session(builder: Any, *, master: str | None, conf: Mapping[str, str],
                  quiet: bool, log: str | None = None) -> Any:
    """``builder.getOrCreate()``; a failure is one ``UsageError`` naming the option to
    blame and Spark's reason. ``master``/``conf``: what the user gave (None/empty for
    defaults). ``quiet``: the JVM's output and Py4J's log stay off the terminal (in an
    unlinked scratch file). ``log``: a file (truncated) that gets the JVM's output for
    its whole life instead. Otherwise the JVM's output goes to our stderr."""
    if quiet or log is not None:
        _quiet_logs()
    if log is not None:
        target: int | None = os.open(log, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    elif quiet:
        scratch = tempfile.TemporaryFile()  # unlinked: nothing left behind
        target = os.dup(scratch.fileno())
        scratch.close()
    else:
        target = None
    try:
        try:
            with _jvm_output(target), _jvm_ignores_sigterm():
                spark = builder.getOrCreate()
        except Exception as exc:
            printed = _read(target) if target is not None else ""
            reason = (spark_reason(printed, getattr(exc, "_desc", None), str(exc))
                      or _jvm_said(printed) or _first_line(exc))
            option, given = _blame(reason, master, dict(conf))
            raise UsageError(option, f"Spark did not start with {given}: {reason}") from None
    finally:
        if target is not None:
            os.close(target)  # the JVM keeps its own descriptors of the file
    _plain_interrupts()
    try:  # the SQL settings are checked when the session state is first built: now
        spark._jsparkSession.sessionState()
    except Exception as exc:
        reason = spark_reason(getattr(exc, "_desc", None), str(exc)) or _first_line(exc)
        option, given = _blame(reason, master, dict(conf))
        raise UsageError(option, f"Spark refused {given}: {reason}") from None
    return spark


#: Settings every command's session has; the command's defaults and then the user's
#: ``--conf`` items override them.
BASE_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
}
#: Our keys in a ``conf`` (not Spark's): ``timebound.logLevel`` is Spark's log level
#: (WARN unless given; OFF keeps the JVM's output off the terminal).
OURS = "timebound."


def build_session(master: str | None = None, conf: Mapping[str, str] | None = None, *,
                  app_name: str = "timebound", defaults: Mapping[str, str] | None = None,
                  log: str | None = None, default_master: str = DEFAULT_MASTER) -> Any:
    """The one SparkSession builder of every command that runs Spark.

    ``master``: checked, ``default_master`` when None. ``BASE_CONF``, then the
    command's ``defaults``, then the user's ``conf`` (theirs win; ``timebound.*`` keys
    are ours: ``OURS``). The workers run this interpreter (``PYSPARK_PYTHON`` unless
    set). ``log``: ``start_session``'s. A failure to start is one ``UsageError``
    naming ``--master`` or the ``--conf`` item Spark's reason points at. Every ``--conf``
    is passed through unchanged, so the same command runs on a standalone, YARN or
    Kubernetes cluster (the workers need ``timebound`` importable)."""
    check_master(master)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    given = dict(conf or {})
    settings = {**BASE_CONF, **(defaults or {}), **given}
    level = settings.get(OURS + "logLevel", "WARN")
    builder = SparkSession.builder.appName(app_name).master(master or default_master)
    for key, value in settings.items():
        if not key.startswith(OURS):
            builder = builder.config(key, value)
    spark = start_session(builder, master=master,
                          conf={k: v for k, v in given.items() if not k.startswith(OURS)},
                          quiet=level == "OFF", log=log)
    spark.sparkContext.setLogLevel(level)
    return spark


def stop_quietly(spark: Any, owned: bool) -> None:
    """After an interruption or a failure: stop ``spark`` (``owned``) or cancel its jobs,
    so that no task still writes where the caller is about to clean up. A failure to do
    so (the JVM already gone, a connection cut by Ctrl-C) is ignored, and so is the
    RuntimeWarning PySpark prints then ("Unable to cleanly shutdown Spark JVM
    process"): the user's one line is the interruption or the failure."""
    with contextlib.suppress(Exception), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if owned:
            spark.stop()
        else:
            spark.sparkContext.cancelAllJobs()


def _through_py4j(exc: BaseException) -> bool:
    """``exc`` was raised inside Py4J (a socket to the JVM)."""
    frame = exc.__traceback__
    while frame is not None:
        if f"{os.sep}py4j{os.sep}" in frame.tb_frame.f_code.co_filename:
            return True
        frame = frame.tb_next
    return False


def spark_failure(exc: BaseException, conf: Mapping[str, str] | None = None,
                  ) -> UsageError | None:
    """One line for an exception Spark raised on the driver (a JVM error, the JVM gone),
    or None when ``exc`` is not Spark's or is a Python error inside a task (ours). The
    line names the ``--conf`` item of ``conf`` that Spark's reason names, if any."""
    chain: list[BaseException] = []
    item: BaseException | None = exc
    while item is not None and item not in chain:
        chain.append(item)
        item = item.__cause__ or item.__context__
    if isinstance(exc, OSError) and _through_py4j(exc):  # the JVM gone mid-call
        reason = exc.strerror or str(exc) or type(exc).__name__
        return UsageError("Spark", f"lost its JVM (stopped or killed): {reason}")
    spark_side = [e for e in chain if type(e).__module__.split(".")[0] in ("pyspark", "py4j")]
    if not spark_side or any(type(e).__name__ == "PythonException" for e in spark_side):
        return None
    first = spark_side[0]
    texts = [getattr(first, "_desc", None), str(first), getattr(first, "_stackTrace", None)]
    reason = spark_reason(*texts) or _first_line(first)
    mentioned = _mentioned(reason, conf or {})
    if mentioned is not None:
        return UsageError("--conf", f"Spark failed with {mentioned}: {reason}")
    return UsageError("Spark", f"the job failed: {reason}")
