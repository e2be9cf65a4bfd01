"""Simulator machinery: engine order, clocks, link fault models, transport, CLI."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from timebound.cli import main
from timebound.errors import UsageError
from timebound.sim import Clock, Engine, Link, Packet, Reliable, parse_delay
from timebound.sim._links import Constant, Empirical, Exponential, LogNormal


def test_engine_orders_by_time_priority_then_sequence() -> None:
    engine = Engine()
    seen: list[str] = []
    engine.at(5, seen.append, "b", priority=1)
    engine.at(5, seen.append, "c", priority=1)
    engine.at(5, seen.append, "a", priority=0)
    engine.at(2, seen.append, "first")
    assert engine.peek() == 2
    engine.step()
    assert engine.now == 2 and seen == ["first"]
    engine.run(until=5)
    assert seen == ["first"] and engine.now == 5
    engine.run()
    assert seen == ["first", "a", "b", "c"]
    assert engine.peek() is None and engine.events == 4
    with pytest.raises(ValueError):
        engine.at(1, seen.append, "past")


def test_engine_schedule_relative_and_chained() -> None:
    engine = Engine()
    times: list[int] = []

    def tick(n: int) -> None:
        times.append(engine.now)
        if n:
            engine.schedule(10, tick, n - 1)

    engine.schedule(3, tick, 3)
    engine.run()
    assert times == [3, 13, 23, 33]


def test_clock_offset_drift_resync_steps() -> None:
    assert Clock().read(1234) == 1234
    assert Clock(offset=-50).read(100) == 50
    drifting = Clock(drift_ppm=100.0)
    assert drifting.read(1_000_000) == 1_000_100
    stepped = Clock(steps=[(100, 40), (200, -70)])
    assert [stepped.read(t) for t in (99, 100, 199, 200)] == [99, 140, 239, 170]
    # resynchronisation: error within epsilon/2, drift cancelled at each sync
    clock = Clock(drift_ppm=500.0, resync=10_000, epsilon=1_000, seed=7)
    for t in range(0, 200_000, 997):
        since = t % 10_000
        err = clock.read(t) - t - int(500.0 * since / 1_000_000)
        assert -500 <= err <= 500
    # reading is a pure function of t (re-reading an older time gives the same value)
    assert clock.read(12_345) == Clock(drift_ppm=500.0, resync=10_000, epsilon=1_000,
                                       seed=7).read(12_345)


def test_monotonic_guard() -> None:
    clock = Clock(steps=[(100, -50)])
    assert clock.monotonic(99) == 99
    assert clock.monotonic(100) == 99  # raw 50: held at the previous reading
    assert clock.monotonic(160) == 110
    strict = Clock(steps=[(100, -50)])
    assert [strict.monotonic(t, strict=True) for t in (60, 60, 100)] == [60, 61, 62]


def _run_link(**kw: object) -> tuple[Link, list[int]]:
    engine = Engine()
    link = Link(engine, random.Random(1), kw.pop("delay", Constant(10)), **kw)  # type: ignore[arg-type]
    arrivals: list[int] = []
    for i in range(20_000):
        engine.at(i * 100, lambda _: link.send(lambda x: arrivals.append(engine.now - x), engine.now))
    engine.run()
    return link, arrivals


def test_link_loss_rate() -> None:
    link, arrivals = _run_link(loss=0.1)
    rate = 1 - len(arrivals) / 20_000
    assert abs(rate - 0.1) < 4 * math.sqrt(0.1 * 0.9 / 20_000)
    assert link.lost == 20_000 - len(arrivals)


def test_link_duplication_rate() -> None:
    link, arrivals = _run_link(duplicate=0.05)
    extra = len(arrivals) - 20_000
    assert abs(extra / 20_000 - 0.05) < 4 * math.sqrt(0.05 * 0.95 / 20_000)


def test_link_reordering_and_partition() -> None:
    engine = Engine()
    link = Link(engine, random.Random(2), Constant(10), reorder=0.2, reorder_extra=500,
                partitions=[(1000, 2000)])
    order: list[int] = []
    for i in range(100):
        engine.at(i * 20, lambda _, i=i: link.send(order.append, i))
    engine.run()
    assert all(not 50 <= i < 100 for i in order)  # sent during [1000, 2000): cut
    assert link.cut == 50
    assert order != sorted(order)  # some overtaking


@pytest.mark.parametrize("delay", [Exponential(500.0), Exponential(200.0, 100),
                                   LogNormal(300.0, 0.5), Empirical([5, 10, 100])])
def test_delay_distributions_mean(delay) -> None:
    rng = random.Random(3)
    samples = [delay.sample(rng) for _ in range(40_000)]
    assert min(samples) >= 0
    mean = statistics.fmean(samples)
    sd = statistics.pstdev(samples)
    assert abs(mean - delay.mean()) < 5 * sd / math.sqrt(len(samples)) + 1


def test_exponential_quantile_matches_samples() -> None:
    delay = Exponential(1000.0, 50)
    rng = random.Random(4)
    samples = sorted(delay.sample(rng) for _ in range(50_000))
    assert abs(samples[int(0.9 * len(samples))] - delay.quantile(0.9)) < 60


def test_parse_delay() -> None:
    assert isinstance(parse_delay("constant:5"), Constant)
    assert parse_delay("exponential:25000").mean() == pytest.approx(24999.5)
    assert isinstance(parse_delay("lognormal:100:0.3:5"), LogNormal)
    assert parse_delay("empirical:1,2,3").quantile(1.0) == 3
    for bad in ("normal:3", "constant:-1", "exponential:x", "empirical:"):
        with pytest.raises(UsageError, match="--set delay"):
            parse_delay(bad)


def test_reliable_transport_retransmits_until_acked() -> None:
    engine = Engine()
    fwd = Link(engine, random.Random(5), Constant(30), loss=0.5)
    back = Link(engine, random.Random(6), Constant(30), loss=0.5)
    transport = Reliable(engine, timeout=100, max_retries=None)
    packets = []
    for i in range(300):
        packet = Packet(i, fwd, back, lambda p: True)
        packets.append(packet)
        engine.at(i, lambda _, p=packet: transport.send(p))
    engine.run()
    assert all(p.acked for p in packets)
    assert all(p.arrivals >= 1 for p in packets)
    assert transport.retransmissions > 0


def test_reliable_transport_gives_up_and_down_receiver_not_acked() -> None:
    engine = Engine()
    fwd = Link(engine, random.Random(5), Constant(30))
    back = Link(engine, random.Random(6), Constant(30))
    transport = Reliable(engine, timeout=100, max_retries=3)
    packet = Packet("x", fwd, back, lambda p: False)  # receiver down: never acks
    transport.send(packet)
    engine.run()
    assert packet.attempts == 4 and packet.arrivals == 4 and not packet.acked
    assert transport.gave_up == 1 and transport.rt(3) == 300


def test_cli_list_and_bad_parameters(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    assert main(["simulate", "--list"]) == 0
    listed = capsys.readouterr().out
    for name in ("scmp", "adaptive", "slotted", "stability", "merge"):
        assert f"{name}:" in listed
    out = tmp_path / "ds"
    assert main(["simulate", "scmp", "--out", str(out), "--set", "loss=2"]) == 2
    err = capsys.readouterr().err
    assert "--set loss" in err and "[0, 0.9]" in err
    assert main(["simulate", "scmp", "--out", str(out), "--set", "nope=1"]) == 2
    assert main(["simulate", "nosuch", "--out", str(out)]) == 2
    assert main(["simulate", "scmp", "--out", str(out), "--set", "clients"]) == 2
    assert not out.exists()
    assert not any(p.name.startswith(".ds.tmp") for p in tmp_path.iterdir())
