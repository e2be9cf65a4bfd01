"""Live checks on the group service (``timebound.net.live group``): see ``_live``.

The job ``live-group`` runs live ``timebound.net`` group members on loopback UDP, with
timestamp acks and with vector acks on the same traffic, at N = 2, 4, 8 members (2, 4
with ``--quick``); runs ``N=<n>/timestamp`` and ``N=<n>/vector`` as the simulated
``stability`` job names them, with the same measures where they mean the same thing
(``ack_wire_bytes_per_s``: the encoded acks, each multicast ack once;
``latency_mean``: µs), so the two stability rows are measured and checked here with the
simulated rows' own functions. The latency row also shows what explains it: the p99,
the timestamp acks' extra latency in ack periods, and the one-way delivery delay.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ._base import Live, Missing, Runs, Sources, Values, _get, _num, spread
from ._stability import FLAT, PER_SENDER, _st_bandwidth, _st_bandwidth_ok, _st_latency_ok

JOB = "live-group"

#: label of this service's live job (a ``Sources`` key) -> the ``timebound.net.live`` kind
JOBS: Mapping[str, str] = {JOB: "group"}

_WHERE = ("live: N members of one timebound.net group (every member sends and receives) "
          "on 127.0.0.1 in one process, N = 2, 4, 8 (2, 4 with --quick), timestamp acks and vector acks on the "
          "same traffic (messages from members drawn per seed, the service's own ack "
          "period, the Group default); ")


def _sizes(s: Sources) -> list[int]:
    runs = s[JOB]
    out = sorted({int(_num(k.split("/")[0], "N")) for k in runs if k.startswith("N=")})
    if not out:
        raise Missing(f"{JOB} N=*")
    return out


def _ack_period_ms(runs: Runs) -> float:
    """The members' ack period (ms): the time the live rows check."""
    return min(v["ack_every"] for k, v in runs.items() if "ack_every" in v) / 1000


def _bandwidth(s: Sources) -> Values:
    """The simulated row's measure on the live runs."""
    return _st_bandwidth({"stability": s[JOB]})


def _latency(s: Sources) -> Values:
    """Per N: the mean stability latency with timestamp and vector acks (ms, the
    values the check reads), their p99, the timestamp acks' extra mean latency in ack
    periods, and the one-way delivery delay (ms)."""
    runs = s[JOB]
    out: Values = []
    for n in _sizes(s):
        ts, vec = f"N={n}/timestamp", f"N={n}/vector"
        t_mean, v_mean = _get(runs, ts, "latency_mean"), _get(runs, vec, "latency_mean")
        period = _get(runs, ts, "ack_every")
        out.append((f"N={n} timestamp", t_mean / 1000, ".1f"))
        out.append((f"N={n} vector", v_mean / 1000, ".1f"))
        out.append((f"N={n} timestamp p99", _get(runs, ts, "latency_p99") / 1000, ".1f"))
        out.append((f"N={n} vector p99", _get(runs, vec, "latency_p99") / 1000, ".1f"))
        out.append((f"N={n} timestamp - vector, ack periods", (t_mean - v_mean) / period,
                    ".2f"))
        out.append((f"N={n} ack period", period / 1000, ".0f"))
        out.append((f"N={n} delivery", _get(runs, ts, "delivery_mean") / 1000, ".2f"))
    return out


def _latency_why(seeds: Sequence[Sources]) -> str:
    """Why the live latency row differs, from the live runs of every seed: the one-way
    delivery delay against the ack period, and the timestamp acks' extra latency in
    ack periods (no figure is written here)."""
    try:
        per = [{label: value for label, value, _ in _latency(s)} for s in seeds]
    except (Missing, KeyError) as exc:
        return f"timestamp acks made messages stable later than the check allows ({exc})"

    def over(suffix: str, fmt: str) -> str:
        return spread([v for p in per for k, v in p.items() if k.endswith(suffix)], fmt)

    ratio = spread([p[k] / max(p[k.replace(" timestamp", " vector")], 1e-9)
                    for p in per for k in p if k.endswith(" timestamp")], ".2f")
    return (f"timestamp acks took {ratio}x the vector acks' mean latency; on loopback the "
            f"delivery delay ({over(' delivery', '.2f')} ms) is a small part of the ack "
            f"period ({over(' ack period', '.0f')} ms), so the latency is made of ack "
            "periods: a timestamp ack rises only once every member's next message or "
            "heartbeat has arrived, which adds "
            f"{over(' timestamp - vector, ack periods', '.2f')} ack periods to the vector "
            "acks' latency here; the simulated row's network delay is several of its ack "
            "periods, which makes that extra wait slight there")


#: claim text of a row -> its live check on this service
LIVE: Mapping[str, Live] = {
    "ack bandwidth: timestamp O(N_r), vector O(N_r N_s)": Live(
        JOB, _bandwidth, _st_bandwidth_ok,
        _WHERE + "every heartbeat a member sends is decoded at its socket and its ack "
        "counted once per multicast with the bytes of its encoding (len(encode_ack(ack)), "
        "as the simulated row counts), per second of the run; checked as the simulated "
        f"row: timestamp bytes per receiver within {FLAT:g}x over N and vector over "
        f"timestamp within [{PER_SENDER[0]:g}, {PER_SENDER[1]:g}] x N_s. It differs if "
        "the live timestamp ack grows with the members, the vector ack leaves members out "
        "or grows faster than its entries, or the members' ack rate changes with N",
        "the acks the live members sent do not scale as O(N_r) and O(N_r N_s) (or their "
        "ack rate changed with N: the heartbeat timer ran late)",
        checks_ms=_ack_period_ms, checks="ack period"),
    "timestamp latency only slightly larger than vector": Live(
        JOB, _latency, _st_latency_ok,
        _WHERE + "stability latency from send to the sender's Stable event, mean and "
        "p99 (ms, wall clock: it includes this machine's scheduling); checked as the "
        "simulated row on the means: vector <= timestamp <= 1.5x vector at every N. It "
        "differs if timestamp acks make messages stable later than that",
        _latency_why, checks_ms=_ack_period_ms, checks="ack period"),
}

#: claim text of a row this service could check live but does not -> why
NO_LIVE: Mapping[str, str] = {}
