"""One process's logical clock: Fig. 1 with the stabilizing resets of section 3.3,
Fig. 3 (the ⟨r, c⟩ variant), and the bounded-c variant of section 5.2.

Every event method takes the process's physical clock reading ``rt`` (an integer tick;
the caller reads the clock, the core never does) and returns the event's timestamp.
A send event is a local event whose timestamp the message carries.

Verbs (aioquic's, ``now`` keyword-only): ``send(*, now)`` (a send or local event) and
``receive(stamp, *, now)``, ``now`` being the clock reading ``rt``. ``local(rt)`` is
an alias of ``send``. A process has no timer and no counters
beyond ``resets``/``message_resets``, so it has no ``handle_timer``.

``CausalProcess`` (⟨r, c, kn⟩, Fig. 1 + section 3.3)
    Local/send: ``c := max(0, r + c - rt)``; ``kn`` shifts by ``rt - r`` (entries that
    fall outside -ε..ε-1 are forgotten, new ones are 0); ``kn[0] += 1``; ``r := rt``.
    Receive: the same, with ``c`` also at least ``r.m + c.m - rt`` and each ``kn``
    entry the maximum of the two shifted arrays.

    Stabilization, section 3.3 step 2. A received timestamp is checked against Lemmas
    3.1, 3.2 and 3.4 *before* use; an illegitimate one is replaced by the reset value
    ``c = 0, kn = [.., 1 at offset 0, ..]`` (its ``r`` kept) and counted in
    ``message_resets``. The local state is checked right *after* each Fig. 1 update
    (so a reset shows on the timestamp of the event that caused it) and, if
    illegitimate, reset the same way and counted in ``resets``. The paper says "if c.j
    is ever assigned" a bad value; checking after every update is that, applied at the
    only places the protocol assigns. Choice: ``r`` is never reset -- it is the clock.

    With G1 and G2 a trace never resets: every receive has ``r.m + c.m < rt + ε``,
    so ``c < ε`` and Lemma 3.1 follow by the update rules, and Lemma 3.3 bounds every
    counter by the number of processes (``test_causal_replay.py`` pins this).

    The clock may go backwards here (a G1 violation is a fault the program must
    survive): the shift is then to the right and ``c`` grows, which the check resets.

``RCProcess`` (⟨r, c⟩, Fig. 3, literally)
    Local/send: ``c := 0`` if ``r + 2ε < rt`` else ``max(0, r + c - rt)``.
    Receive: ``c := 0`` if both ``r.m + 2ε < rt`` and ``r + 2ε < rt`` else
    ``max(0, r + c - rt, r.m + c.m - rt + 1)``. ``c`` is unbounded (Fig. 4).

``BoundedRCProcess`` (section 5.2)
    The application promises quiet windows: no event while the process's clock is in
    ``[α·x, α·x + 2ε]`` for any natural α (``QuietWindows``); an event inside one is a
    ``ProtocolUsageError``. Choice where the paper is silent: Fig. 3 resets only when
    *both* inputs of a receive are older than 2ε, so a stale large ``r + c`` would survive
    a window through a receive of a fresh message and ``c`` would not be bounded (the
    Fig. 4 loop across windows shows it). This variant drops each term whose ``r`` is
    older than 2ε instead -- ``c := max(0, r + c - rt if r + 2ε >= rt,
    r.m + c.m - rt + 1 if r.m + 2ε >= rt)`` -- which equals Fig. 3 in every other case
    and keeps Theorem 3.6: a dropped term's event e has ``r.e + ε < rt``, so ``less``
    decides by its first clause, and under G1 so does every event before e. After a
    window every term is stale, so ``c`` restarts from 0 each period
    (``test_causal_variants.py``).
"""

from __future__ import annotations

from timebound.core.causal._timestamp import RCTimestamp, Timestamp, check
from timebound.errors import ProtocolUsageError


def _shifted(kn: list[int] | tuple[int, ...], shift: int) -> list[int]:
    """``out[t] = kn[t + shift]`` over offsets -ε..ε-1, 0 where the source is outside."""
    size = len(kn)
    if shift >= size or -shift >= size:
        return [0] * size
    if shift >= 0:
        return list(kn[shift:]) + [0] * shift
    return [0] * (-shift) + list(kn[: size + shift])


