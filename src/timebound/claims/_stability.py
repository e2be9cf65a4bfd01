"""Message stability: Berket, Koch, Moser and Melliar-Smith, "Timestamp
Acknowledgments for Determining Message Stability": the rows on Fig. 2 (vector and
timestamp acks), section 4 (inequalities (1), (2); the buffer against the stability
latency; ack bandwidth and latency of timestamp against vector acks) and section 5
(logical clocks, Fig. 3; clock skew), and Theorem 1 (a) (a stable message has been
received by every receiver).

Source: the ``stability`` job, runs ``fig2/*`` and ``N=*/*``; the bandwidth row also
reads the ``stability-acks`` job when given (timestamp and vector runs only, at larger
N: bytes per ack do not depend on how long a run is, so those runs are short).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ._base import Claim, Missing, Runs, Sources, Values, _get, _num, spread


def _sizes(runs: Runs) -> list[int]:
    out = sorted({int(_num(k.split("/")[0], "N")) for k in runs if k.startswith("N=")})
    if not out:
        raise Missing("stability N=*")
    return out


#: the paper's Fig. 2 figures (time units): vector acks at s1 and s2, timestamp acks at s1
FIG2_VECTOR = (7.0, 14.0)
FIG2_TIMESTAMP = 11.0
#: Fig. 2's periods: every sender sends and every receiver acknowledges once per time
#: unit (t_send = t_ack = 1, the scenario's too)
FIG2_PERIOD = 1.0


def _worst(runs: Runs, mode: str) -> tuple[Mapping[str, float], float]:
    """The worst-phase Fig. 2 run of ``mode`` (``fig2/MODE-worst/ticks=K``) and its ticks
    per time unit K."""
    found = [k for k in runs if k.startswith(f"fig2/{mode}-worst/")]
    if not found:
        raise Missing(f"fig2/{mode}-worst")
    return runs[found[0]], _num(found[0], "ticks")


def _units(run: Mapping[str, float], measure: str, ticks: float) -> float:
    return _get({"run": run}, "run", measure) / ticks


def _st_fig2v(s: Sources) -> Values:
    """Vector acks on the Fig. 2 network, in time units: the worst phase
    (``fig2/vector-worst``: each ack fires just before the arrival it acknowledges) and
    the aligned one (``fig2/vector``: acks in the same instant as the arrivals)."""
    runs = s["stability"]
    worst, ticks = _worst(runs, "vector")
    return [("s1", _units(worst, "latency_max_s1", ticks), "g"),
            ("s2", _units(worst, "latency_max_s2", ticks), "g"),
            ("aligned s1", _get(runs, "fig2/vector", "latency_max_s1"), "g"),
            ("aligned s2", _get(runs, "fig2/vector", "latency_max_s2"), "g"),
            ("t_ack", FIG2_PERIOD, "g")]


def _st_fig2v_ok(v: dict[str, float]) -> bool:
    """The worst phase gives the paper's figures exactly; the aligned run is one full
    ack period (t_ack) below them, the wait the paper counts and the aligned phases
    never make."""
    return all(math.isclose(v[n], fig) and math.isclose(v[f"aligned {n}"], fig - v["t_ack"])
               for n, fig in zip(("s1", "s2"), FIG2_VECTOR, strict=True))


def _st_fig2t(s: Sources) -> Values:
    """Timestamp acks at s1, in time units: the worst phase (``fig2/timestamp-worst``:
    s2 sends one tick before s1, the acks fire just before the arrivals), one tick, and
    the aligned run (``fig2/timestamp``)."""
    runs = s["stability"]
    worst, ticks = _worst(runs, "timestamp")
    return [("s1", _units(worst, "latency_max_s1", ticks), "g"),
            ("tick", 1 / ticks, "g"),
            ("aligned s1", _get(runs, "fig2/timestamp", "latency_max_s1"), "g"),
            ("t_send", FIG2_PERIOD, "g"),
            ("t_ack", FIG2_PERIOD, "g")]


def _st_fig2t_ok(v: dict[str, float]) -> bool:
    """The worst phase reaches the paper's 11 less exactly one tick (an s2 message sent
    at m1's instant carries m1's timestamp and covers it, so m1 waits t_send less one
    tick, never the whole t_send); the aligned run is t_send + t_ack below 11."""
    return (math.isclose(v["s1"] + v["tick"], FIG2_TIMESTAMP)
            and math.isclose(v["aligned s1"] + v["t_send"] + v["t_ack"], FIG2_TIMESTAMP))


def _st_t1t2(s: Sources) -> Values:
    """t1 (vector acks) and t2 (timestamp acks) per sender, in time units: the largest
    latencies of the worst-phase Fig. 2 runs, which the paper's t1 and t2 bound."""
    runs = s["stability"]
    vector, vt = _worst(runs, "vector")
    stamp, st = _worst(runs, "timestamp")
    out: Values = []
    for node in ("s1", "s2"):
        out.append((f"t1 {node}", _units(vector, f"latency_max_{node}", vt), "g"))
        out.append((f"t2 {node}", _units(stamp, f"latency_max_{node}", st), "g"))
    out.append(("t_send", FIG2_PERIOD, "g"))
    out.append(("t_ack", FIG2_PERIOD, "g"))
    return out


