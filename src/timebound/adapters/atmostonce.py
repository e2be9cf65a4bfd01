"""At-most-once row adapter: SCMP receivers fed from ``messages`` rows (docs/replay-atmostonce.md).

One ``ClassifiedReceiver`` per receiver name (``classes`` hash classes, each an
independent ``Receiver`` with its own estimator, table, ``upper`` and ``latest``), fed
in trace order. Every protocol rule lives in ``timebound.core.atmostonce``; this module
only validates rows and options, enforces the trace rules (``at`` never decreasing per
receiver, crash rows only for resilient receivers and never while the receiver is down)
and formats output rows.

Options: ``AtMostOnceOptions`` (the core's ``ReceiverConfig`` plus ``classes``) is
built from option values by ``AtMostOnceOptions.from_values`` -- a replay command line
(``vars(namespace)``), a dataset row's option columns or a streaming query's settings
alike. Drivers with a command line of their own (``timebound stream atmostonce``,
``timebound rpc serve``) declare the receiver options with
``timebound.arguments.add_receiver_arguments``; they never import the replay.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from timebound.adapters._options import Values, forbid, require
from timebound.adapters._rows import Row
from timebound.contract import ESTIMATORS, INT64_MAX, MESSAGE_MINIMUMS, REPLAY_OUTPUTS
from timebound.core.atmostonce import (
    ClassifiedReceiver,
    Classifier,
    Receiver,
    ReceiverConfig,
    Verdict,
    crc32_classifier,
    decide_message,
    drive,
    drive_resilient,
)
from timebound.errors import TraceError, UsageError

ROW_TYPES = ("msg", "crash")

#: Verdict code (``core.atmostonce.VERDICT_CODES``) -> the output's verdict string.
VERDICT_NAMES: tuple[str, ...] = tuple(verdict.value for verdict in Verdict)


def receiver_config(values: Values) -> ReceiverConfig:
    """The receiver the option values name; a missing or meaningless option is a
    UsageError naming its flag."""
    estimator = values.get("estimator") or "fixed"
    if estimator not in ESTIMATORS:
        raise UsageError("--estimator",
                         f"expected one of {', '.join(ESTIMATORS)}, got {estimator!r}")
    window = spikes = p = rho = gc_every = None
    if estimator == "fixed":
        forbid(values, ("window", "spikes", "p"), "with --estimator fixed")
        rho, gc_every = require(values, "rho", minimum=1), require(values, "gc_every", minimum=1)
    elif estimator == "unlimited":
        forbid(values, ("rho", "window", "spikes", "p"), "with --estimator unlimited")
        gc_every = require(values, "gc_every", minimum=1)
    else:
        forbid(values, ("rho", "gc_every"),
               "with --estimator limited (GC runs every S lifetimes)")
        window = require(values, "window", minimum=1)
        spikes = require(values, "spikes", minimum=0)
        p = require(values, "p", minimum=1)
        if spikes >= window:
            raise UsageError("--spikes", f"must be < --window ({window}), got {spikes}")
    beta = latest_every = None
    grace = 0
    resilient = bool(values.get("resilient"))
    if resilient:
        beta = require(values, "beta", minimum=0)
        latest_every = require(values, "latest_every", minimum=1)
        if values.get("recovery_grace") is not None:
            grace = require(values, "recovery_grace", minimum=0)
    else:
        forbid(values, ("beta", "latest_every", "recovery_grace"), "without --resilient")
    reorder = 1 if values.get("reorder_window") is None else require(
        values, "reorder_window", minimum=1)
    return ReceiverConfig(estimator, rho, gc_every, window, spikes, p,
                          resilient, beta, latest_every, grace, reorder)


@dataclass(frozen=True, slots=True)
class AtMostOnceOptions:
    """Everything ``timebound replay atmostonce`` is told: the receivers and K."""

    receiver: ReceiverConfig
    classes: int = 1

    @classmethod
    def from_values(cls, values: Values) -> AtMostOnceOptions:
        config = receiver_config(values)
        classes = 1 if values.get("classes") is None else require(values, "classes", minimum=1)
        return cls(config, classes)



_TS_MIN, _AT_MIN = MESSAGE_MINIMUMS["ts"], MESSAGE_MINIMUMS["at"]


def well_formed(name: object, conn: object, ts: object, at: object) -> bool:
    """The fields of a message row have the contract's types and ranges
    (``contract.MESSAGE_MINIMUMS``)."""
    return (type(name) is str and bool(name) and type(conn) is str and bool(conn)
            and type(ts) is int and _TS_MIN <= ts <= INT64_MAX
            and type(at) is int and _AT_MIN <= at <= INT64_MAX)


@dataclass(frozen=True, slots=True)
class Decisions:
    """What ``AtMostOnceAdapter.decide_receiver`` decided, one entry per row in the
    order given: the verdict code (``core.atmostonce.VERDICT_CODES``, names in
    ``VERDICT_NAMES``), the estimate in force and the table size after it, and ``up``
    (False: refused while down, estimate and size 0 meaning none; None when the
    receiver is not resilient, so never down)."""

    codes: list[int]
    estimates: list[int]
    sizes: list[int]
    up: list[bool] | None


@dataclass(frozen=True, slots=True)
class ClassRows:
    """One hash class's rows of a receiver, in row order (``decide_classes``): the
    class, and each row's conn, ``ts`` and ``at``."""

    cls: int
    conns: list[str]
    stamps: list[int]
    times: list[int]


