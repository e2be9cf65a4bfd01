"""One contract (``timebound.contract``) and everything that must agree with it: the
simulator's writers (and the datasets they write), the replay commands (output types,
option flags), the row adapters (which option columns they read), the pipeline's
schemas and metrics, and the report's measure names. Each test fails if one of them
disagrees; the last checks that a measure published by both the simulator and the
pipeline has the same value on the same dataset (one definition, e.g. ``lost_rate``).
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from timebound import contract
from timebound.adapters import ADAPTERS
from timebound.replay import load_commands
from timebound.sim import DEMO_PARAMS, run_scenario
from timebound.sim._dataset import SCHEMAS

ARROW_NAMES = {"string": "string", "int64": "int64", "bool": "bool", "double": "double",
               "list<int64>": "list<element: int64>", "list<item: int64>": "list<int64>"}


def _arrow_type(kind: Any) -> str:
    text = str(kind)
    if text.startswith("list<"):
        return "list<int64>"
    return {"string": "string", "int64": "int64", "bool": "bool", "double": "double"}[text]


# -- the contract itself ---------------------------------------------------------------


def test_contract_is_consistent() -> None:
    assert list(contract.PROTOCOLS) == ["messages", "events", "arrivals", "channel", "acks"]
    assert list(contract.TABLES) == list(contract.OPTIONS) == list(ADAPTERS)
    for table in [*contract.INPUT_TABLES.values(), contract.METRICS,
                  *contract.SIM_TABLES.values()]:
        names = [c.name for c in table.columns] + [o.name for o in table.options]
        assert len(names) == len(set(names)), table.name
        for column in [*table.columns, *table.options]:
            assert column.type in contract.TYPES, (table.name, column)
        assert {"run"} <= {c.name for c in table.required}, table.name
    for options in contract.OPTIONS.values():
        for option in options:
            if option.type == "int64":
                assert option.low is not None and option.high is not None
                assert contract.INT64_MIN <= option.low <= option.high <= contract.INT64_MAX
    for protocol, measures in contract.MEASURES.items():
        assert protocol in contract.TABLES
        names = [m.name for m in measures]
        assert len(names) == len(set(names)), protocol
        for m in measures:
            assert m.unit and m.definition.strip() and set(m.by) <= {"sim", "pipeline"}, m


def test_one_lost_definition() -> None:
    """lost / originals / lost_rate / lost_per_accepted: defined once, for both."""
    for name in ("lost", "originals", "lost_rate", "lost_per_accepted"):
        m = contract.measure("atmostonce", name)
        assert m is not None and m.name == name and set(m.by) == {"sim", "pipeline"}
    assert contract.LOST_VERDICTS == ("stale", "early")
    assert set(contract.LOST_VERDICTS) < set(contract.VERDICTS)
    assert contract.UNDECIDED_VERDICT in contract.VERDICTS


# -- the simulator -----------------------------------------------------------------------


def test_simulator_schemas_are_the_contract() -> None:
    for table in contract.INPUT_TABLES.values():
        got = SCHEMAS[table.name]
        assert got == contract.dataset_columns(table.name, simulated=True)
        # the simulator writes every input column, then option columns as the contract
        # names them, then the row extension columns
        assert [c for c, _ in got][: len(table.columns)] == [c.name for c in table.columns]
        assert {c for c, _ in got} - {c.name for c in table.columns} <= \
            {o.name for o in table.options} | {c.name for c in table.extensions}
        if table.extensions:
            assert got[-len(table.extensions):] == [(c.name, c.type) for c in table.extensions]
        assert set(contract.EXTENSION_COLUMNS.get(table.name, ())) <= {c for c, _ in got}
        assert contract.REFUSED_BY_DRIVERS.get(table.name, ()) == \
            tuple(c.name for c in table.extensions)
    assert SCHEMAS["metrics"] == [(c.name, c.type) for c in contract.METRICS.columns]
    for name, table in contract.SIM_TABLES.items():
        assert SCHEMAS[name] == [(c.name, c.type) for c in table.columns]


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every scenario at a tenth of the demo scale (a few seconds in all)."""
    from timebound.demo import scaled

    root = tmp_path_factory.mktemp("contract")
    out = {}
    for name, params in DEMO_PARAMS.items():
        out[name] = root / name
        run_scenario(name, str(out[name]), seed=3, params=scaled(params, 0.1))
    return out


