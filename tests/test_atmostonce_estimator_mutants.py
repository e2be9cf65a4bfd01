"""The adaptive estimators of Figs. 2 and 3, period by period, against the naive
reference's GC rule (``tests/atmostonce_reference.py``), on many long sequences of
periods: written for a mutant of ``scripts/mutate.py`` (the unlimited horizon charging
``numacc -= numrej`` instead of ``p * numrej``) that differs only once ``p`` has grown,
after two decreases -- further than the receiver-level comparison's traces reach."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.atmostonce_reference import Options, RefReceiver
from timebound.core.atmostonce import LimitedHorizon, UnlimitedHorizon, Verdict

VERDICTS = {"accepted": Verdict.ACCEPTED, "duplicate": Verdict.DUPLICATE,
            "stale": Verdict.STALE}
#: lifetimes that move the estimate both ways (a long one raises it, a period of
#: short ones lets it fall), verdicts mostly accepted (a decrease needs
#: numacc > p * numrej)
message = st.tuples(st.sampled_from([1, 2, 3, 5, 9, 17, 33, 65]),
                    st.sampled_from(["accepted", "accepted", "stale", "duplicate"]))


@given(periods=st.lists(st.lists(message, max_size=4), min_size=40, max_size=60))
def test_unlimited_horizon_equals_the_reference_period_by_period(
    periods: list[list[tuple[int, str]]]
) -> None:
    estimator = UnlimitedHorizon()
    ref = RefReceiver(Options(estimator="unlimited", gc_every=1))
    for t, period in enumerate(periods, start=1):
        for lifetime, verdict in period:
            estimator.observe(lifetime, VERDICTS[verdict])
            ref.lifetimes.append(lifetime)
            ref.numacc += verdict == "accepted"
            ref.numrej += verdict == "stale"
        estimator.update()
        ref.gc(t)
        assert (estimator.estimate, estimator.p) == (ref.est, ref.p), t


@given(window=st.integers(1, 6), data=st.data(),
       messages=st.lists(message, min_size=1, max_size=200))
def test_limited_horizon_equals_the_reference_window_by_window(
    window: int, data: st.DataObject, messages: list[tuple[int, str]]
) -> None:
    spikes = data.draw(st.integers(0, window - 1), label="H")
    p = data.draw(st.integers(1, 4), label="p")
    estimator = LimitedHorizon(window, spikes, p)
    ref = RefReceiver(Options(estimator="limited", window=window, spikes=spikes, p=p))
    for n, (lifetime, verdict) in enumerate(messages):
        if estimator.observe(lifetime, VERDICTS[verdict]):
            estimator.update()
        ref.lifetimes.append(lifetime)
        ref.numacc += verdict == "accepted"
        ref.numrej += verdict == "stale"
        if len(ref.lifetimes) == window:
            ref.gc(n)
        assert estimator.estimate == ref.est, n
