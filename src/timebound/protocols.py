"""The protocols, one registered spec each: every piece a protocol has, in one place.

A protocol is a sans-IO core, the row adapter the drivers feed it through, its input
table of the trace-dataset contract (with its option columns and measures), a replay
command, the simulator scenarios that exercise it, the paper's claims those runs are
judged by, the Spark operator over its table, the DataFrame operator of the library,
a section of the report, a bundled example trace and a docs page. ``PROTOCOLS`` names
each piece (a dotted ``module:attribute``, a table, a file), in the order the house
adds them (CONTRIBUTING.md, "Add a protocol"); ``tests/test_protocols.py`` walks it
and fails when a piece is missing, or when a piece exists that no spec names (a
replay command, an input table, an example, a docs page, a report section).

The drivers read their lists from here (``timebound.replay.REGISTRY``, the report's
section titles), so a protocol is added here first. Leaf module: it names pieces and
imports none of them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProtocolSpec:
    """One protocol's pieces (dotted names are ``module:attribute``)."""

    #: The replay command's name (``timebound replay NAME``) and the report's key.
    name: str
    #: The report's section title.
    title: str
    #: The sans-IO core's main class.
    core: str
    #: The row adapter the drivers feed the core through.
    adapter: str
    #: Its input table in the trace-dataset contract (``contract.INPUT_TABLES``).
    table: str
    #: The replay command's module (it defines ``COMMAND``).
    replay: str
    #: The simulator scenarios whose runs exercise it (``sim.SCENARIOS``).
    scenarios: tuple[str, ...]
    #: The claims module of its paper (``claims``).
    claims: str
    #: The library's DataFrame operator (``timebound.spark``).
    operator: str
    #: The bundled example trace (``timebound examples NAME``).
    example: str
    #: Its docs page.
    docs: str


PROTOCOLS: tuple[ProtocolSpec, ...] = (
    ProtocolSpec(
        name="atmostonce", title="At-most-once messages (SCMP; adaptive lifetime estimation)",
        core="timebound.core.atmostonce:Receiver",
        adapter="timebound.adapters.atmostonce:AtMostOnceAdapter", table="messages",
        replay="timebound.replay.atmostonce", scenarios=("scmp", "adaptive"),
        claims="timebound.claims._scmp", operator="timebound.spark:at_most_once",
        example="atmostonce.jsonl", docs="docs/replay-atmostonce.md"),
    ProtocolSpec(
        name="slotted", title="Slotted FIFO channels",
        core="timebound.core.slotted:SlottedReceiver",
        adapter="timebound.adapters.slotted:SlottedAdapter", table="channel",
        replay="timebound.replay.slotted", scenarios=("slotted",),
        claims="timebound.claims._slotted", operator="timebound.spark:slotted",
        example="slotted.jsonl", docs="docs/replay-slotted.md"),
    ProtocolSpec(
        name="stability", title="Message stability by timestamp acknowledgments",
        core="timebound.core.stability:StabilityNode",
        adapter="timebound.adapters.stability:StabilityAdapter", table="acks",
        replay="timebound.replay.stability", scenarios=("stability",),
        claims="timebound.claims._stability", operator="timebound.spark:stability",
        example="stability.jsonl", docs="docs/replay-stability.md"),
    ProtocolSpec(
        name="causal", title="Causal logical timestamps",
        core="timebound.core.causal:CausalProcess",
        adapter="timebound.adapters.causal:CausalAdapter", table="events",
        replay="timebound.replay.causal", scenarios=("merge",),
        claims="timebound.claims._merge", operator="timebound.spark:causal_stamp",
        example="causal.jsonl", docs="docs/replay-causal.md"),
    ProtocolSpec(
        name="merge", title="Causal deterministic merge",
        core="timebound.core.merge:Merger",
        adapter="timebound.adapters.merge:MergeAdapter", table="arrivals",
        replay="timebound.replay.merge", scenarios=("merge",),
        claims="timebound.claims._merge", operator="timebound.spark:causal_merge",
        example="merge.jsonl", docs="docs/replay-merge.md"),
)

#: name -> spec.
BY_NAME: dict[str, ProtocolSpec] = {spec.name: spec for spec in PROTOCOLS}
