"""Prometheus text exposition of a server's counters (``--metrics-port``).

A custom collector reads ``RpcServer.statistics()`` at scrape time (plain integer
reads; the server's loop never waits for the scraper's thread).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

#: Counters (monotonic) among the statistics; every other number is a gauge.
COUNTERS = frozenset({
    "calls", "executions", "duplicates", "stale", "early", "down", "overloaded", "acks",
    "replies", "replies_retransmitted", "reply_acks", "malformed", "unauthenticated",
    "late_completions", "socket_errors", "handler_errors", "storage_errors", "expired",
    "challenges", "validations", "bad_tokens", "readonly", "marked",
})
#: Statistics that are not numbers to plot (an id: a float64 would round it).
NOT_METRICS = frozenset({"incarnation"})
PREFIX = "timebound_rpc_"


class _Collector:
    def __init__(self, read: Callable[[], Mapping[str, int | None]]) -> None:
        self.read = read

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        for name, value in self.read().items():
            if value is None or name in NOT_METRICS:
                continue
            if name in COUNTERS:
                yield CounterMetricFamily(PREFIX + name, f"at-most-once RPC: {name}",
                                          value=value)
            else:
                yield GaugeMetricFamily(PREFIX + name, f"at-most-once RPC: {name}",
                                        value=value)


def exposition(read: Callable[[], Mapping[str, int | None]]) -> bytes:
    """The text exposition of ``read()`` (for tests and one-off dumps)."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry()
    registry.register(_Collector(read))
    return bytes(generate_latest(registry))


def serve_metrics(read: Callable[[], Mapping[str, int | None]], host: str,
                  port: int) -> Callable[[], None]:
    """Serve ``/metrics`` on ``host:port`` in a thread; returns its stop function."""
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry()
    registry.register(_Collector(read))
    server, thread = start_http_server(port, addr=host, registry=registry)

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=2.0)

    return stop
