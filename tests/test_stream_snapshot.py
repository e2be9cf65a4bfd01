"""Core snapshots (what the streaming driver keeps in Spark's state store) round-trip.

For every estimator, plain and resilient receivers, with classes, and for the merger
(both timestamp variants, with and without ``retain``): run a random prefix of
inputs, snapshot, JSON round-trip, restore into a fresh core of the same
configuration, then feed the same random suffix to both. The restored core must give
the same snapshot and the same answers, input for input.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from timebound.core.atmostonce import (
    ClassifiedReceiver,
    ReceiverConfig,
    classified_snapshot,
    crc32_classifier,
    receiver_snapshot,
    restore_classified,
    restore_receiver,
)
from timebound.core.causal import RCTimestamp, Timestamp
from timebound.core.merge import Envelope, Merger, merger_snapshot, restore_merger

CONFIGS = [
    ReceiverConfig("fixed", rho=5, gc_every=3),
    ReceiverConfig("unlimited", gc_every=4),
    ReceiverConfig("limited", window=3, spikes=1, p=2),
    ReceiverConfig("fixed", rho=4, gc_every=5, resilient=True, beta=6, latest_every=3),
    ReceiverConfig("unlimited", gc_every=3, resilient=True, beta=8, latest_every=4,
                   recovery_grace=5),
    ReceiverConfig("limited", window=4, spikes=0, p=1, resilient=True, beta=5,
                   latest_every=2),
    ReceiverConfig("fixed", rho=6, gc_every=4, resilient=True, beta=7, latest_every=3,
                   reorder_window=3),
]

# An input: ("msg", conn, ts, dt) | ("crash", down, dt) | ("tick", dt); time moves by dt.
_msg = st.tuples(st.just("msg"), st.sampled_from(["a", "b", "c", "d", "é"]),
                 st.integers(1, 40), st.integers(0, 4))
_crash = st.tuples(st.just("crash"), st.integers(1, 6), st.integers(0, 4))
_tick = st.tuples(st.just("tick"), st.integers(0, 9))
INPUTS = st.lists(st.one_of(_msg, _msg, _msg, _crash, _tick), max_size=40)


def _json(data: object) -> object:
    return json.loads(json.dumps(data, sort_keys=True))


def _drive(node: ClassifiedReceiver, resilient: bool, inputs: list, now: int
           ) -> tuple[list[object], int]:
    out: list[object] = []
    for item in inputs:
        now += item[-1]
        if item[0] == "msg":
            receiver = node.receiver_for(item[1])
            rho = receiver.estimate
            verdict = node.receive(item[1], item[2], now=now)
            out.append((verdict.value, rho, node.entries, node.next_deadline()))
        elif item[0] == "crash":
            node.handle_timer(now=now)
            if resilient and not node.down:
                node.crash(now=now, down=item[1])
            out.append(("crash", node.down))
        else:
            node.handle_timer(now=now)
            out.append(("tick", node.entries, node.next_deadline()))
    return out, now


@given(st.sampled_from(range(len(CONFIGS))), st.sampled_from([1, 3]), INPUTS, INPUTS)
def test_receiver_snapshot_round_trip(index: int, classes: int, prefix: list,
                                      suffix: list) -> None:
    config = CONFIGS[index]

    def fresh() -> ClassifiedReceiver:
        return ClassifiedReceiver([config.new_receiver() for _ in range(classes)],
                                  crc32_classifier(classes))

    original = fresh()
    _, now = _drive(original, config.resilient, prefix, 0)
    data = _json(classified_snapshot(original))
    restored = restore_classified(fresh(), data)  # type: ignore[arg-type]
    assert _json(classified_snapshot(restored)) == data
    assert restored.statistics() == original.statistics()
    ours, _ = _drive(restored, config.resilient, suffix, now)
    theirs, _ = _drive(original, config.resilient, suffix, now)
    assert ours == theirs
    assert classified_snapshot(restored) == classified_snapshot(original)


def _version_1(data: dict) -> dict:
    """``data`` as version 1 wrote it: the table and windows as ``[conn, value]`` pairs."""
    def pairs(columns: list | None) -> list | None:
        return None if columns is None else [list(p) for p in zip(*columns)]

    return {**data, "version": 1, "table": pairs(data["table"]),
            "windows": pairs(data["windows"])}


@given(st.sampled_from(range(len(CONFIGS))), INPUTS, INPUTS)
def test_a_version_1_snapshot_restores_as_it_was_written(index: int, prefix: list,
                                                          suffix: list) -> None:
    """A checkpoint saved before the table became two lists goes on: its receivers
    restore to the same state and answer the same."""
    config = CONFIGS[index]

    def fresh() -> ClassifiedReceiver:
        return ClassifiedReceiver([config.new_receiver()], crc32_classifier(1))

    original = fresh()
    _, now = _drive(original, config.resilient, prefix, 0)
    data = _json(classified_snapshot(original))
    assert isinstance(data, dict)
    old = {**data, "version": 1, "receivers": [_version_1(r) for r in data["receivers"]]}
    restored = restore_classified(fresh(), _json(old))  # type: ignore[arg-type]
    assert _json(classified_snapshot(restored)) == data
    ours, _ = _drive(restored, config.resilient, suffix, now)
    theirs, _ = _drive(original, config.resilient, suffix, now)
    assert ours == theirs


def test_a_table_whose_lists_differ_in_length_is_refused() -> None:
    import pytest

    from timebound.errors import ProtocolUsageError

    receiver = CONFIGS[0].new_receiver()
    receiver.receive("c1", 3, now=5)
    data = receiver_snapshot(receiver)
    conns, stamps = data["table"]
    with pytest.raises(ProtocolUsageError, match="differ in length"):
        restore_receiver(CONFIGS[0].new_receiver(), {**data, "table": [conns, stamps + [9]]})


def test_single_receiver_snapshot_is_json_and_version_checked() -> None:
    config = CONFIGS[4]
    receiver = config.new_receiver()
    receiver.receive("c1", 3, now=5)
    data = receiver_snapshot(receiver)
    assert json.loads(json.dumps(data)) == data
    other = restore_receiver(config.new_receiver(), data)
    assert receiver_snapshot(other) == data
    import pytest

    from timebound.errors import ProtocolUsageError

    with pytest.raises(ProtocolUsageError):
        restore_receiver(config.new_receiver(), {**data, "version": 99})
    with pytest.raises(ProtocolUsageError):
        restore_receiver(CONFIGS[2].new_receiver(), data)  # another estimator kind


# -- merger -----------------------------------------------------------------------

_arrival = st.tuples(st.sampled_from(["p0", "p1", "p2"]), st.sampled_from(["m1", "m2", "m3", "m4"]),
                     st.integers(0, 12), st.integers(0, 2), st.integers(0, 3),
                     st.lists(st.integers(0, 3), min_size=4, max_size=4))
ARRIVALS = st.lists(_arrival, max_size=30)


def _feed(merger: Merger, variant: str, arrivals: list, now: int) -> tuple[list[object], int]:
    out: list[object] = []
    for proc, msg, r, c, dt, kn in arrivals:
        now += dt
        out.extend(("deliver", d.envelope.proc, d.envelope.msg, d.time, d.arrived)
                   for d in merger.handle_timer(now=now - 1))
        stamp = Timestamp(r, c, tuple(kn)) if variant == "rckn" else RCTimestamp(r, c)
        out.append(merger.receive(Envelope(proc, msg, stamp), now=now).value)
    return out, now


@given(st.sampled_from(["rckn", "rc"]), st.sampled_from([None, 0, 3]), ARRIVALS, ARRIVALS)
def test_merger_snapshot_round_trip(variant: str, retain: int | None, prefix: list,
                                    suffix: list) -> None:
    original = Merger(2, 3, retain=retain)
    _, now = _feed(original, variant, prefix, 0)
    data = _json(merger_snapshot(original))
    restored = restore_merger(Merger(2, 3, retain=retain), data)  # type: ignore[arg-type]
    assert _json(merger_snapshot(restored)) == data
    assert restored.statistics() == original.statistics()
    ours, _ = _feed(restored, variant, suffix, now)
    theirs, _ = _feed(original, variant, suffix, now)
    assert ours == theirs
    assert [(d.envelope, d.time) for d in restored.flush()] == \
        [(d.envelope, d.time) for d in original.flush()]