def _st_t1t2_ok(v: dict[str, float]) -> bool:
    """Section 4 as the paper states it, for every sender s': (1) t1,s' <= t2,s';
    (2) t2,s' <= max_s t1,s + t1,s' + t_send - t_ack (the shortcut
    t2,s' <= max t1 + t_send needs l_sr = l_rs, which the Fig. 2 network does not have)."""
    top = max(v["t1 s1"], v["t1 s2"])
    return all(v[f"t1 {n}"] <= v[f"t2 {n}"]
               <= top + v[f"t1 {n}"] + v["t_send"] - v["t_ack"] for n in ("s1", "s2"))


#: the job with the bandwidth runs at larger N (timestamp and vector only), if any
ACK_JOB = "stability-acks"
#: bandwidth row: the timestamp ack's bytes per receiver may vary this much over N
#: (max / min; the ack count per receiver varies by one ack at the runs' ends)
FLAT = 1.1
#: bandwidth row: vector over timestamp ack bytes, divided by N_s, must stay in this
#: band (a vector entry is name + 9 B against 9 B for the whole timestamp ack)
PER_SENDER = (1.0, 2.0)
#: skew row: the mean latency must grow by at least this share of the mean offset of
#: the senders' clocks above the slowest one
SKEW_SHARE = 0.25


def _st_bandwidth(s: Sources) -> Values:
    """Per N: the timestamp acks' wire bytes per second per receiver, and the vector
    acks' over the timestamp acks' (same acks, same times: the ratio of one ack's
    encoded size)."""
    jobs = [s["stability"], s.get(ACK_JOB, {})]
    sizes = sorted({n for runs in jobs if any(k.startswith("N=") for k in runs)
                    for n in _sizes(runs)})
    out: Values = []
    for n in sizes:
        runs = jobs[1] if f"N={n}/timestamp" in jobs[1] else jobs[0]
        ts = _get(runs, f"N={n}/timestamp", "ack_wire_bytes_per_s")
        out.append((f"N={n} timestamp B/s per receiver", ts / n, ".0f"))
        out.append((f"N={n} vector / timestamp", _get(runs, f"N={n}/vector",
                                                      "ack_wire_bytes_per_s") / ts, ".2f"))
    if not out:
        raise Missing("stability N=*")
    return out


def _st_bandwidth_ok(v: dict[str, float]) -> bool:
    """O(N_r): the timestamp acks' bytes per receiver do not change with N_s;
    O(N_r N_s): the vector acks' bytes over them grow as N_s (in the band)."""
    per_receiver = [x for k, x in v.items() if k.endswith("per receiver")]
    ratios = {int(_num(k.split()[0], "N")): x for k, x in v.items()
              if k.endswith(" vector / timestamp")}
    lo, hi = PER_SENDER
    return (bool(per_receiver) and min(per_receiver) > 0
            and max(per_receiver) <= FLAT * min(per_receiver)
            and all(lo <= x / n <= hi for n, x in ratios.items()))


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
        out.append((f"N={n} ahead of slowest ms", _get(runs, f"N={n}/timestamp-skewed",
                                                       "offset_above_slowest_mean") / 1000,
                    ".1f"))
    return out


