"""Every protocol is one registered spec (``timebound.protocols``), and the registry is
whole: each piece a spec names exists, and every piece of a kind the house has (a
replay command, an input table, an example trace, a docs page, a scenario's claims,
a report section, a library operator) belongs to a spec. A protocol added without
one of its pieces, or a piece without its spec, fails here with the piece named.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from timebound.protocols import BY_NAME, PROTOCOLS, ProtocolSpec

ROOT = Path(__file__).resolve().parent.parent


def _resolve(dotted: str) -> object:
    module, _, attribute = dotted.partition(":")
    found: object = importlib.import_module(module)
    return getattr(found, attribute) if attribute else found


def missing_pieces(spec: ProtocolSpec) -> list[str]:
    """What of ``spec`` does not exist, each as ``name: piece (what)``."""
    from timebound import contract
    from timebound.examples_cli import example_path
    from timebound.sim import SCENARIOS
    from timebound.spark.traces import OPERATORS

    problems: list[str] = []

    def need(piece: str, ok: bool) -> None:
        if not ok:
            problems.append(f"{spec.name}: {piece}")

    for piece, dotted in (("core", spec.core), ("adapter", spec.adapter),
                          ("claims", spec.claims), ("operator", spec.operator)):
        try:
            target = _resolve(dotted)
        except (ImportError, AttributeError):
            need(f"{piece} {dotted}", False)
            continue
        need(f"{piece} {dotted} is not callable", piece == "claims" or callable(target))
    try:
        command = importlib.import_module(spec.replay).COMMAND
        need(f"replay {spec.replay} names another protocol", command.name == spec.name)
    except (ImportError, AttributeError):
        need(f"replay {spec.replay}", False)
    table = contract.INPUT_TABLES.get(spec.table)
    need(f"table {spec.table!r} in the contract", table is not None)
    need(f"table {spec.table!r} is another protocol's",
         table is None or table.protocol == spec.name)
    need(f"measures of {spec.name!r} in the contract", bool(contract.MEASURES.get(spec.name)))
    need(f"Spark operator over {spec.table!r}", spec.table in OPERATORS)
    for scenario in spec.scenarios:
        need(f"scenario {scenario!r}", scenario in SCENARIOS)
    try:
        need(f"example {spec.example}", Path(example_path(spec.name)).name == spec.example)
    except Exception:  # noqa: BLE001 - a missing example raises the CLI's error
        need(f"example {spec.example}", False)
    need(f"docs page {spec.docs}", (ROOT / spec.docs).is_file())
    return problems


@pytest.mark.parametrize("spec", PROTOCOLS, ids=[s.name for s in PROTOCOLS])
def test_every_piece_a_spec_names_exists(spec: ProtocolSpec) -> None:
    assert missing_pieces(spec) == []


def test_the_walk_finds_a_missing_piece() -> None:
    """The check itself: a spec with a core that does not exist, a table of another
    protocol and no docs page is reported piece by piece."""
    import dataclasses

    broken = dataclasses.replace(BY_NAME["slotted"], core="timebound.core.slotted:Nope",
                                 table="acks", docs="docs/replay-" + "nope.md")
    problems = missing_pieces(broken)
    assert problems == ["slotted: core timebound.core.slotted:Nope",
                        "slotted: table 'acks' is another protocol's",
                        "slotted: docs page docs/replay-" + "nope.md"], problems


def test_every_piece_of_the_house_belongs_to_a_spec() -> None:
    from timebound import contract, replay
    from timebound.report._build import PROTOCOL_TITLES

    names = {spec.name for spec in PROTOCOLS}
    assert len(names) == len(PROTOCOLS)
    assert set(replay.REGISTRY) == names
    assert {t.protocol for t in contract.INPUT_TABLES.values()} == names
    assert {spec.table for spec in PROTOCOLS} == set(contract.INPUT_TABLES)
    examples = ROOT / "src" / "timebound" / "examples"
    assert {p.stem for p in examples.glob("*.jsonl")} == names
    assert {p.name for p in (ROOT / "docs").glob("replay-*.md")} == {
        Path(spec.docs).name for spec in PROTOCOLS}
    assert set(PROTOCOL_TITLES) == names
    import timebound.spark
    operators = {name for name in timebound.spark.__all__
                 if callable(getattr(timebound.spark, name)) and name[0].islower()
                 and name not in ("typed_errors", "compare")}
    assert operators == {spec.operator.partition(":")[2] for spec in PROTOCOLS}


def test_contributing_lists_the_pieces_in_the_specs_order() -> None:
    """CONTRIBUTING.md's "Add a protocol" names every field of a spec, in order."""
    import dataclasses

    text = (ROOT / "CONTRIBUTING.md").read_text()
    section = text[text.index("## Add a protocol"):]
    section = section[:section.index("\n## ", 4)] if "\n## " in section[4:] else section
    at = [section.index(f"`{field.name}`") for field in dataclasses.fields(ProtocolSpec)]
    assert at == sorted(at), "the section lists the spec's fields out of order"
