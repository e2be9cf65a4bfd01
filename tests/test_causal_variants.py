"""Fig. 4 (c unbounded for ⟨r, c⟩), section 5.2 (quiet windows bound it), hand-checked
Fig. 1 / Fig. 3 steps, the section 3.3 resets and the bounded wire form."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from timebound.core.causal import (
    BoundedRCProcess,
    CausalProcess,
    QuietWindows,
    RCProcess,
    RCTimestamp,
    Timestamp,
    WireCodec,
    decode_r,
    less,
    less_rc,
    min_modulus,
)
from timebound.errors import MalformedDatagram, ProtocolUsageError

# -- Fig. 4: three processes, c grows without bound under Fig. 3 ---------------------


def _fig4(eps: int, rounds: int, j, k, q, shift=lambda clocks: 0):  # type: ignore[no-untyped-def]
    """Run the loop j -> k -> l -> j of section 5.1; return l's c after each round.

    Round i: j sends at ε+2i; k receives at 2i+1, sends at 2i+2; l receives at 2i+1,
    sends at 2i+2; j receives at ε+2i+1. ``shift`` may push a round past a quiet
    window (same offset for all three clocks, so G1 is kept)."""
    cs, base = [], 0
    for i in range(rounds):
        clocks = [eps + 2 * i, 2 * i + 1, 2 * i + 2, 2 * i + 1, 2 * i + 2, eps + 2 * i + 1]
        base += shift([x + base for x in clocks])
        sj, rk, sk, rl, sl, rj = (x + base for x in clocks)
        m1 = j.send(now=sj)
        k.receive(m1, now=rk)
        m2 = k.send(now=sk)
        got = q.receive(m2, now=rl)  # q is the paper's l
        m3 = q.send(now=sl)
        j.receive(m3, now=rj)
        cs.append(got.c)
    return cs


@pytest.mark.parametrize("eps", [1, 2, 5])
def test_fig4_c_grows_without_bound_in_rc_variant(eps: int) -> None:
    j, k, q = RCProcess(eps), RCProcess(eps), RCProcess(eps)
    j.restore(0, 0)
    cs = _fig4(eps, 200, j, k, q)
    assert cs[:3] == [eps + 1, eps + 2, eps + 3]  # the paper's <1, ε+1>, then +1 a round
    assert cs == [eps + 1 + i for i in range(200)]


def test_fig4_first_round_matches_the_paper() -> None:
    eps = 3
    j, k, q = RCProcess(eps), RCProcess(eps), RCProcess(eps)
    m = j.send(now=eps)
    assert m == RCTimestamp(eps, 0)
    assert k.receive(m, now=1) == RCTimestamp(1, eps)
    m = k.send(now=2)
    assert m == RCTimestamp(2, eps - 1)
    assert q.receive(m, now=1) == RCTimestamp(1, eps + 1)
    m = q.send(now=2)
    assert m == RCTimestamp(2, eps)
    assert j.receive(m, now=eps + 1) == RCTimestamp(eps + 1, 2)
    assert j.send(now=eps + 2) == RCTimestamp(eps + 2, 1)


def _past_windows(windows: QuietWindows):  # type: ignore[no-untyped-def]
    def shift(clocks: list[int]) -> int:
        extra = 0
        while any(windows.quiet(x + extra) for x in clocks):
            extra += 1
        return extra
    return shift


@pytest.mark.parametrize(("eps", "period", "literal_grows"),
                         [(1, 20, True), (2, 40, True), (3, 30, False), (2, 200, True)])
def test_section_5_2_quiet_windows_bound_c(eps: int, period: int, literal_grows: bool) -> None:
    windows = QuietWindows(eps, period)
    procs = [BoundedRCProcess(eps, period) for _ in range(3)]
    cs = _fig4(eps, 1200, *procs, shift=_past_windows(windows))
    assert max(cs) <= period + 2 * eps  # proportional to the period, not to time
    assert max(cs[600:]) == max(cs[:600])  # and not growing with time
    # Fig. 3 literally, on the same schedule, keeps growing when a period holds more
    # rounds than a window takes back: a stale r + c survives a window through a
    # receive of a fresh message (see the _process docstring).
    literal = _fig4(eps, 1200, RCProcess(eps), RCProcess(eps), RCProcess(eps),
                    shift=_past_windows(windows))
    if literal_grows:
        assert literal[-1] > 1.5 * literal[600] > 2 * max(cs)


def test_quiet_window_events_are_refused() -> None:
    p = BoundedRCProcess(2, 10)
    assert QuietWindows(2, 10).next_open(20) == 25
    assert QuietWindows(2, 10).next_open(26) == 26
    with pytest.raises(ProtocolUsageError):
        p.local(24)
    p.local(25)
    with pytest.raises(ProtocolUsageError):
        QuietWindows(2, 5)


# -- Fig. 1 and the section 3.3 resets, by hand ---------------------------------------


def test_fig1_local_and_receive_by_hand() -> None:
    p, q = CausalProcess(2), CausalProcess(2)
    assert p.local(1) == Timestamp(1, 0, (0, 1, 1, 0))
    m = p.send(now=3)
    assert m == Timestamp(3, 0, (1, 0, 1, 0))
    # q at rt 2: c = 3 + 0 - 2 = 1; kn = max(own shifted by 2, m shifted by -1) + 1 at 0
    assert q.receive(m, now=2) == Timestamp(2, 1, (1, 1, 1, 1))
    assert less(m, q.timestamp)


def test_receive_from_the_far_future_resets_local_state() -> None:
    p = CausalProcess(2)
    future = Timestamp(10, 1, (0, 0, 1, 1))  # r.m + c.m = 11 >= rt + ε = 7
    assert p.receive(future, now=5) == Timestamp(5, 0, (0, 0, 1, 0))
    assert p.resets == 1 and p.message_resets == 0


@pytest.mark.parametrize(
    ("c", "kn"),
    [(2, (0, 0, 1, 1)),  # c >= ε (Lemma 3.2)
     (0, (0, 0, 0, 0)),  # kn[c] == 0 (Lemma 3.1)
     (0, (0, 0, 1, 1)),  # kn[t] != 0 for t > c (Lemma 3.1)
     (1, (0, 0, 1, 9)),  # kn > n (Lemma 3.4, n = 3)
     (-1, (0, 1, 1, 0)),  # negative c
     (0, (-1, 0, 1, 0))],  # negative count
)
def test_illegitimate_received_timestamp_is_reset_before_use(c: int, kn: tuple[int, ...]) -> None:
    p = CausalProcess(2, n=3)
    got = p.receive(Timestamp(4, c, kn), now=4)
    assert p.message_resets == 1 and p.resets == 0
    # the message now counts as ⟨4, 0, [0,0,1,0]⟩: it contributes kn[0] = 1 at rt 4
    assert got == Timestamp(4, 0, (0, 0, 2, 0))


def test_corrupted_local_state_is_reset_by_the_next_event() -> None:
    p = CausalProcess(2, n=3)
    p.restore(3, 5, [7, 7, 7, 7])
    assert p.local(4) == Timestamp(4, 0, (0, 0, 1, 0))
    assert p.resets == 1


def test_clock_going_backwards_is_survived() -> None:
    p = CausalProcess(2)
    p.local(10)
    got = p.local(6)  # c would be 4 >= ε: reset
    assert got == Timestamp(6, 0, (0, 0, 1, 0)) and p.resets == 1


def test_fig3_rc_by_hand() -> None:
    p = RCProcess(2)
    assert p.local(1) == RCTimestamp(1, 0)
    assert p.receive(RCTimestamp(3, 1), now=2) == RCTimestamp(2, 3)  # 3 + 1 - 2 + 1
    assert p.local(3) == RCTimestamp(3, 2)
    assert p.local(8) == RCTimestamp(8, 0)  # 3 + 2ε < 8: reset
    assert p.receive(RCTimestamp(1, 50), now=20) == RCTimestamp(20, 0)  # both old
    assert p.receive(RCTimestamp(1, 50), now=21) == RCTimestamp(21, 31)  # own is recent
    assert less_rc(RCTimestamp(1, 5), RCTimestamp(4, 0), 2)  # equal sums, r decides
    assert not less_rc(RCTimestamp(10, 0), RCTimestamp(1, 100), 2)  # beyond ε


# -- the bounded wire form ------------------------------------------------------------


@given(
    st.integers(1, 5), st.integers(0, 8), st.integers(1, 300), st.integers(-10**6, 10**6),
    st.data(),
)
def test_wire_round_trip_over_the_whole_recovery_window(
    eps: int, delta: int, n: int, r: int, data: st.DataObject
) -> None:
    codec = WireCodec(eps, delta, n)
    assert codec.modulus == min_modulus(eps, delta) == 6 * eps + delta + 1
    c = data.draw(st.integers(0, eps - 1))
    kn = tuple(data.draw(st.lists(st.integers(0, n), min_size=2 * eps, max_size=2 * eps)))
    stamp = Timestamp(r, c, kn)
    # any receiver clock that puts r in [now - 2ε - δ, now + 4ε - 1] decodes exactly
    now = data.draw(st.integers(r - 4 * eps + 1, r + 2 * eps + delta))
    assert codec.decode(codec.encode(stamp), now) == stamp
    assert decode_r(r % codec.modulus, now, eps, delta, codec.modulus) == r


def test_wire_modulus_below_theorem_3_7_is_refused() -> None:
    eps, delta = 2, 3
    with pytest.raises(ProtocolUsageError):
        WireCodec(eps, delta, 4, modulus=6 * eps + delta)
    assert WireCodec(eps, delta, 4, modulus=64).modulus == 64


def test_wire_size_and_bad_input() -> None:
    codec = WireCodec(2, 3, 1000)  # B = 16: 4 bits; c: 1 bit; kn: 4 x 10 bits
    assert codec.size == (4 + 1 + 40 + 7) // 8
    with pytest.raises(MalformedDatagram):
        codec.decode(b"\x00", 0)
    with pytest.raises(ProtocolUsageError):
        codec.encode(Timestamp(0, 2, (0, 0, 1, 0)))
    # corrupted bytes decode to some r inside the window, never a far value
    got = codec.decode(b"\xff" * codec.size, 500)
    assert 500 - 2 * 2 - 3 <= got.r < 500 - 7 + codec.modulus
