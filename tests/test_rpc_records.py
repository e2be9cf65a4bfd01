"""The RPC's hand-written records (``core/rpc/_records.py``) behave as the frozen
dataclasses they replaced: equal exactly when their fields are, hashed alike, shown and
unpickled the same way, matched by position, not weakly referenced; read-only when
compiled. (Hypothesis keeps weak references where it can: when these records were
compiled as ``Generic`` classes, that crashed the garbage collector.)"""

from __future__ import annotations

import gc
import pickle
import weakref
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from timebound._compiled import status
from timebound.core.rpc._records import (
    Invocation,
    Outgoing,
    ServerOutput,
    ServiceOutput,
    StartCall,
)

peers = st.tuples(st.sampled_from(["127.0.0.1", "::1"]), st.integers(0, 3))
starts = st.builds(StartCall, st.sampled_from(["a.1", "a.2"]), st.integers(1, 3),
                   st.binary(max_size=2), peers, st.integers(0, 1))
outgoings = st.builds(Outgoing, peers, st.binary(max_size=2))
invocations = st.builds(Invocation, st.sampled_from(["p", "q"]), st.binary(max_size=1), starts)
records = st.one_of(
    starts, outgoings, invocations,
    st.builds(ServerOutput, st.tuples(outgoings), st.tuples(starts)),
    st.builds(ServiceOutput, st.tuples(outgoings), st.tuples(invocations)))


def _fields(record: Any) -> tuple[Any, ...]:
    return tuple(getattr(record, name) for name in type(record).__match_args__)


@given(records, records)
def test_equal_exactly_when_same_type_and_fields(a: Any, b: Any) -> None:
    same = type(a) is type(b) and _fields(a) == _fields(b)
    assert (a == b) is same and (a != b) is not same
    if same:
        assert hash(a) == hash(b)
    assert a != _fields(a)  # never equal to a tuple of its fields


@given(records)
def test_repr_pickle_and_match_as_a_dataclass(record: Any) -> None:
    names = type(record).__match_args__
    shown = ", ".join(f"{n}={v!r}" for n, v in zip(names, _fields(record), strict=True))
    assert repr(record) == f"{type(record).__name__}({shown})"
    again = pickle.loads(pickle.dumps(record))
    assert again == record and type(again) is type(record) and hash(again) == hash(record)
    match record:
        case StartCall(conn, ts):
            assert (conn, ts) == (record.conn, record.ts)
        case Invocation(proc, args, start):
            assert (proc, args, start) == (record.proc, record.args, record.start)
        case _:
            pass


def test_no_weak_references_as_a_slotted_dataclass() -> None:
    start = StartCall("a.1", 1, b"", ("127.0.0.1", 1), 0)
    out = Outgoing(("127.0.0.1", 1), b"x")
    made = [start, out, Invocation("p", b"", start), ServerOutput((out,), (start,)),
            ServiceOutput((out,), ())]
    for record in made:
        with pytest.raises(TypeError):
            weakref.ref(record)
    del made, start, out
    gc.collect()  # where the crash of the generic classes showed


def test_defaults_and_read_only_fields() -> None:
    assert ServerOutput() == ServerOutput((), ()) and ServiceOutput().runs == ()
    if status() != "mypyc-compiled core":
        pytest.skip("fields are read-only when compiled (mypy's Final guards the pure Python)")
    out = Outgoing(("127.0.0.1", 1), b"x")
    with pytest.raises(AttributeError):
        out.datagram = b"y"  # type: ignore[misc]