def _parquet_tables(dataset: Path) -> Iterator[tuple[str, Any]]:
    for folder in sorted(p for p in dataset.iterdir() if p.is_dir()):
        yield folder.name, pq.read_schema(next(folder.glob("*.parquet")))


def test_written_datasets_follow_the_contract(datasets: dict[str, Path]) -> None:
    for name, dataset in datasets.items():
        for table, schema in _parquet_tables(dataset):
            expected = contract.dataset_columns(table, simulated=True)
            got = [(f.name, _arrow_type(f.type)) for f in schema]
            # an extension column is written only when some run uses it
            optional = contract.EXTENSION_COLUMNS.get(table, ())
            assert [c for c in expected if c in got] == got, (name, table)
            assert {c for c, _ in expected} - {c for c, _ in got} <= set(optional), \
                (name, table)


def test_simulator_measures_are_defined(datasets: dict[str, Path]) -> None:
    for name, dataset in datasets.items():
        for row in pq.read_table(dataset / "metrics").to_pylist():
            m = contract.measure(row["protocol"], row["measure"], by="sim")
            assert m is not None, (name, row["protocol"], row["measure"])
            assert m.series == (row["t"] is not None) or "<" in m.name, (name, row)


# -- replay commands and adapters ------------------------------------------------------


def test_replay_commands_follow_the_contract() -> None:
    commands = {c.name: c for c in load_commands()}
    assert list(commands) == ["atmostonce", "slotted", "stability", "causal", "merge"]
    assert set(commands) == set(contract.TABLES)
    for name, command in commands.items():
        assert dict(command.output_types) == contract.REPLAY_OUTPUTS[name]
        parser = argparse.ArgumentParser()
        command.add_arguments(parser)
        dests = {a.dest for a in parser._actions} - {"help", "input", "output", "stats"}
        assert dests == {o.name for o in contract.OPTIONS[name]}, name
        for action in parser._actions:
            if action.dest in dests:
                assert action.option_strings == [contract.INPUT_TABLES[
                    contract.TABLES[name]].option(action.dest).flag], action
                if action.type is int:
                    assert action.default is None, action.dest  # require() sees "missing"


