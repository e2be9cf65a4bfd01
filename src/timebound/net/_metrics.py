"""Prometheus text exposition of a server's counters and latency (``--metrics-port``).

A custom collector reads ``RpcServer.statistics()`` and ``RpcServer.latency()`` at
scrape time (plain integer reads and list copies; the server's loop never waits for
the scraper's thread). The histograms are the driver's (``timebound.net._handlers``):

- ``timebound_rpc_procedure_seconds{procedure="NAME"}``: a handler's execution time,
  one series per served procedure;
- ``timebound_rpc_call_seconds``: every call the server runs, from its start (the core
  accepted its CALL and the server handed it to its handler or worker pool) to its
  reply handed to the socket.
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

#: ``(bucket upper bounds in seconds, per-bucket counts with +Inf last, sum)``.
Snapshot = tuple[tuple[float, ...], list[int], float]
#: ``RpcServer.latency``: the service's histogram and one per procedure.
LatencyReader = Callable[[], tuple[Snapshot, Mapping[str, Snapshot]]]

CALL_HELP = ("at-most-once RPC: seconds from a call's start (its CALL accepted, handed "
             "to the handler or the worker pool) to its reply handed to the socket, "
             "every call run")
PROCEDURE_HELP = ("at-most-once RPC: a handler's execution time in seconds, per "
                  "procedure (async handlers: until their awaitable completes)")


def buckets(snapshot: Snapshot) -> list[tuple[str, float]]:
    """Prometheus' cumulative ``(le, count)`` pairs of ``snapshot``, +Inf last."""
    bounds, counts, _total = snapshot
    cumulative: list[tuple[str, float]] = []
    running = 0
    for bound, count in zip((*[repr(b) for b in bounds], "+Inf"), counts, strict=True):
        running += count
        cumulative.append((bound, running))
    return cumulative


class _Collector:
    def __init__(self, read: Callable[[], Mapping[str, int | None]],
                 latency: LatencyReader | None = None) -> None:
        self.read = read
        self.latency = latency

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        for name, value in self.read().items():
            if value is None or name in NOT_METRICS:
                continue
            if name in COUNTERS:
                yield CounterMetricFamily(PREFIX + name, f"at-most-once RPC: {name}",
                                          value=value)
            else:
                yield GaugeMetricFamily(PREFIX + name, f"at-most-once RPC: {name}",
                                        value=value)
        if self.latency is None:
            return
        call, procedures = self.latency()
        service = HistogramMetricFamily(PREFIX + "call_seconds", CALL_HELP)
        service.add_metric([], buckets(call), call[2])
        yield service
        family = HistogramMetricFamily(PREFIX + "procedure_seconds", PROCEDURE_HELP,
                                       labels=["procedure"])
        for name in sorted(procedures):
            snapshot = procedures[name]
            family.add_metric([name], buckets(snapshot), snapshot[2])
        yield family


def exposition(read: Callable[[], Mapping[str, int | None]],
               latency: LatencyReader | None = None) -> bytes:
    """The text exposition of ``read()`` and ``latency()`` (for tests and one-off
    dumps)."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry()
    registry.register(_Collector(read, latency))
    return bytes(generate_latest(registry))


def serve_metrics(read: Callable[[], Mapping[str, int | None]], host: str,
                  port: int, latency: LatencyReader | None = None) -> Callable[[], None]:
    """Serve ``/metrics`` on ``host:port`` in a thread; returns its stop function."""
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry()
    registry.register(_Collector(read, latency))
    server, thread = start_http_server(port, addr=host, registry=registry)

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=2.0)

    return stop