def _st_skew_ok(v: dict[str, float]) -> bool:
    """The mean latency grows by at least ``SKEW_SHARE`` of the mean offset of the
    senders' clocks above the slowest one (section 5: a receiver acknowledges a
    message only once the slowest sender's timestamps reach its own; the slowest
    sender's own messages wait for nobody, so the growth is a share of that offset, not
    all of it). The maximum is one sample of the delay tail and is shown, not checked."""
    ns = {k.split()[0] for k in v}
    return all(v[f"{n} ahead of slowest ms"] > 0
               and v[f"{n} mean +"] >= SKEW_SHARE * v[f"{n} ahead of slowest ms"]
               for n in ns)


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



def _st_stable(s: Sources) -> Values:
    """Theorem 1 (a) on every N=* run: (message, receiver) pairs where a message stable
    at its sender had not been delivered to that receiver, and the messages checked."""
    runs = s["stability"]
    names = [k for k in sorted(runs) if k.startswith("N=")]
    if not names:
        raise Missing("stability N=*")
    return [("stable but not received", sum(_get(runs, k, "stable_unreceived")
                                            for k in names), ".0f"),
            ("stable messages checked", sum(_get(runs, k, "stable_checked")
                                            for k in names), ".0f")]


def _stable_why(seeds: Sequence[Sources]) -> str:
    hits: dict[str, list[float]] = {}
    checked = []
    for s in seeds:
        runs = s["stability"]
        checked.append(sum(_get(runs, k, "stable_checked") for k in runs if k.startswith("N=")))
        for k in sorted(runs):
            if k.startswith("N=") and _get(runs, k, "stable_unreceived"):
                hits.setdefault(k, []).append(_get(runs, k, "stable_unreceived"))
    where = ", ".join(f"{k}: {spread(v, '.0f')}" for k, v in hits.items()) or "none"
    return (f"(message, receiver) pairs stable at the sender before that receiver had the "
            f"message, per run: {where}, of {spread(checked, '.0f')} stable messages checked")