class _Recording(dict[str, Any]):
    """Option values that remember which keys were read."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        super().__init__(values)
        self.read: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)


#: For each protocol, option values that together make every option column read.
VALUE_SETS: dict[str, list[dict[str, Any]]] = {
    "atmostonce": [
        {"estimator": "fixed", "rho": 5, "gc_every": 5, "resilient": True, "beta": 1,
         "latest_every": 2, "recovery_grace": 3, "classes": 2},
        {"estimator": "limited", "window": 4, "spikes": 1, "p": 2},
    ],
    "causal": [{"epsilon": 2, "variant": "rckn", "n": 3}],
    "merge": [{"epsilon": 2, "delta": 1, "variant": "rc"}],
    "slotted": [{}],
    "stability": [{"acks": "vector", "senders": "s1", "receivers": "r1"}],
}


def test_adapters_read_exactly_the_option_columns() -> None:
    for protocol, spec in ADAPTERS.items():
        columns = {o.name for o in contract.OPTIONS[protocol]}
        assert set(spec.option_columns) == columns
        read: set[str] = set()
        for values in VALUE_SETS[protocol]:
            recording = _Recording(values)
            spec.build(recording)
            read |= recording.read
        assert read == columns, protocol
        for values in VALUE_SETS[protocol]:
            assert spec.adapter(spec.options(values)).output_types.keys() == \
                contract.REPLAY_OUTPUTS[protocol].keys()


def test_option_ranges_are_checked_by_the_adapters() -> None:
    from timebound.errors import UsageError

    for protocol, options in contract.OPTIONS.items():
        for option in options:
            if option.high is None or option.high == contract.INT64_MAX:
                continue
            for values in VALUE_SETS[protocol]:
                if option.name in values:
                    bad = {**values, option.name: option.high + 1}
                    with pytest.raises(UsageError, match=re.escape(option.flag)):
                        ADAPTERS[protocol].options(bad)


# -- pipeline schemas, metrics and the report ------------------------------------------


def test_pipeline_schemas_are_the_contract() -> None:
    from timebound.pipeline.datasets import type_name
    from timebound.spark.traces import schemas

    def names(struct: Any) -> list[tuple[str, str]]:
        return [(f.name, type_name(f.dataType)) for f in struct.fields]

    assert schemas.PROTOCOLS == contract.PROTOCOLS
    for name, table in contract.INPUT_TABLES.items():
        assert names(schemas.REQUIRED[name]) == [(c.name, c.type) for c in table.required]
        assert names(schemas.OPTIONAL[name]) == [(c.name, c.type) for c in table.optional]
        assert names(schemas.OPTIONS[name]) == [(o.name, o.type) for o in table.options]
    for name, columns in contract.DECISION_EXTRA.items():
        assert names(schemas.DECISION_EXTRA[name]) == [(c.name, c.type) for c in columns]
    assert names(schemas.MERGE_DECISIONS) == \
        [(c.name, c.type) for c in contract.DECISION_TABLES["arrivals"]]
    assert names(schemas.SLOTTED_DECISIONS) == \
        [(c.name, c.type) for c in contract.DECISION_TABLES["channel"]]
    assert names(schemas.METRICS) == [(c.name, c.type) for c in contract.METRICS.columns]


def test_report_measures_are_defined() -> None:
    from timebound.pipeline.job import HEADLINE
    from timebound.report import _build

    for protocol, (_param, _axis, _caption, _split, measures) in _build._AGAINST.items():
        for measure, _label in measures:
            assert contract.measure(protocol, measure, by="pipeline"), (protocol, measure)
    source = Path(_build.__file__).read_text(encoding="utf-8")
    branch = source[source.index('if protocol == "atmostonce":'):]
    branch = branch[: branch.index("\n    elif") if "\n    elif" in branch else None]
    used = set(re.findall(r'\(\("([a-z_.]+)", "', branch)) | set(
        re.findall(r'fig\.series\(mine, "([a-z_.]+)"', branch))
    assert used >= {"lost_rate", "estimate", "table_size"}
    for measure in used:
        assert contract.measure("atmostonce", measure, by="pipeline"), measure
    for protocol, measure, _how in HEADLINE:
        assert contract.measure(protocol, measure, by="pipeline"), (protocol, measure)


@pytest.mark.spark
def test_pipeline_measures_are_defined_and_agree_with_the_simulator(
        spark: Any, datasets: dict[str, Path], tmp_path: Path) -> None:
    """The pipeline over the scmp dataset (crashes: down and early verdicts; a rho
    sweep: stale ones): every measure it publishes is in the contract, and every measure
    both publish has the simulator's value."""
    from timebound.pipeline import run_pipeline

    for name in ("scmp",):
        out = tmp_path / name
        run_pipeline(str(datasets[name]), str(out), spark=spark, progress=lambda _l: None)
        piped = pq.read_table(out / "metrics").to_pylist()
        simulated = pq.read_table(datasets[name] / "metrics").to_pylist()
        for row in piped:
            m = contract.measure(row["protocol"], row["measure"], by="pipeline")
            assert m is not None, (row["protocol"], row["measure"])
        both = {m.name for m in contract.MEASURES["atmostonce"]
                if set(m.by) == {"sim", "pipeline"} and not m.series}
        sim_values = {(r["run"], r["measure"]): r["value"] for r in simulated
                      if r["t"] is None}
        checked = 0
        for row in piped:
            key = (row["run"], row["measure"])
            if row["measure"] in both and row["t"] is None and key in sim_values:
                assert math.isclose(row["value"], sim_values[key], rel_tol=1e-9,
                                    abs_tol=1e-12), (name, key, row["value"], sim_values[key])
                checked += 1
        assert checked >= 4 * len({r["run"] for r in piped}), (name, checked)
