"""The pub-sub cores (``timebound.core.pubsub``) without sockets: replicated mergers
fed the same publications in different arrival orders give subscribers the same
order and digest (Theorem 4.4); a causal reply is ordered after its cause (Theorem
4.5); a copy delayed beyond the decoding window is dropped, never misplaced;
truncated frames are counted and dropped."""

from __future__ import annotations

import random

from timebound.core.pubsub import MergerNode, Publisher, Subscriber
from timebound.core.wire import FrameCodec

EPS, DELTA = 5, 40


def run_merger(frames: list[tuple[int, bytes]], seed: int) -> tuple[list[tuple[str, int]], str]:
    rng = random.Random(seed)
    arrivals = sorted((t + rng.randint(0, DELTA), n, f) for n, (t, f) in enumerate(frames))
    merger: MergerNode[str] = MergerNode("m", EPS, DELTA, 8, FrameCodec())
    sub = Subscriber("s", FrameCodec(), now=0)
    merger.receive(sub.subscription(), "s", now=0)
    out: list[tuple[str, int]] = []

    def feed(sends: tuple[tuple[str, bytes], ...], now: int) -> None:
        for _, frame in sends:
            out.extend((d.proc, d.msg) for d in sub.receive(frame, now=now).delivered)

    for t, _, frame in arrivals:
        feed(merger.handle_timer(now=t - 1).sends, t - 1)
        feed(merger.receive(frame, "p", now=t).sends, t)
        merger.receive(sub.subscription(), "s", now=t)  # lease renewal
    feed(merger.handle_timer(now=arrivals[-1][0] + 10 * DELTA).sends, arrivals[-1][0])
    return out, sub.digest


def publications() -> list[tuple[int, bytes]]:
    pubs = [Publisher(f"p{i}", EPS, DELTA, 8, FrameCodec()) for i in range(3)]
    frames = []
    t = 1000
    rng = random.Random(1)
    last_stamp = None
    for i in range(200):
        t += rng.randint(0, 3)
        p = pubs[i % 3]
        if p.name == "p2" and last_stamp is not None:
            p.observe(last_stamp, now=t)  # p2 replies to what p0 published
        _, stamp, frame = p.publish(b"%d" % i, now=t)
        if p.name == "p0":
            last_stamp = stamp
        frames.append((t, frame))
    return frames


def test_replicas_agree_on_order_and_digest_whatever_the_arrival_order() -> None:
    frames = publications()
    first, digest = run_merger(frames, 1)
    assert len(first) == 200
    for seed in (2, 3):
        again, d = run_merger(frames, seed)
        assert again == first and d == digest
    for proc in ("p0", "p1", "p2"):
        mine = [m for p, m in first if p == proc]
        assert mine == sorted(mine)


def test_copy_delayed_beyond_the_window_is_dropped_not_misplaced() -> None:
    pub = Publisher("p", EPS, DELTA, 8, FrameCodec())
    _, _, frame = pub.publish(b"x", now=1000)
    merger: MergerNode[str] = MergerNode("m", EPS, DELTA, 8, FrameCodec())
    for delay in (2 * EPS + DELTA + 5, 300, 900):
        merger.receive(frame, "p", now=1000 + delay)
    stats = merger.statistics()
    assert stats.late == 3 and stats.buffered == 0 and stats.early == 0
    _, _, ahead = pub.publish(b"y", now=1100)
    merger.receive(ahead, "p", now=1100 - EPS - 1)  # a clock more than ε ahead
    assert merger.statistics().early == 1


def test_truncated_frames_are_dropped_and_counted() -> None:
    pub = Publisher("p", EPS, DELTA, 8, FrameCodec())
    _, _, frame = pub.publish(b"payload", now=1000)
    merger: MergerNode[str] = MergerNode("m", EPS, DELTA, 8, FrameCodec())
    cuts = len(frame) - len(b"payload")
    for cut in range(cuts):
        merger.receive(frame[:cut], "p", now=1001)
    assert merger.statistics().malformed == cuts and merger.statistics().received == 0
    merger.receive(frame, "p", now=1001)
    assert merger.statistics().buffered == 1
