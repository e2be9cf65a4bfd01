"""Latency histograms of ``rpc serve``: one per procedure (handler
time) and one for the service (a call's start to its reply), measured by the driver
and exposed at ``--metrics-port`` beside the counters."""

from __future__ import annotations

import asyncio
import re
import urllib.request
from pathlib import Path

import pytest

from tests.ports import free_port
from tests.test_net_support import start_server, stop
from timebound.net import RemoteError, RpcClient, RpcServer
from timebound.net._handlers import LATENCY_BUCKETS, LatencyHistogram

SLEEP = 0.003  # the slow handler's least time, s: it never lands below 2.5 ms


def _samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """``{labels: value}`` of metric ``name`` in a text exposition."""
    found = {}
    for line in text.splitlines():
        match = re.fullmatch(rf"{name}(?:\{{(.*)\}})? (\S+)", line)
        if match:
            labels = tuple(sorted(re.findall(r'(\w+)="([^"]*)"', match.group(1) or "")))
            found[labels] = float(match.group(2))
    return found


def _histogram(text: str, name: str, **labels: str) -> tuple[list[tuple[str, float]], float,
                                                             float]:
    """``([(le, cumulative count)], count, sum)`` of one series."""
    want = tuple(sorted(labels.items()))
    buckets = []
    for key, value in _samples(text, name + "_bucket").items():
        le = dict(key).pop("le")
        if tuple(sorted((k, v) for k, v in key if k != "le")) == want:
            buckets.append((le, value))
    buckets.sort(key=lambda b: float(b[0]))
    return buckets, _samples(text, name + "_count")[want], _samples(text, name + "_sum")[want]


def test_histograms_after_calls_over_loopback_scraped_from_the_metrics_port(
        tmp_path: Path) -> None:
    (tmp_path / "h6timed.py").write_text(
        "import time\n"
        "def echo(payload: bytes) -> bytes:\n    return payload\n"
        f"def slow(payload: bytes) -> bytes:\n    time.sleep({SLEEP})\n    return b'ok'\n"
        "app = {'echo': echo, 'slow': slow, 'idle': echo}\n")
    metrics = free_port()
    proc, (host, port) = start_server(
        ["h6timed:app", "--storage", str(tmp_path / "l.json"), "--metrics-port",
         str(metrics)], env={"PYTHONPATH": str(tmp_path)})
    try:
        async def calls() -> None:
            async with RpcClient((host, port)) as client:
                for i in range(7):
                    assert await client.call("echo", b"%d" % i, timeout=5.0) == b"%d" % i
                for _ in range(3):
                    assert await client.call("slow", timeout=5.0) == b"ok"
                with pytest.raises(RemoteError):
                    await client.call("missing", timeout=5.0)

        asyncio.run(calls())
        text = urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics",
                                      timeout=5).read().decode()
    finally:
        stop(proc)
    assert "timebound_rpc_executions_total" in text  # the counters are still there
    assert "# TYPE timebound_rpc_procedure_seconds histogram" in text
    assert "# TYPE timebound_rpc_call_seconds histogram" in text
    bounds = [repr(b) for b in LATENCY_BUCKETS] + ["+Inf"]
    for proc_name, n in (("echo", 7), ("slow", 3), ("idle", 0)):
        buckets, count, total = _histogram(text, "timebound_rpc_procedure_seconds",
                                           procedure=proc_name)
        assert [le for le, _ in buckets] == bounds
        values = [v for _, v in buckets]
        assert values == sorted(values) and values[-1] == count == n, (proc_name, buckets)
        if proc_name == "slow":
            assert dict(buckets)["0.0025"] == 0 and total >= n * SLEEP
    assert "missing" not in text  # no series per unknown name a caller makes up
    buckets, count, _ = _histogram(text, "timebound_rpc_call_seconds")
    assert count == buckets[-1][1] == 11  # every call run, the unknown procedure's too
    assert dict(buckets)["0.0025"] <= 8  # the three slow ones took longer


@pytest.mark.parametrize("workers", [0, 2])
def test_every_path_is_timed_inline_worker_async_and_failing(workers: int) -> None:
    async def later(payload: bytes) -> bytes:
        await asyncio.sleep(SLEEP)
        return b"later"

    def boom(payload: bytes) -> bytes:
        raise ValueError("no")

    def text(payload: bytes) -> str:
        return "not bytes"

    handlers = {"echo": lambda p: p, "later": later, "boom": boom, "text": text}

    async def scenario() -> RpcServer:
        server = RpcServer(handlers, workers=workers)
        async with server:
            async with RpcClient(server.address) as client:
                assert await client.call("echo", b"a", timeout=5.0) == b"a"
                assert await client.call("echo", b"b", timeout=5.0) == b"b"
                assert await client.call("later", timeout=5.0) == b"later"
                for name in ("boom", "text"):
                    with pytest.raises(RemoteError):
                        await client.call(name, timeout=5.0)
        return server

    server = asyncio.run(scenario())
    call, procedures = server.latency()
    counts = {name: sum(snapshot[1]) for name, snapshot in procedures.items()}
    assert counts == {"echo": 2, "later": 1, "boom": 1, "text": 1}
    assert sum(call[1]) == 5
    later_bounds, later_counts, later_sum = procedures["later"]
    assert later_sum >= SLEEP and sum(later_counts[:later_bounds.index(0.0025) + 1]) == 0


def test_latency_histogram_buckets_are_upper_bounds() -> None:
    histogram = LatencyHistogram((0.001, 0.01))
    for elapsed in (0.0005, 0.001, 0.002, 0.01, 5.0):
        histogram.observe(elapsed)
    bounds, counts, total = histogram.snapshot()
    assert (bounds, counts) == ((0.001, 0.01), [2, 2, 1])  # le: a bound is its bucket's
    assert total == pytest.approx(5.0135)
