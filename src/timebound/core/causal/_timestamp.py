"""Causal timestamps and their ``less`` relations (causal merge paper, Figs. 1 and 3).

Two timestamp types live here, both immutable values:

``Timestamp`` -- ⟨r, c, kn⟩ of Fig. 1. ``r`` is the physical clock reading of the
event, ``r + c`` the largest clock value the event knows of, and ``kn`` an array of
2ε counters: ``kn[t]`` (offset ``t`` in ``-ε..ε-1``) counts the events at clock value
``r + t`` in the event's causal past (itself included). The array is stored as a tuple
of 2ε integers, position ``t + ε`` holding offset ``t``; ``kn_at(t)`` reads it with the
paper's convention that offsets outside ``-ε..ε-1`` hold 0. ε is the array's half
length, so a timestamp carries its own ε.

``RCTimestamp`` -- ⟨r, c⟩ of Fig. 3 (section 5), with no ``kn``.

``less`` is the paper's relation for ⟨r, c, kn⟩: ``r + c`` first, then, when the sums
are equal, ``lexgraph`` over ε entries of ``kn`` walking down from ``kn[c]``. Because
equal sums mean both walks visit the same absolute clock values, ``lexgraph`` is plain
lexicographic order of the tuples ``(kn[c], kn[c-1], ..., kn[c-ε+1])``; ``tiebreak()``
returns that tuple, which is what the merger sorts by (a total preorder that agrees
with ``less`` wherever ``less`` decides, see ``test_causal_less.py``).

``less_rc`` is the relation of section 5.1. For equal ``r + c`` it reduces to
``r.e < r.f``, so ``RCTimestamp.tiebreak()`` is ``(r,)``.

``check`` implements the stabilizing test of section 3.3, step 2: a state (or a
received timestamp) is *legitimate* iff it satisfies Lemmas 3.1, 3.2 and 3.4:
``0 <= c < ε``, ``kn[c] > 0``, ``kn[t] == 0`` for ``c < t < ε`` and ``0 <= kn[t] <= n``.
Choice where the paper is silent: a negative ``c`` or a negative counter is also
illegitimate (counts cannot be negative and Fig. 1 never produces them).
``n=None`` means "no bound from Lemma 3.4": used by the replay when the process bound is
the number of processes in the trace, which by Lemma 3.3 no counter can exceed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Timestamp:
    """⟨r, c, kn⟩ of Fig. 1; ``kn`` has 2ε entries for offsets -ε..ε-1."""

    r: int
    c: int
    kn: tuple[int, ...]

    @property
    def epsilon(self) -> int:
        return len(self.kn) // 2

    def kn_at(self, t: int) -> int:
        """``kn[t]`` for offset ``t``; 0 outside -ε..ε-1 (the paper's convention)."""
        index = t + len(self.kn) // 2
        if 0 <= index < len(self.kn):
            return self.kn[index]
        return 0

    def tiebreak(self) -> tuple[int, ...]:
        """``(kn[c], kn[c-1], ..., kn[c-ε+1])``: ``lexgraph`` as a sort key."""
        eps = len(self.kn) // 2
        kn = self.kn
        base = self.c + eps
        if 0 <= self.c < eps:  # the legitimate case: every index is inside the array
            return tuple(kn[base - k] for k in range(eps))
        return tuple(self.kn_at(self.c - k) for k in range(eps))


@dataclass(frozen=True, slots=True)
class RCTimestamp:
    """⟨r, c⟩ of Fig. 3."""

    r: int
    c: int

    def tiebreak(self) -> tuple[int, ...]:
        """Among equal ``r + c``, ``less_rc`` orders by ``r`` alone."""
        return (self.r,)


def initial(epsilon: int) -> Timestamp:
    """The virtual first event at clock 0: r = c = 0, kn[0] = 1."""
    kn = [0] * (2 * epsilon)
    kn[epsilon] = 1
    return Timestamp(0, 0, tuple(kn))


def lexgraph(e: Timestamp, c1: int, f: Timestamp, c2: int, n: int) -> bool:
    """The paper's ``lexgraph(kn.e, c1, kn.f, c2, n)`` (iterative), via ``kn_at``."""
    for k in range(n):
        a = e.kn_at(c1 - k)
        b = f.kn_at(c2 - k)
        if a < b:
            return True
        if a > b:
            return False
    return False


def less(e: Timestamp, f: Timestamp) -> bool:
    """``less(⟨r.e, c.e, kn.e⟩, ⟨r.f, c.f, kn.f⟩)`` of section 3.2."""
    se = e.r + e.c
    sf = f.r + f.c
    if se != sf:
        return se < sf
    return lexgraph(e, e.c, f, f.c, e.epsilon)


def less_rc(e: RCTimestamp, f: RCTimestamp, epsilon: int) -> bool:
    """``less(⟨r.e, c.e⟩, ⟨r.f, c.f⟩)`` of section 5.1."""
    if e.r + epsilon < f.r:
        return True
    if abs(e.r - f.r) > epsilon:
        return False
    se = e.r + e.c
    sf = f.r + f.c
    return se < sf or (se == sf and e.r < f.r)


def check(c: int, kn: tuple[int, ...] | list[int], n: int | None) -> bool:
    """True iff ``c`` and ``kn`` satisfy Lemmas 3.1, 3.2 and 3.4 (see module doc)."""
    eps = len(kn) // 2
    if not 0 <= c < eps:
        return False
    if kn[c + eps] <= 0:
        return False
    for index in range(c + eps + 1, 2 * eps):
        if kn[index] != 0:
            return False
    low = min(kn)
    if low < 0:
        return False
    return n is None or max(kn) <= n
