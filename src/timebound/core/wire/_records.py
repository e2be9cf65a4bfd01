"""What a sans-IO core asks its driver to send (``Outgoing``: a datagram and its
peer), shared by every live protocol (RPC, channels), and ``Record``, the base of the
cores' immutable records.

``Record`` gives equality, hash, repr and pickling from the fields ``_values()``
returns, as a frozen dataclass has them, written out by hand rather than with
``@dataclass`` (whose generated ``__init__`` stays interpreted under mypyc): this
module is compiled with the RPC core (``timebound._compiled``) because every datagram
a server sends is one ``Outgoing``. Compiled, one costs about 60 ns to make instead of
0.3-0.6 us for an interpreted frozen dataclass, and its fields are read-only
(``AttributeError``); records unpickle through their constructor. They are not
``Generic`` in the peer type: mypyc (2.4) compiles a generic class with a
``__weakref__`` slot it does not clear when an instance dies, so a weak reference to
one (Hypothesis keeps some) later crashes the garbage collector
(``tests/test_rpc_records.py``).
"""

from __future__ import annotations

from typing import Any, ClassVar, Final


class Record:
    """Equality, hash, repr and pickling from the fields ``_values()`` returns, in
    the order of ``__match_args__`` (as a frozen dataclass has them)."""

    __slots__ = ()

    def _values(self) -> tuple[Any, ...]:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Record)
        return self._values() == other._values()

    def __ne__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Record)
        return self._values() != other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        names: tuple[str, ...] = getattr(type(self), "__match_args__")  # noqa: B009 (each subclass's)
        shown = ", ".join(f"{n}={v!r}" for n, v in zip(names, self._values(), strict=True))
        return f"{type(self).__name__}({shown})"

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (type(self), self._values())


class Outgoing(Record):
    """A datagram to send to ``peer``."""

    __slots__ = ("peer", "datagram")
    __match_args__: ClassVar[tuple[str, ...]] = ("peer", "datagram")

    def __init__(self, peer: Any, datagram: bytes) -> None:
        self.peer: Final = peer
        self.datagram: Final = datagram

    def _values(self) -> tuple[Any, ...]:
        return (self.peer, self.datagram)