class CausalProcess:
    """Fig. 1 with the stabilizing checks of section 3.3 (see module docstring)."""

    __slots__ = ("epsilon", "n", "r", "c", "kn", "resets", "message_resets")

    def __init__(self, epsilon: int, n: int | None = None) -> None:
        if epsilon < 1:
            raise ProtocolUsageError(f"epsilon must be >= 1, got {epsilon}")
        if n is not None and n < 1:
            raise ProtocolUsageError(f"n must be >= 1, got {n}")
        self.epsilon = epsilon
        #: Lemma 3.4's process bound; None: no bound (see ``check``).
        self.n = n
        self.r = 0
        self.c = 0
        self.kn: list[int] = [0] * (2 * epsilon)
        self.kn[epsilon] = 1
        #: times the local state was found illegitimate and reset
        self.resets = 0
        #: received timestamps found illegitimate and reset before use
        self.message_resets = 0

    @property
    def timestamp(self) -> Timestamp:
        """The timestamp of the last event (initially the virtual event at 0)."""
        return Timestamp(self.r, self.c, tuple(self.kn))

    def restore(self, r: int, c: int, kn: list[int] | tuple[int, ...]) -> None:
        """Overwrite the state, e.g. with a corrupted one (stabilization tests)."""
        if len(kn) != 2 * self.epsilon:
            raise ProtocolUsageError(f"kn must have {2 * self.epsilon} entries, got {len(kn)}")
        self.r, self.c, self.kn = r, c, list(kn)

    def local(self, rt: int) -> Timestamp:
        """A local event at clock ``rt``."""
        kn = _shifted(self.kn, rt - self.r)
        kn[self.epsilon] += 1
        return self._commit(rt, max(0, self.r + self.c - rt), kn)

    def send(self, *, now: int) -> Timestamp:
        """A send (or local) event at clock ``now``; ``local(now)`` is its old name."""
        return self.local(now)

    def receive(self, stamp: Timestamp, *, now: int) -> Timestamp:
        """A receive event at clock ``now`` of a message stamped ``stamp``."""
        rt = now
        eps = self.epsilon
        if len(stamp.kn) != 2 * eps:
            raise ProtocolUsageError(f"kn must have {2 * eps} entries, got {len(stamp.kn)}")
        m_c, m_kn = stamp.c, stamp.kn
        if not check(m_c, m_kn, self.n):
            self.message_resets += 1
            m_c = 0
            m_kn = tuple(1 if index == eps else 0 for index in range(2 * eps))
        mine = _shifted(self.kn, rt - self.r)
        theirs = _shifted(m_kn, rt - stamp.r)
        kn = [a if a >= b else b for a, b in zip(mine, theirs, strict=True)]
        kn = [value if value > 0 else 0 for value in kn]
        kn[eps] += 1
        return self._commit(rt, max(0, self.r + self.c - rt, stamp.r + m_c - rt), kn)

    def _commit(self, rt: int, c: int, kn: list[int]) -> Timestamp:
        if not check(c, kn, self.n):
            self.resets += 1
            c = 0
            kn = [0] * (2 * self.epsilon)
            kn[self.epsilon] = 1
        self.r, self.c, self.kn = rt, c, kn
        return Timestamp(rt, c, tuple(kn))


class RCProcess:
    """Fig. 3, literally: ⟨r, c⟩ with an unbounded ``c``."""

    __slots__ = ("epsilon", "r", "c")

    def __init__(self, epsilon: int) -> None:
        if epsilon < 1:
            raise ProtocolUsageError(f"epsilon must be >= 1, got {epsilon}")
        self.epsilon = epsilon
        self.r = 0
        self.c = 0

    @property
    def timestamp(self) -> RCTimestamp:
        return RCTimestamp(self.r, self.c)

    def restore(self, r: int, c: int) -> None:
        self.r, self.c = r, c

    def local(self, rt: int) -> RCTimestamp:
        if self.r + 2 * self.epsilon < rt:
            c = 0
        else:
            c = max(0, self.r + self.c - rt)
        self.r, self.c = rt, c
        return RCTimestamp(rt, c)

    def send(self, *, now: int) -> RCTimestamp:
        """A send (or local) event at clock ``now``; ``local(now)`` is its old name."""
        return self.local(now)

    def receive(self, stamp: RCTimestamp, *, now: int) -> RCTimestamp:
        rt = now
        two_eps = 2 * self.epsilon
        if stamp.r + two_eps < rt and self.r + two_eps < rt:
            c = 0
        else:
            c = max(0, self.r + self.c - rt, stamp.r + stamp.c - rt + 1)
        self.r, self.c = rt, c
        return RCTimestamp(rt, c)


class QuietWindows:
    """Section 5.2's application guarantee: no event with clock in [α·x, α·x + 2ε]."""

    __slots__ = ("epsilon", "period")

    def __init__(self, epsilon: int, period: int) -> None:
        if period <= 2 * epsilon + 1:
            raise ProtocolUsageError(
                f"period must exceed the 2*epsilon+1 ticks of a window, got {period}"
            )
        self.epsilon = epsilon
        self.period = period

    def quiet(self, rt: int) -> bool:
        return rt % self.period <= 2 * self.epsilon

    def next_open(self, rt: int) -> int:
        """The first clock value >= rt at which events are allowed."""
        phase = rt % self.period
        return rt + (2 * self.epsilon + 1 - phase) if phase <= 2 * self.epsilon else rt


class BoundedRCProcess:
    """Section 5.2: ⟨r, c⟩ with quiet windows and stale terms dropped (module doc)."""

    __slots__ = ("epsilon", "windows", "r", "c")

    def __init__(self, epsilon: int, period: int) -> None:
        self.windows = QuietWindows(epsilon, period)
        self.epsilon = epsilon
        self.r = 0
        self.c = 0

    @property
    def timestamp(self) -> RCTimestamp:
        return RCTimestamp(self.r, self.c)

    def _guard(self, rt: int) -> None:
        if self.windows.quiet(rt):
            raise ProtocolUsageError(f"event at {rt} inside a quiet window")

    def local(self, rt: int) -> RCTimestamp:
        self._guard(rt)
        c = max(0, self.r + self.c - rt) if self.r + 2 * self.epsilon >= rt else 0
        self.r, self.c = rt, c
        return RCTimestamp(rt, c)

    def send(self, *, now: int) -> RCTimestamp:
        """A send (or local) event at clock ``now``; ``local(now)`` is its old name."""
        return self.local(now)

    def receive(self, stamp: RCTimestamp, *, now: int) -> RCTimestamp:
        rt = now
        self._guard(rt)
        two_eps = 2 * self.epsilon
        c = 0
        if self.r + two_eps >= rt:
            c = max(c, self.r + self.c - rt)
        if stamp.r + two_eps >= rt:
            c = max(c, stamp.r + stamp.c - rt + 1)
        self.r, self.c = rt, c
        return RCTimestamp(rt, c)
