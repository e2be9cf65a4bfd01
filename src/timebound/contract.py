"""The trace-dataset contract, written once (CONTRIBUTING.md; docs/design.md, "Contracts").

A leaf module (the standard library and ``timebound.errors`` only): every table a dataset or a
pipeline output holds, with its columns and their types; the per-run option columns of each
protocol (named like the replay options' argparse dests, with their documented ranges); the
table -> protocol map; the output columns of each replay command; and the definition of every
measure the simulator and the pipeline publish (name, unit, one sentence). Everything else
derives from it:

- the simulator's writers (``timebound.sim._dataset.SCHEMAS``) take their columns here;
- the pipeline's Spark schemas (``timebound.spark.traces.schemas``) are built from it;
- the row adapters (``timebound.adapters``) read exactly the option columns named here
  and check their ranges;
- the replay commands declare ``output_types = REPLAY_OUTPUTS[protocol]``;
- ``tests/test_contract.py`` fails if any of them, or a measure the simulator, the
  pipeline or the report uses, disagrees with this module.

Types are named as the contract names them: ``string``, ``int64``, ``bool``, ``double``,
``list<int64>``, ``map<string,int64>``; every column is nullable (a column a row type does not
use is null). Extension columns (ours, ``EXTENSION_COLUMNS``) are written only when a run uses
them: the option column ``reorder_window`` and the row column ``marked`` of ``messages`` (a
table's ``extensions``: honoured by the replay, refused by the pipeline and the stream,
``REFUSED_BY_DRIVERS``).

The at-most-once loss measures (``lost``, ``originals``, ``lost_rate``, ``lost_per_accepted``)
follow the adaptive paper's definitions (section 3): a message is *lost* if it is not a
duplicate, not out of order, and rejected when it arrives. On a dataset that is: an ``original``
row (the first copy the network delivered, so not a duplicate) whose verdict is a rejection by a
running receiver that is not a table rejection -- ``stale`` (summary-rejected, ts <= upper) or
``early`` (SCMP Fig. 2-2 rule 1, ts > latest: "refuse the message since it is too early"). A
``duplicate`` verdict is a table rejection (ts <= CT[conn]: a later message of that connection
was accepted first, so the message is out of order, never lost), and a ``down`` row was not
judged at all (the receiver was not running; the transport retransmits). ``A`` of L/A counts
every accepted row: by at-most-once each is a distinct message, whichever copy it was.

How each measure aggregates (its partial, merge and finish) is declared once in
``timebound.measures``. A ratio (``unit`` ``ratio`` or ``percent``, a mean, ``x / y`` below)
over a zero or null denominator is null -- Spark's ``try_divide`` -- in the simulator as in the
pipeline, and a null measure has no row in the metrics table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

#: A message row's ranges, once for every engine (adapter, ``columnar``, Spark, compare):
#: ``ts`` >= 1 (0 is the starting ``upper``), ``at`` >= 0, ``receiver``, ``conn`` non-empty.
MESSAGE_MINIMUMS: dict[str, int] = {"ts": 1, "at": 0}
MESSAGE_IDS = ("receiver", "conn")

#: The contract's column type names.
TYPES = ("string", "int64", "bool", "double", "list<int64>", "map<string,int64>")


@dataclass(frozen=True, slots=True)
class Column:
    """One column: its name, type and whether every dataset must carry it."""

    name: str
    type: str
    required: bool = False


@dataclass(frozen=True, slots=True)
class OptionColumn:
    """A per-run option column (and the replay option of the same argparse dest)."""

    name: str
    type: str
    #: Inclusive documented range of a numeric option (``None``: not numeric).
    low: int | None = None
    high: int | None = None
    #: Allowed values of a string option with a fixed set of choices.
    choices: tuple[str, ...] = ()

    @property
    def flag(self) -> str:
        """The command-line flag: ``gc_every`` -> ``--gc-every``."""
        return "--" + self.name.replace("_", "-")


@dataclass(frozen=True, slots=True)
class Table:
    """A dataset table: its columns (dataset order) and, for an input table, its
    protocol and option columns."""

    name: str
    columns: tuple[Column, ...]
    protocol: str | None = None
    options: tuple[OptionColumn, ...] = ()
    #: Option columns the simulator does not write (the pipeline still accepts them).
    unsimulated: tuple[str, ...] = ()
    #: Row columns beyond the papers (our extensions, after the option columns): a
    #: dataset carries one only when some run uses it; the replay honours it, the
    #: pipeline and the stream refuse a table that carries it (``REFUSED_BY_DRIVERS``).
    extensions: tuple[Column, ...] = ()

    @property
    def required(self) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if c.required)

    @property
    def optional(self) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if not c.required)

    def option(self, name: str) -> OptionColumn:
        for option in self.options:
            if option.name == name:
                return option
        raise KeyError(name)


def _spec(spec: str) -> tuple[Column, ...]:
    """Columns from ``"name:type name:type? ..."``: a trailing ``?`` marks an optional
    column (a dataset may leave it out; it is then null)."""
    return tuple(Column(name, kind.rstrip("?"), not kind.endswith("?"))
                 for name, _, kind in (item.partition(":") for item in spec.split()))


def _int(name: str, low: int, high: int = INT64_MAX) -> OptionColumn:
    return OptionColumn(name, "int64", low, high)


ESTIMATORS = ("fixed", "unlimited", "limited")
VARIANTS = ("rckn", "rc")
ACK_MODES = ("timestamp", "vector")

#: Option columns per protocol, in table order. Ranges are the documented ranges of the
#: replay and pipeline options (checked before any work starts); size-like options
#: (they set how much memory a run takes) have bounds far below int64.
OPTIONS: dict[str, tuple[OptionColumn, ...]] = {
    "atmostonce": (
        OptionColumn("estimator", "string", choices=ESTIMATORS),
        _int("rho", 1), _int("gc_every", 1), _int("window", 1, 1_000_000),
        _int("spikes", 0, 1_000_000), _int("p", 1),
        OptionColumn("resilient", "bool"),
        _int("beta", 0), _int("latest_every", 1), _int("recovery_grace", 0),
        _int("classes", 1, 4096),
        # Our extension beyond the paper: timestamps kept per connection.
        _int("reorder_window", 1, 4096),
    ),
    "causal": (
        _int("epsilon", 1, 4096), OptionColumn("variant", "string", choices=VARIANTS),
        _int("n", 1, 1_000_000),
    ),
    "merge": (
        _int("epsilon", 1, 4096), _int("delta", 0),
        OptionColumn("variant", "string", choices=VARIANTS),
    ),
    "slotted": (),
    "stability": (
        OptionColumn("acks", "string", choices=ACK_MODES),
        OptionColumn("senders", "string"), OptionColumn("receivers", "string"),
    ),
}

#: Documented range of every numeric option (argparse dest -> inclusive bounds).
OPTION_LIMITS: dict[str, tuple[int, int]] = {
    option.name: (option.low, option.high)
    for options in OPTIONS.values() for option in options
    if option.low is not None and option.high is not None
}

#: Protocol input tables (dataset order of columns; option columns follow them).
INPUT_TABLES: dict[str, Table] = {
    t.name: t for t in (
        Table("messages", _spec(
            "run:string seq:int64 type:string receiver:string conn:string ts:int64 at:int64 "
            "down:int64? original:bool?"),
            "atmostonce", OPTIONS["atmostonce"], unsimulated=("classes",),
            # Our extension beyond the paper: the message was made after the
            # deciding receiver's incarnation began (``Receiver.receive(marked=True)``).
            extensions=_spec("marked:bool?")),
        Table("events", _spec(
            "run:string seq:int64 type:string proc:string rt:int64 msg:string?"),
            "causal", OPTIONS["causal"], unsimulated=("n",)),
        Table("arrivals", _spec(
            "run:string seq:int64 merger:string msg:string proc:string at:int64 r:int64 "
            "c:int64 kn:list<int64>?"),
            "merge", OPTIONS["merge"]),
        Table("channel", _spec(
            "run:string seq:int64 channel:string type:string id:string kind:string?"),
            "slotted", OPTIONS["slotted"]),
        Table("acks", _spec(
            "run:string seq:int64 type:string node:string from:string? ts:int64? at:int64 "
            "id:string? ack:string?"),
            "stability", OPTIONS["stability"]),
    )
}

#: table -> protocol (replay command name), in protocol order.
PROTOCOLS: dict[str, str] = {name: t.protocol or "" for name, t in INPUT_TABLES.items()}
#: protocol -> its input table.
TABLES: dict[str, str] = {protocol: table for table, protocol in PROTOCOLS.items()}

#: The metrics table (the simulator's and the pipeline's).
METRICS = Table("metrics", _spec(
    "run:string protocol:string measure:string value:double t:int64"))

#: Tables the simulator writes beside the inputs: the decisions it obtained from the
#: core while it ran, keyed like the input rows (the pipeline ignores them).
SIM_TABLES: dict[str, Table] = {
    t.name: t for t in (
        Table("sim_messages", _spec(
            "run:string seq:int64 verdict:string rho:int64 entries:int64")),
        Table("sim_channel", _spec("run:string channel:string id:string action:string")),
        Table("sim_arrivals", _spec(
            "run:string merger:string msg:string proc:string action:string time:int64")),
        Table("sim_acks", _spec(
            "run:string seq:int64 delivered:bool stable:list<int64>")),
    )
}


#: Columns that extend the papers' receivers -- option column
#: ``reorder_window`` and row column ``marked`` (a table's ``extensions``):
#: the simulator writes each only when some run of the dataset uses it, so datasets of
#: the papers' receivers keep the columns they always had. Readers treat them as
#: optional.
EXTENSION_COLUMNS: dict[str, tuple[str, ...]] = {"messages": ("reorder_window", "marked")}

#: Row extension columns the pipeline and the stream do not decide: a table (or a
#: streamed file) that carries one is refused in one line (exit 2) rather than decided
#: as if the column were absent. ``timebound replay`` honours them.
REFUSED_BY_DRIVERS: dict[str, tuple[str, ...]] = {
    name: tuple(c.name for c in t.extensions) for name, t in INPUT_TABLES.items()
    if t.extensions}


def dataset_columns(table: str, *, simulated: bool = False) -> list[tuple[str, str]]:
    """``(column, type)`` of a dataset table in order: input columns, then option
    columns (``simulated``: only those the simulator writes), then row extension
    columns."""
    if table == METRICS.name:
        return [(c.name, c.type) for c in METRICS.columns]
    if table in SIM_TABLES:
        return [(c.name, c.type) for c in SIM_TABLES[table].columns]
    t = INPUT_TABLES[table]
    options = [o for o in t.options if not (simulated and o.name in t.unsimulated)]
    return ([(c.name, c.type) for c in t.columns] + [(o.name, o.type) for o in options]
            + [(c.name, c.type) for c in t.extensions])


#: Output columns of each ``timebound replay PROTOCOL`` (docs/replay-*.md): input fields
#: passed through plus the decision. Stability's ``value`` is ``int64`` with timestamp
#: acks and ``map<string,int64>`` with vector acks (``STABILITY_VECTOR_VALUE``).
REPLAY_OUTPUTS: dict[str, dict[str, str]] = {
    "atmostonce": {
        "type": "string", "receiver": "string", "conn": "string", "ts": "int64",
        "at": "int64", "verdict": "string", "rho": "int64", "entries": "int64",
    },
    "causal": {
        "type": "string", "proc": "string", "rt": "int64", "msg": "string",
        "r": "int64", "c": "int64", "kn": "list<int64>",
    },
    "merge": {
        "merger": "string", "msg": "string", "proc": "string", "action": "string",
        "time": "int64",
    },
    "slotted": {"id": "string", "action": "string"},
    "stability": {
        "type": "string", "node": "string", "from": "string", "id": "string",
        "ack": "string", "ts": "int64", "at": "int64", "delivered": "bool",
        "value": "int64", "stable": "list<int64>",
    },
}
STABILITY_VECTOR_VALUE = "map<string,int64>"

#: Replay output values per protocol (the ``verdict`` / ``action`` column).
VERDICTS = ("accepted", "duplicate", "stale", "early", "down")
MERGE_ACTIONS = ("deliver", "late", "duplicate")
SLOTTED_ACTIONS = ("deliver", "discard")

#: Pipeline decision tables. Input-shaped ones: the input columns plus these.
DECISION_EXTRA: dict[str, tuple[Column, ...]] = {
    "messages": _spec("verdict:string? rho:int64? entries:int64? cls:int64?"),
    "events": _spec("r:int64? c:int64? kn:list<int64>?"),
    "acks": _spec("delivered:bool? value:int64? value_vector:map<string,int64>? "
                  "stable:list<int64>? ack_bytes:int64?"),
}
#: Decision tables not shaped like their input (their rows are the receiver's actions).
DECISION_TABLES: dict[str, tuple[Column, ...]] = {
    "arrivals": _spec("run:string? merger:string? seq:int64? msg:string? proc:string? "
                      "action:string? time:int64? at:int64?"),
    "channel": _spec("run:string? channel:string? seq:int64? id:string? action:string? "
                     "kind:string? reason:string? arrived:int64? step:int64? "
                     "buffered:int64?"),
}


@dataclass(frozen=True, slots=True)
class Measure:
    """A published measure: ``name`` (``<x>`` stands for a value, e.g.
    ``verdict.<verdict>``), its unit, one sentence, and who publishes it (``sim``: the
    simulator's metrics table, ``pipeline``: the pipeline's)."""

    name: str
    unit: str
    definition: str
    by: tuple[str, ...] = ("pipeline",)
    series: bool = False

    def matches(self, name: str) -> bool:
        """``name`` is this measure (each ``<x>`` of a family stands for a non-empty
        value)."""
        pattern = "".join(".+" if part.startswith("<") else re.escape(part)
                          for part in re.split(r"(<[^>]+>)", self.name) if part)
        return re.fullmatch(pattern, name) is not None


SIM, PIPE, BOTH = ("sim",), ("pipeline",), ("sim", "pipeline")


def _m(protocol: str, name: str, unit: str, definition: str, by: tuple[str, ...] = PIPE,
       *, series: bool = False) -> tuple[str, Measure]:
    return protocol, Measure(name, unit, definition, by, series)


_MEASURES: list[tuple[str, Measure]] = [
    # -- at-most-once: the loss measures mean the same in the simulator and the pipeline
    _m("atmostonce", "lost", "messages",
       "original rows whose verdict is stale or early (a first copy rejected by a "
       "running receiver, not by its table: the adaptive paper's lost message)", BOTH),
    _m("atmostonce", "originals", "messages",
       "original rows a running receiver decided (verdict not down): the first copies "
       "judged", BOTH),
    _m("atmostonce", "lost_rate", "ratio", "lost / originals", BOTH),
    _m("atmostonce", "lost_per_accepted", "ratio",
       "lost / accepted rows: the adaptive paper's L/A (each accepted row is a distinct "
       "message)", BOTH),
    _m("atmostonce", "table_mean", "entries",
       "mean connection-table size right after each decided (not down) message", BOTH),
    _m("atmostonce", "at_most_once_violations", "messages",
       "messages (receiver, conn, ts) accepted more than once; must be 0", BOTH),
    _m("atmostonce", "lost_over_accepted", "ratio",
       "lost / accepted rows so far, at the end of each sample bucket of the receiver "
       "clock", SIM, series=True),
    _m("atmostonce", "table_size", "entries",
       "connection-table size at the end of a bucket of at (pipeline: summed over the "
       "run's receiver classes; simulator: of the last receiver that decided)", BOTH,
       series=True),
    _m("atmostonce", "estimate", "ticks",
       "lifetime estimate in force at the end of a bucket of at (pipeline: the largest "
       "over the run's receivers)", BOTH, series=True),
    # pipeline only
    _m("atmostonce", "messages", "rows", "msg rows decided (every verdict)"),
    _m("atmostonce", "verdict.<verdict>", "rows", "msg rows with that verdict"),
    _m("atmostonce", "lifetime_p50", "ticks", "median of at - ts over msg rows"),
    _m("atmostonce", "lifetime_p99", "ticks", "99th percentile of at - ts over msg rows"),
    _m("atmostonce", "table_size_max", "entries",
       "largest connection-table size after a message"),
    _m("atmostonce", "estimate_final", "ticks",
       "largest estimate in force on a receiver class's last decided message"),
    # simulator only
    _m("atmostonce", "messages_sent", "messages", "distinct messages the clients sent", SIM),
    _m("atmostonce", "rows", "rows", "messages rows written (msg and crash)", SIM),
    _m("atmostonce", "never_accepted_rate", "ratio",
       "messages sent that no receiver ever accepted / messages sent", SIM),
    _m("atmostonce", "table_peak", "entries",
       "largest connection-table size after a decided message", SIM),
    _m("atmostonce", "retransmissions", "packets", "transport retransmissions", SIM),
    _m("atmostonce", "gave_up", "messages", "messages the transport gave up on", SIM),
    _m("atmostonce", "max_lifetime", "ticks",
       "largest at - ts over stale, duplicate and accepted rows", SIM),
    _m("atmostonce", "final_estimate", "ticks",
       "estimate of the first server at the end of the run", SIM),
    _m("atmostonce", "events", "events", "simulator events processed", SIM),
    _m("atmostonce", "rows_<verdict>", "rows", "msg rows with that verdict", SIM),
    _m("atmostonce", "bound_rho_min", "ticks",
       "scmp: the section 2.4 bound eps + delta + RT(N) for the run's network", SIM),
    _m("atmostonce", "sent_after_crash_plus_beta", "messages",
       "scmp: messages sent after t_cr + beta", SIM),
    _m("atmostonce", "lost_after_crash_plus_beta", "messages",
       "scmp: messages sent after t_cr + beta never accepted and refused at least once "
       "(stale or early)", SIM),
    _m("atmostonce", "lost_outside_lemma3", "messages",
       "adaptive, unlimited horizon: losses Lemma 3 does not allow (neither within the new "
       "estimate after an increase of the estimate nor in the GC period before one)", SIM),
    _m("atmostonce", "estimate_increases", "changes",
       "adaptive, unlimited horizon: times the estimate rose", SIM),
    _m("atmostonce", "estimate_decreases", "changes",
       "adaptive, unlimited horizon: times the estimate fell", SIM),
    _m("atmostonce", "window", "lifetimes",
       "adaptive, limited horizon: S, lifetimes per GC period", SIM),
    _m("atmostonce", "horizon_spikes", "lifetimes",
       "adaptive, limited horizon: H, spikes ignored per period", SIM),
    _m("atmostonce", "spike_share", "ratio",
       "adaptive, limited horizon: arrivals whose delay exceeds bounded_values / arrivals",
       SIM),
    _m("atmostonce", "groups", "groups",
       "adaptive, limited horizon: groups of S consecutive arrivals", SIM),
    _m("atmostonce", "groups_over_h", "groups",
       "adaptive, limited horizon: groups holding more than H spikes (outside a (t, X, S, "
       "H)-bounded execution)", SIM),
    _m("atmostonce", "slowdown", "factor",
       "adaptive step-slow load: how many times slower every client sends after the step",
       SIM),
    _m("atmostonce", "step_x1", "ticks",
       "adaptive step loads: the largest lifetime of a message sent before the step", SIM),
    _m("atmostonce", "step_x2", "ticks",
       "adaptive step loads: the largest lifetime of a message sent after the step", SIM),
    _m("atmostonce", "step_estimate_over_2x2", "ratio",
       "adaptive step loads: the estimate in force at the step / (2 step_x2)", SIM),
    _m("atmostonce", "step_final_over_2x2", "ratio",
       "adaptive step loads: the last estimate / (2 step_x2)", SIM),
    _m("atmostonce", "step_settled", "flag",
       "adaptive step loads: 1 if the estimate settles below 2 step_x2 before the traffic "
       "ends, else 0", SIM),
    _m("atmostonce", "step_settle_s", "s",
       "adaptive step loads: from the step to the last change after which the estimate "
       "stays below 2 step_x2", SIM),
    _m("atmostonce", "step_after_s", "s",
       "adaptive step loads: traffic after the step (step to the last arrival)", SIM),
    _m("atmostonce", "step_messages_to_settle", "messages",
       "adaptive step loads: messages sent between the step and the settling", SIM),
    _m("atmostonce", "reorder_window", "timestamps",
       "scmp reorder (our extension): the run's per-connection window W", SIM),
    _m("atmostonce", "refused_genuine", "messages",
       "scmp reorder: distinct messages a running receiver judged but never accepted", SIM),
    _m("atmostonce", "refused_genuine_rate", "ratio",
       "scmp reorder: refused_genuine / distinct messages a running receiver judged", SIM),
    _m("atmostonce", "table_bytes_mean", "bytes",
       "scmp reorder: mean table size in bytes over decided rows (16 per connection id, "
       "8 per remembered timestamp, 8 per floor when W > 1)", SIM),
    _m("atmostonce", "table_bytes_peak", "bytes", "scmp reorder: largest table_bytes", SIM),
    _m("atmostonce", "incarnation_marks", "flag",
       "scmp restart (our extension): 1 when the run's clients mark new messages "
       "with the incarnation they heard of (restart-marked), 0 for the paper's rule", SIM),
    _m("atmostonce", "refused_unknown", "messages",
       "scmp restart: messages never accepted and refused at least once stale or early "
       "(the lost verdicts): refused without the sender knowing whether a copy ran", SIM),
    _m("atmostonce", "refused_unknown_rate", "ratio",
       "scmp restart: refused_unknown / messages_sent", SIM),
    _m("atmostonce", "refused_after_restart", "messages",
       "scmp restart: refused_unknown messages sent at or after the restart (true time)",
       SIM),
    _m("atmostonce", "refused_after_heard", "messages",
       "scmp restart: refused_unknown messages sent at or after their client first heard "
       "of the new incarnation (an acknowledgment carrying its number)", SIM),
    _m("atmostonce", "served_again_max", "ticks",
       "scmp restart: largest time over clients from the restart to the client's first "
       "message accepted by the new incarnation", SIM),
    _m("atmostonce", "served_again_median", "ticks",
       "scmp restart: median over clients of the same time", SIM),
    _m("atmostonce", "served_after_heard_max", "ticks",
       "scmp restart: largest time over clients from first hearing of the new "
       "incarnation to the first message it accepted (0 when that came first)", SIM),
    _m("atmostonce", "served_after_heard_median", "ticks",
       "scmp restart: median over clients of the same time", SIM),
    _m("atmostonce", "not_served_again", "clients",
       "scmp restart: clients with no message accepted by the new incarnation", SIM),
    _m("atmostonce", "round_trip", "ticks",
       "scmp restart: twice the p_net quantile of the one-way delay", SIM),
    _m("atmostonce", "estimate_over_true", "ratio",
       "adaptive: final estimate / the largest true lifetime of the run's regime", SIM),
    _m("atmostonce", "true_max_lifetime", "ticks",
       "adaptive: the largest lifetime the run's delay regime allows", SIM),
    # causal
    _m("causal", "events", "rows", "events stamped"),
    _m("causal", "events.<type>", "rows", "events of that type (local, send, recv)"),
    _m("causal", "c_max", "count", "largest counter c of any timestamp"),
    _m("causal", "c_mean", "count", "mean counter c over events"),
    # merge
    _m("merge", "action.<action>", "rows", "merger output rows with that action"),
    _m("merge", "late_rate", "ratio", "late rows / (deliver + late rows)"),
    _m("merge", "buffering_<stat>", "ticks",
       "p50/p90/p99/max/mean of deliver time - first arrival at that merger"),
    # slotted
    _m("slotted", "delivered.<kind>", "messages", "messages of that kind delivered"),
    _m("slotted", "discarded.<kind>", "messages", "messages of that kind discarded"),
    _m("slotted", "discard.<reason>", "messages", "discards for that reason"),
    _m("slotted", "delay_<stat>.<kind>", "rows",
       "mean/p50/p99 of action row - arrival row, per kind"),
    _m("slotted", "buffer_<stat>", "messages",
       "p50/p99/max of messages the receiver holds after a row"),
    # stability
    _m("stability", "sent", "messages", "messages sent (send rows)", BOTH),
    _m("stability", "stable", "messages", "messages made stable", BOTH),
    _m("stability", "acks", "acks", "ack rows"),
    _m("stability", "ack_bytes", "bytes", "encoded size of every ack sent"),
    _m("stability", "ack_bytes_per_ack", "bytes", "ack_bytes / acks"),
    _m("stability", "recv.delivered", "rows", "recv rows delivered"),
    _m("stability", "recv.ignored", "rows", "recv rows Fig. 1 ignores"),
    _m("stability", "latency_<stat>", "ticks",
       "mean/p50/p99/max of ticks from a message's send to the row that made it stable",
       BOTH),
]


def _sim_measures() -> list[tuple[str, Measure]]:
    """Measures only the simulator's scenarios publish (see docs/simulate.md)."""
    return [
        _m("atmostonce", "rho", "ticks", "scmp: the run's fixed lifetime rho", SIM),
        _m("atmostonce", "estimate_during_over_true", "ratio",
           "adaptive: largest estimate in force over the second half of the run / the "
           "largest true lifetime", SIM),
        _m("atmostonce", "lost_per_accepted_at_<pct>pct", "ratio",
           "adaptive: lost_per_accepted once that percentage of the messages arrived", SIM),
        _m("atmostonce", "messages_expected", "messages",
           "adaptive: messages the run's clients are to send", SIM),
        _m("atmostonce", "out_of_order_accepted", "messages",
           "adaptive: accepted messages with ts not above the connection's last accepted",
           SIM),
        _m("atmostonce", "out_of_order_arrivals", "messages",
           "adaptive: first copies arriving after a later message of their connection",
           SIM),
        _m("atmostonce", "p", "count", "adaptive: the run's limited-horizon p (0: none)", SIM),
        _m("atmostonce", "duplicates_offered", "messages",
           "adaptive: copies of a datagram that had arrived already", SIM),
        # slotted scenario
        _m("slotted", "sent", "messages", "messages the sender sent", SIM),
        _m("slotted", "arrived", "messages", "messages the transport delivered", SIM),
        _m("slotted", "delivered", "messages", "messages the receiver delivered", SIM),
        _m("slotted", "discarded", "messages", "messages the receiver discarded", SIM),
        _m("slotted", "discard_pct", "percent", "100 * discarded / arrived", SIM),
        _m("slotted", "unreliable_arrived", "messages", "F and N messages that arrived", SIM),
        _m("slotted", "discard_pct_unreliable", "percent",
           "100 * discarded / unreliable_arrived", SIM),
        _m("slotted", "fr_delay_ms", "ms", "mean FR delivery delay (arrival to delivery)", SIM),
        _m("slotted", "inslot_delay_ms", "ms",
           "mean delivery delay of R, F and N messages", SIM),
        _m("slotted", "queue_mean", "messages", "time-averaged receiver buffer", SIM),
        _m("slotted", "queue_max", "messages", "largest receiver buffer", SIM),
        *(_m("slotted", f"definition_violations_{r}", "count", f"Definition 4.2 ({r}) "
             "broken, deliveries", SIM) for r in ("i", "ii", "iii", "iv")),
        _m("slotted", "fr_sent", "messages", "FRs sent (one per slot)", SIM),
        _m("slotted", "fr_delivered", "messages", "FRs delivered", SIM),
        _m("slotted", "queue_slot_mean", "messages",
           "time-averaged messages waiting for the FR that opens their slot (D1)", SIM),
        _m("slotted", "queue_order_mean", "messages",
           "time-averaged messages of the open slot waiting for earlier ones (D2: an F "
           "behind an earlier F of its slot, an FR behind its slot's R)", SIM),
        _m("slotted", "queue_f_mean", "messages", "time-averaged F messages buffered", SIM),
        _m("slotted", "little_gap_pct", "percent",
           "100 * |queue_mean - delivered rate x mean wait of the delivered| / queue_mean "
           "(Little's law)", SIM),
        _m("slotted", "fr_waited_pct", "percent",
           "100 * FRs that arrived before their slot opened / FRs delivered", SIM),
        _m("slotted", "retransmissions", "packets", "transport retransmissions", SIM),
        _m("slotted", "events", "events", "simulator events processed", SIM),
        _m("slotted", "slot_ms", "ms", "the run's slot length", SIM),
        # stability scenario (sent, stable, latency_* also in the pipeline: same meaning)
        _m("stability", "latency_max_<node>", "ticks",
           "largest send-to-stable latency of that sender's messages", SIM),
        _m("stability", "latency_mean_<node>", "ticks",
           "mean send-to-stable latency of that sender's messages", SIM),
        _m("stability", "ack_bytes_per_s", "bytes/s", "ack bytes sent per simulated second",
           SIM),
        _m("stability", "buffer_mean", "messages", "mean sender buffer", SIM),
        _m("stability", "buffer_max", "messages", "largest sender buffer", SIM),
        _m("stability", "n", "nodes", "senders (= receivers) of the run", SIM),
        _m("stability", "offset_spread", "ticks",
           "largest minus smallest clock offset of the run's nodes (skewed runs)", SIM),
        _m("stability", "offset_above_slowest_mean", "ticks",
           "mean over the nodes of their clock offset above the slowest one (skewed runs)",
           SIM),
        _m("stability", "ack_wire_bytes_per_s", "bytes/s",
           "ack bytes per simulated second as the live group encodes them (len(encode_ack) "
           "per ack sent)", SIM),
        _m("stability", "stable_checked", "messages", "messages made stable, checked", SIM),
        _m("stability", "stable_unreceived", "count",
           "(stable message, receiver without it) pairs: Theorem 1 (a) says 0", SIM),
        # merge scenario
        _m("merge", "order_mismatches", "messages",
           "positions where replicated mergers delivered different messages (must be 0)",
           SIM),
        _m("merge", "max_buffering", "ticks", "longest buffering at any merger", SIM),
        _m("merge", "buffering_bound", "ticks", "delta + 3 eps (Lemma 4.2)", SIM),
        _m("merge", "late_pct", "percent", "100 * late arrivals / arrivals", SIM),
        _m("merge", "published", "messages", "messages the publishers sent", SIM),
        _m("merge", "clock_spread", "ticks", "largest minus smallest clock reading minus engine time over the publishers' events (G1: <= epsilon)", SIM),
        _m("merge", "resets", "count", "stabilizing resets of the processes", SIM),
        _m("merge", "timestamp_bytes_n=<n>", "bytes", "bounded timestamp size for n processes",
           SIM),
        _m("merge", "vector_bytes_n=<n>", "bytes", "vector clock size for n processes", SIM),
    ]


#: protocol -> its measures. A name with ``<x>`` is a family (see ``Measure.matches``).
MEASURES: dict[str, tuple[Measure, ...]] = {}
for _protocol, _measure in _MEASURES + _sim_measures():
    MEASURES[_protocol] = MEASURES.get(_protocol, ()) + (_measure,)


def measure(protocol: str, name: str, by: str | None = None) -> Measure | None:
    """The definition of a published measure (exact names before families), or None."""
    found = [m for m in MEASURES.get(protocol, ()) if m.matches(name)
             and (by is None or by in m.by)]
    exact = [m for m in found if m.name == name]
    best = exact or found
    return best[0] if best else None


#: Verdicts that make an original row a lost message, and the one that is no decision.
LOST_VERDICTS = ("stale", "early")
UNDECIDED_VERDICT = "down"
