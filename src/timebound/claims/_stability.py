"""Message stability: Berket, Koch, Moser and Melliar-Smith, "Timestamp
Acknowledgments for Determining Message Stability": the rows on Fig. 2 (vector and
timestamp acks), section 4 (inequalities (1), (2); the buffer against the stability
latency; ack bandwidth and latency of timestamp against vector acks) and section 5
(logical clocks, Fig. 3; clock skew).

Source: the ``stability`` job, runs ``fig2/*`` and ``N=*/*``.
"""

from __future__ import annotations

import math

from ._base import Claim, Missing, Runs, Sources, Values, _get, _num


def _sizes(runs: Runs) -> list[int]:
    out = sorted({int(_num(k.split("/")[0], "N")) for k in runs if k.startswith("N=")})
    if not out:
        raise Missing("stability N=*")
    return out


def _st_fig2v(s: Sources) -> Values:
    runs = s["stability"]
    return [("s1", _get(runs, "fig2/vector", "latency_max_s1"), ".0f"),
            ("s2", _get(runs, "fig2/vector", "latency_max_s2"), ".0f")]


def _st_fig2t(s: Sources) -> Values:
    return [("s1", _get(s["stability"], "fig2/timestamp", "latency_max_s1"), ".0f")]


def _st_t1t2(s: Sources) -> Values:
    runs = s["stability"]
    out: Values = []
    for node in ("s1", "s2"):
        out.append((f"t1 {node}", _get(runs, "fig2/vector", f"latency_max_{node}"), ".0f"))
        out.append((f"t2 {node}", _get(runs, "fig2/timestamp", f"latency_max_{node}"), ".0f"))
    out.append(("t_send", 1.0, ".0f"))
    return out


def _st_t1t2_ok(v: dict[str, float]) -> bool:
    top = max(v["t1 s1"], v["t1 s2"])
    return all(v[f"t1 {n}"] <= v[f"t2 {n}"] <= top + v["t_send"] for n in ("s1", "s2"))


def _st_bandwidth(s: Sources) -> Values:
    runs = s["stability"]
    return [(f"N={n}", _get(runs, f"N={n}/vector", "ack_bytes_per_s")
             / _get(runs, f"N={n}/timestamp", "ack_bytes_per_s"), ".1f")
            for n in _sizes(runs)]


def _st_latency(s: Sources) -> Values:
    runs = s["stability"]
    out: Values = []
    for n in _sizes(runs):
        out.append((f"N={n} timestamp", _get(runs, f"N={n}/timestamp", "latency_mean") / 1000,
                    ".1f"))
        out.append((f"N={n} vector", _get(runs, f"N={n}/vector", "latency_mean") / 1000, ".1f"))
    return out


def _st_latency_ok(v: dict[str, float]) -> bool:
    ns = {k.split()[0] for k in v}
    return all(v[f"{n} vector"] <= v[f"{n} timestamp"] <= 1.5 * v[f"{n} vector"] for n in ns)


def _st_lamport(s: Sources) -> Values:
    runs = s["stability"]
    out: Values = []
    for n in _sizes(runs):
        out.append((f"N={n} physical", _get(runs, f"N={n}/timestamp-uneven", "latency_mean")
                    / 1000, ".1f"))
        out.append((f"N={n} logical", _get(runs, f"N={n}/timestamp-logical-uneven",
                                           "latency_mean") / 1000, ".1f"))
    return out


def _st_lamport_ok(v: dict[str, float]) -> bool:
    ns = {k.split()[0] for k in v}
    return all(v[f"{n} logical"] > 1.2 * v[f"{n} physical"] for n in ns)


def _st_skew(s: Sources) -> Values:
    runs = s["stability"]
    out: Values = []
    for n in _sizes(runs):
        for stat in ("mean", "max"):
            base = _get(runs, f"N={n}/timestamp", f"latency_{stat}") / 1000
            skew = _get(runs, f"N={n}/timestamp-skewed", f"latency_{stat}") / 1000
            out.append((f"N={n} {stat} synchronized", base, ".1f"))
            out.append((f"N={n} {stat} skewed", skew, ".1f"))
            out.append((f"N={n} {stat} +", skew - base, ".1f"))
        out.append((f"N={n} offset spread ms", _get(runs, f"N={n}/timestamp-skewed",
                                                    "offset_spread") / 1000, ".1f"))
    return out


