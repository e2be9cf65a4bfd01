"""Every table schema of the pipeline, as Spark ``StructType``s (the trace-dataset
contract of CONTRIBUTING.md).

For each input table: the columns every dataset must carry (``REQUIRED``), the ones it
may leave out (``OPTIONAL``: added as nulls when absent, e.g. ``down`` in a trace
without crashes), and the per-run option columns of its protocol (``OPTIONS``: named
like the replay options' argparse dests; constant within a run when present).
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

S = StringType()
L = LongType()
B = BooleanType()
LIST = ArrayType(L, containsNull=True)


def struct(*columns: tuple[str, DataType]) -> StructType:
    return StructType([StructField(name, kind, nullable=True) for name, kind in columns])


#: table -> protocol (replay command name).
PROTOCOLS: dict[str, str] = {
    "messages": "atmostonce",
    "events": "causal",
    "arrivals": "merge",
    "channel": "slotted",
    "acks": "stability",
}
TABLES: dict[str, str] = {protocol: table for table, protocol in PROTOCOLS.items()}

REQUIRED: dict[str, StructType] = {
    "messages": struct(("run", S), ("seq", L), ("type", S), ("receiver", S), ("conn", S),
                       ("ts", L), ("at", L)),
    "events": struct(("run", S), ("seq", L), ("type", S), ("proc", S), ("rt", L)),
    "arrivals": struct(("run", S), ("seq", L), ("merger", S), ("msg", S), ("proc", S),
                       ("at", L), ("r", L), ("c", L)),
    "channel": struct(("run", S), ("seq", L), ("channel", S), ("type", S), ("id", S)),
    "acks": struct(("run", S), ("seq", L), ("type", S), ("node", S), ("at", L)),
}

OPTIONAL: dict[str, StructType] = {
    "messages": struct(("down", L), ("original", B)),
    "events": struct(("msg", S)),
    "arrivals": struct(("kn", LIST)),
    "channel": struct(("kind", S)),
    "acks": struct(("from", S), ("ts", L), ("id", S), ("ack", S)),
}

OPTIONS: dict[str, StructType] = {
    "messages": struct(("estimator", S), ("rho", L), ("gc_every", L), ("window", L),
                       ("spikes", L), ("p", L), ("resilient", B), ("beta", L),
                       ("latest_every", L), ("recovery_grace", L), ("classes", L)),
    "events": struct(("epsilon", L), ("variant", S), ("n", L)),
    "arrivals": struct(("epsilon", L), ("delta", L), ("variant", S)),
    "channel": struct(),
    "acks": struct(("acks", S), ("senders", S), ("receivers", S)),
}

#: Columns each operator adds to its input columns in the decision table.
DECISION_EXTRA: dict[str, StructType] = {
    # the replay's output columns ...
    "messages": struct(("verdict", S), ("rho", L), ("entries", L), ("cls", L)),
    "events": struct(("r", L), ("c", L), ("kn", LIST)),
    "acks": struct(("delivered", B), ("value", L), ("value_vector", MapType(S, L)),
                   ("stable", LIST), ("ack_bytes", L)),
}

#: Decision tables not shaped like their input (their rows are the receiver's actions).
MERGE_DECISIONS = struct(("run", S), ("merger", S), ("seq", L), ("msg", S), ("proc", S),
                         ("action", S), ("time", L), ("at", L))
SLOTTED_DECISIONS = struct(("run", S), ("channel", S), ("seq", L), ("id", S), ("action", S),
                           ("kind", S), ("reason", S), ("arrived", L), ("step", L),
                           ("buffered", L))

METRICS = struct(("run", S), ("protocol", S), ("measure", S), ("value", DoubleType()),
                 ("t", L))