class AtMostOnceAdapter:
    """``messages`` rows -> verdicts (the replay's, the pipeline's, the simulator's
    offline re-check's and streaming's one copy)."""

    output_types: Mapping[str, str] = REPLAY_OUTPUTS["atmostonce"]

    def __init__(self, options: AtMostOnceOptions) -> None:
        self.options = options
        self.config = options.receiver
        self._resilient = self.config.resilient
        self._classes = options.classes
        self._classifier = crc32_classifier(self._classes)
        self._nodes: dict[str, ClassifiedReceiver] = {}
        self._last_at: dict[str, int] = {}
        self._verdicts: Counter[str] = Counter()
        self._crashes = 0
        self._peak_entries = 0

    # -- hooks for drivers that keep each receiver elsewhere between batches (streaming)

    def node(self, name: str) -> ClassifiedReceiver | None:
        """The receiver (all its classes) named ``name``, if a row has created it."""
        return self._nodes.get(name)

    def clock(self, name: str) -> int | None:
        """The last ``at`` seen for receiver ``name`` (None: no row yet)."""
        return self._last_at.get(name)

    def adopt(self, name: str, node: ClassifiedReceiver, clock: int | None) -> None:
        """Install a restored receiver and its last ``at`` (None: no row yet)."""
        self._nodes[name] = node
        if clock is None:
            self._last_at.pop(name, None)
        else:
            self._last_at[name] = clock

    @property
    def classifier(self) -> Classifier:
        """The class of a connection id among the receiver's ``classes``."""
        return self._classifier

    def open_receiver(self, source: str, line: int, name: str, at: int
                      ) -> ClassifiedReceiver:
        """The receiver named ``name`` at a row at ``at`` (``source``/``line`` name the
        row in errors): created at its first row, as ``decide`` does; ``TraceError`` when
        ``at`` goes back in time for it. Column-wise drivers open every receiver of a
        segment this way before they drive its rows through the core's loop."""
        node = self._nodes.get(name)
        if node is None:
            node = ClassifiedReceiver(
                [self.config.new_receiver() for _ in range(self._classes)], self._classifier
            )
            self._nodes[name] = node
        else:
            last = self._last_at.get(name)
            if last is not None and at < last:
                raise TraceError(source, line, "at",
                                 f"goes back in time for receiver {name!r} ({at} < {last})")
        self._last_at[name] = at
        return node

    def feed(self, row: Row) -> Iterable[Mapping[str, Any]]:
        data = row.data
        if data.get("type") != "msg":
            return self._crash(row)
        name, conn, ts, at = data.get("receiver"), data.get("conn"), data.get("ts"), data.get("at")
        if not well_formed(name, conn, ts, at):
            # Slow path, only to name the first bad field exactly.
            name, at = row.string("receiver"), row.integer("at", minimum=_AT_MIN)
            conn, ts = row.string("conn"), row.integer("ts", minimum=_TS_MIN)
        assert isinstance(name, str) and isinstance(conn, str)
        assert isinstance(ts, int) and isinstance(at, int)
        marked = data.get("marked")
        if marked is not None and type(marked) is not bool:
            raise row.error("marked", f"expected true or false, got {marked!r}")
        verdict, rho, entries = self.decide(row.source, row.line, name, conn, ts, at,
                                            marked=marked is True)
        out = data.copy()
        out["verdict"] = verdict
        out["rho"] = rho
        out["entries"] = entries
        return (out,)

    def decide(self, source: str, line: int, name: str, conn: str, ts: int,
               at: int, *, marked: bool = False) -> tuple[str, int | None, int | None]:
        """One well-formed message row: ``(verdict, rho, entries)`` per the contract
        (``source`` and ``line`` name the row in errors). ``marked``: the row's
        ``marked`` column (our extension), passed to the core as
        ``receive(..., marked=)``. The decision is the core's ``decide_message``."""
        receiver = self.open_receiver(source, line, name, at).receiver_for(conn)
        code, rho, entries, up = decide_message(receiver, conn, ts, at, marked)
        verdict = VERDICT_NAMES[code]
        self._verdicts[verdict] += 1
        if not up:
            return verdict, None, None
        if entries > self._peak_entries:
            self._peak_entries = entries
        return verdict, rho, entries

    def decide_receiver(self, source: str, lines: Sequence[int], name: str,
                        conns: list[str], stamps: list[int], times: list[int],
                        classes: int | Sequence[int]) -> Decisions:
        """The column path: the message rows of receiver ``name``, in trace order, as
        plain columns, decided as ``decide`` decides them one by one.

        The caller has checked each row well formed (``well_formed``); ``lines[i]``
        names row ``i`` in errors. ``classes``: the class of each row's conn (by
        ``classifier``), or one int when every row is in that class. The rows are
        split by class here and decided by ``decide_classes``; the decisions come
        back in row order."""
        if not conns:
            return Decisions([], [], [], None)
        if isinstance(classes, int):
            return self.decide_classes(source, lines, name, times,
                                       [ClassRows(classes, conns, stamps, times)])[0]
        rows: dict[int, list[int]] = {}
        for i, cls in enumerate(classes):
            rows.setdefault(cls, []).append(i)
        parts = [ClassRows(cls, [conns[i] for i in idx], [stamps[i] for i in idx],
                           [times[i] for i in idx]) for cls, idx in rows.items()]
        n = len(conns)
        codes, estimates, sizes = [0] * n, [0] * n, [0] * n
        up: list[bool] | None = [True] * n if self._resilient else None
        for idx, part in zip(rows.values(),
                             self.decide_classes(source, lines, name, times, parts)):
            for j, i in enumerate(idx):
                codes[i] = part.codes[j]
                estimates[i] = part.estimates[j]
                sizes[i] = part.sizes[j]
            if up is not None and part.up is not None:
                for j, i in enumerate(idx):
                    up[i] = part.up[j]
        return Decisions(codes, estimates, sizes, up)

    def decide_classes(self, source: str, lines: Sequence[int], name: str,
                       times: list[int], parts: Sequence[ClassRows]) -> list[Decisions]:
        """The column path with the receiver's rows already split by hash class (a
        caller with numpy splits and scatters them faster than ``decide_receiver``):
        ``times`` and ``lines`` are every row's ``at`` and line in trace order,
        ``parts`` each class's rows in that order; one ``Decisions`` per part.

        This method owns the rest: the receiver is created at its first row, ``at``
        may never go back in time (``TraceError`` naming the row, before any row is
        decided), each class's rows run in order through the core's ``drive`` loop
        (one ``decide_message`` per row), and ``--stats``' counters and the
        receiver's clock are kept as ``decide`` keeps them."""
        if not times:
            return [Decisions([], [], [], None) for _ in parts]
        if times != sorted(times):  # (C speed; the loop only finds the row)
            for i in range(1, len(times)):
                if times[i] < times[i - 1]:
                    raise TraceError(source, lines[i], "at",
                                     f"goes back in time for receiver {name!r} "
                                     f"({times[i]} < {times[i - 1]})")
        node = self.open_receiver(source, lines[0], name, times[0])
        decided = [self._drive(node.receivers[part.cls], part.conns, part.stamps,
                               part.times) for part in parts]
        self._last_at[name] = times[-1]
        for part in decided:
            for code, count in Counter(part.codes).items():
                self._verdicts[VERDICT_NAMES[code]] += count
            peak = max(part.sizes, default=0)
            if peak > self._peak_entries:
                self._peak_entries = peak
        return decided

    def _drive(self, receiver: Receiver, conns: list[str], stamps: list[int],
               times: list[int]) -> Decisions:
        if self._resilient:
            return Decisions(*drive_resilient(receiver, conns, stamps, times))
        return Decisions(*drive(receiver, conns, stamps, times), None)

    def _crash(self, row: Row) -> Iterable[Mapping[str, Any]]:
        row.choice("type", ROW_TYPES)
        name = row.string("receiver")
        at = row.integer("at")
        down = row.integer("down", minimum=1)
        if not self._resilient:
            raise row.error("type", "crash rows need --resilient")
        node = self.open_receiver(row.source, row.line, name, at)
        node.handle_timer(now=at)
        if node.down:
            raise row.error("at", f"receiver {name!r} is still down at {at}")
        node.crash(now=at, down=down)
        self._crashes += 1
        return ()

    def finish(self) -> Iterable[Mapping[str, Any]]:
        return ()

    def summary(self) -> list[tuple[str, object]]:
        messages = sum(self._verdicts.values())
        rows: list[tuple[str, object]] = [
            ("receivers", len(self._nodes)),
            ("messages", messages),
        ]
        for verdict in ("accepted", "duplicate", "stale", "early", "down"):
            count = self._verdicts.get(verdict, 0)
            share = f" ({100.0 * count / messages:.1f}%)" if messages else ""
            rows.append((verdict, f"{count}{share}"))
        if self._resilient:
            rows.append(("crashes", self._crashes))
        estimates = sorted(
            {r.estimate for node in self._nodes.values() for r in node.receivers}
        )
        if estimates:
            shown = ", ".join(str(e) for e in estimates[:8])
            rows.append(("final estimate(s)", shown + (" ..." if len(estimates) > 8 else "")))
        rows.append(("peak table entries", self._peak_entries))
        return rows
