"""``less_rc`` (section 5.1) is a strict order on distinct ``(r, c)`` timestamps:
irreflexive and asymmetric, for every epsilon (written for a mutant of
``scripts/mutate.py`` -- a tiebreak ``e.r <= f.r`` -- that the execution-based
properties never reach, since two events of one execution never share ``r`` and
``c``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from timebound.core.causal import less_rc
from timebound.core.causal._timestamp import RCTimestamp

stamps = st.builds(RCTimestamp, st.integers(0, 60), st.integers(0, 60))


@given(e=stamps, f=stamps, epsilon=st.integers(0, 30))
def test_less_rc_is_irreflexive_and_asymmetric(e: RCTimestamp, f: RCTimestamp,
                                               epsilon: int) -> None:
    assert not less_rc(e, e, epsilon)
    assert not (less_rc(e, f, epsilon) and less_rc(f, e, epsilon)), (e, f)
    if (e.r, e.c) != (f.r, f.c) and abs(e.r - f.r) <= epsilon:
        # inside the epsilon band the order is total: exactly one way
        assert less_rc(e, f, epsilon) != less_rc(f, e, epsilon), (e, f)