def _st_skew_ok(v: dict[str, float]) -> bool:
    """The mean latency grows (by about the mean offset above the slowest clock); the
    maximum is one sample of the delay tail and is shown, not checked."""
    return all(x > 0 for k, x in v.items() if k.endswith(" mean +"))


def _st_buffer(s: Sources) -> Values:
    runs = s["stability"]
    out: Values = []
    for n in _sizes(runs):
        run = f"N={n}/timestamp"
        period = _get(runs, run, "t_send") if "t_send" in runs.get(run, {}) else 1000.0
        out.append((f"N={n} mean buffer / (mean latency / t_send)",
                    _get(runs, run, "buffer_mean") / (_get(runs, run, "latency_mean") / period),
                    ".2f"))
        out.append((f"N={n} max buffer - max latency / t_send",
                    _get(runs, run, "buffer_max") - math.floor(_get(runs, run, "latency_max")
                                                               / period), ".0f"))
    return out


def _st_buffer_ok(v: dict[str, float]) -> bool:
    return all((0.85 <= x <= 1.1) if "mean" in k else x >= 0 for k, x in v.items())



CLAIMS: tuple[Claim, ...] = (
    Claim("stability", "Fig. 2, vector acks: stable within 7 at s1, 14 at s2", "7, 14",
          "stability, run fig2/vector (deterministic network)", ("stability",), _st_fig2v,
          lambda v: v["s1"] <= 7 and v["s2"] <= 14),
    Claim("stability", "Fig. 2, timestamp acks: stable within 11 at s1", "11",
          "stability, run fig2/timestamp", ("stability",), _st_fig2t,
          lambda v: v["s1"] <= 11),
    Claim("stability", "t1 <= t2 <= max t1 + t_send (section 4, inequalities (1), (2))",
          "holds", "stability, runs fig2/* (t1 vector, t2 timestamp, per sender)",
          ("stability",), _st_t1t2, _st_t1t2_ok),
    Claim("stability", "buffer grows linearly with the stability latency (section 4)",
          "buffer ~ latency x send rate", "stability, runs N=*/timestamp: time-average "
          "buffer over mean latency x send rate in [0.85, 1.1] (the average also covers "
          "the time before the first send), max buffer >= max latency / t_send",
          ("stability",), _st_buffer, _st_buffer_ok,
          "the buffer is not proportional to the latency"),
    Claim("stability", "ack bandwidth: timestamp O(N_r), vector O(N_r N_s)", "ratio N_s",
          "stability, runs N=*/vector over N=*/timestamp (sizes from the core's ack "
          "objects, 8 B per timestamp; no wire codec)", ("stability",), _st_bandwidth,
          None, kind="computed"),
    Claim("stability", "timestamp latency only slightly larger than vector", "slightly "
          "larger", "stability, runs N=*, mean latency (ms); <= 1.5x counts as slightly",
          ("stability",), _st_latency, _st_latency_ok),
    Claim("stability", "logical clocks increase the latency (section 5, Fig. 3)", "larger",
          "stability, runs N=*/timestamp-uneven and -logical-uneven (s1 sends 5x as often), "
          "mean latency (ms); > 1.2x counts as larger", ("stability",), _st_lamport,
          _st_lamport_ok, "no increase with uneven send rates"),
    Claim("stability", "clock skew increases the latency (section 5)", "larger",
          "stability, runs N=*/timestamp-skewed vs N=*/timestamp (same traffic, offsets "
          "uniform in +-10 ms): mean and max latency, synchronized -> skewed (ms); "
          "checked: the mean grows", ("stability",),
          _st_skew, _st_skew_ok, "skew did not increase the mean latency"),
)