CLAIMS: tuple[Claim, ...] = (
    Claim("stability", "Fig. 2, vector acks: stable within 7 at s1, 14 at s2", "7, 14",
          "stability, runs fig2/vector-worst (the Fig. 2 latencies, every node acting "
          "once per time unit, each ack just before the arrival it acknowledges: the "
          "phase the paper's 'no later than' assumes; a time unit is split into ticks) and fig2/vector "
          "(every node acting at the same instants, acks after the arrivals); checked: "
          "the worst phase equals the paper's figures, and the aligned run is t_ack "
          "below them (the paper counts a full ack period of wait, the aligned phases "
          "none). It differs if the worst phase is not exactly 7 and 14, or the aligned "
          "run is not one ack period below them", ("stability",), _st_fig2v, _st_fig2v_ok,
          "the vector acks do not make the first sender's message stable at the paper's "
          "figures in the worst phase, or not one ack period earlier in the aligned one"),
    Claim("stability", "Fig. 2, timestamp acks: stable within 11 at s1", "11",
          "stability, runs fig2/timestamp-worst (s2 sends one tick before s1, acks just "
          "before the arrivals; tick: one tick in time units) and fig2/timestamp "
          "(aligned); checked: the worst phase is 11 less exactly one tick (a message s2 sends at m1's "
          "instant carries m1's timestamp and covers it, so the paper's full t_send of "
          "wait is a bound approached, never reached), and the aligned run is t_send + "
          "t_ack below 11. It differs if the worst phase is not 11 less one tick, or the "
          "aligned run is not t_send + t_ack below 11", ("stability",), _st_fig2t,
          _st_fig2t_ok, "the timestamp acks do not make the first sender's message "
          "stable at the paper's figure less one tick in the worst phase, or not t_send + t_ack below it when "
          "aligned"),
    Claim("stability", "t1,s <= t2,s (1) and t2,s <= max t1 + t1,s + t_send - t_ack (2) (section 4)",
          "holds", "stability, runs fig2/vector-worst (t1) and "
          "fig2/timestamp-worst (t2), largest latency per sender s1, s2, in time units; "
          "checked: inequalities (1) and (2) exactly as the paper states them (not the "
          "shortcut t2 <= max t1 + t_send, which needs equal message and ack latencies; "
          "Fig. 2's differ). It differs if timestamp acks make a sender's messages stable "
          "sooner than vector acks, or later than bound (2)", ("stability",), _st_t1t2,
          _st_t1t2_ok, "a sender's latency with timestamp acks below its latency with "
          "vector acks, or above the paper's bound on it"),
    Claim("stability", "buffer grows linearly with the stability latency (section 4)",
          "buffer ~ latency x send rate", "stability, runs N=*/timestamp: time-average "
          "buffer over mean latency x send rate in [0.85, 1.1] (the average also covers "
          "the time before the first send), max buffer >= max latency / t_send. It differs if "
          "the mean buffer leaves that band around latency x send rate at some N, or the "
          "largest buffer holds fewer messages than the largest latency spans sends. No "
          "break of the ack rules can make it differ (Little's law relates buffer and "
          "latency under any rule; a break that changes the latency changes the buffer "
          "with it): it checks the sender's buffer accounting, and the latency rows check "
          "the rules",
          ("stability",), _st_buffer, _st_buffer_ok,
          "the buffer is not proportional to the latency"),
    Claim("stability", "ack bandwidth: timestamp O(N_r), vector O(N_r N_s)", "ratio N_s",
          "stability, runs N=*/timestamp and N=*/vector (and job stability-acks, the same "
          "two runs at larger N): each ack's size is len(encode_ack(ack)), the live "
          "group's wire encoding (timestamp: 01 value:u64; vector: 02 n:u16 and name_len:u8 "
          "name value:u64 per sender); checked: the timestamp acks' bytes per receiver "
          f"within {FLAT:g}x over N (independent of N_s) and vector over timestamp within "
          f"[{PER_SENDER[0]:g}, {PER_SENDER[1]:g}] x N_s at every N. It differs if the "
          "timestamp ack grows with the senders, or the vector ack leaves senders out or "
          "grows faster than its entries",
          ("stability",), _st_bandwidth, _st_bandwidth_ok,
          "the acks' encoded sizes do not scale as O(N_r) and O(N_r N_s)"),
    Claim("stability", "timestamp latency only slightly larger than vector", "slightly "
          "larger", "stability, runs N=*, mean latency (ms); <= 1.5x counts as slightly. It differs if at some N the "
          "timestamp acks' mean latency is below the vector acks' or above 1.5x it",
          ("stability",), _st_latency, _st_latency_ok),
    Claim("stability", "logical clocks increase the latency (section 5, Fig. 3)", "larger",
          "stability, runs N=*/timestamp-uneven and -logical-uneven (s1 sends 5x as often), "
          "mean latency (ms); > 1.2x counts as larger. It differs if at some N logical "
          "clocks give a mean latency at most 1.2x the physical clocks' one",
          ("stability",), _st_lamport,
          _st_lamport_ok, "no increase with uneven send rates"),
    Claim("stability", "clock skew increases the latency (section 5)", "larger",
          "stability, runs N=*/timestamp-skewed vs N=*/timestamp (same traffic; the "
          "senders' clock offsets spread evenly over [-skew/2, skew/2], their order "
          "shuffled per seed): mean and max latency, synchronized -> skewed (ms), the "
          "offsets' spread and their mean above the slowest clock (ms); checked: the mean "
          f"grows by at least {SKEW_SHARE:g}x the mean above the slowest clock at every N. "
          "It differs if acks are not held back by the slow clock (the skew adds less)",
          ("stability",), _st_skew, _st_skew_ok,
          "skew increased the mean latency by less than its share of the clock offsets"),
    Claim("stability", "a message stable at its sender has been received by every "
          "receiver (Theorem 1 (a))", "0", "stability, every N=* run (timestamp, vector, "
          "logical, skewed, uneven): each time an ack makes messages stable at their "
          "sender, every receiver's entry for that sender (FIFO channels: the largest "
          "timestamp it delivered from it) against each message's timestamp; checked: 0 "
          "(message, receiver) pairs below it, with stable messages checked. It differs if "
          "an ack rule lets a message be stable before some receiver has it (an ack taken "
          "as the largest entry instead of the smallest)", ("stability",), _st_stable,
          lambda v: v["stable but not received"] == 0 and v["stable messages checked"] > 0,
          _stable_why),
)
