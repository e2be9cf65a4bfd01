"""Mutation testing of the cores: does the suite catch a one-line change of a rule?

Each mutant is ``(protocol, file under src/timebound/core, original line,
replacement)``. The script first copies ``src/`` once to a snapshot (other work on
the tree cannot change the run half-way; the real ``src/`` is never edited), checks
that every protocol's tests pass on the unmutated snapshot (a protocol whose tests
already fail has its mutants reported ``not run``), then, for each mutant, copies the
snapshot, replaces that exact line (it must occur exactly once) and runs the
protocol's tests with ``PYTHONPATH`` pointing at the copy, in two passes:

1. the Hypothesis property tests of the protocol's files (``-m hypothesis``);
2. if they all pass, the other tests of those files (``-m "not hypothesis"``).

Verdicts, honest by construction:

- ``caught (property)`` / ``caught (hand)``: a test of that pass FAILED (pytest exit 1
  with a ``FAILED`` line);
- ``SURVIVED``: both passes passed;
- ``timeout``: a pass ran over ``--timeout`` seconds and nothing failed before (a
  timeout is never counted as caught);
- ``broken``: the mutant did not get as far as a test failing (import or collection
  error, an ``ERROR`` in setup, another pytest exit status).

Tests run with ``-x -q -p no:cacheprovider`` under ``HYPOTHESIS_PROFILE=mutation``
(``tests/conftest.py``: 100 derandomized examples, no shrinking), ``--jobs`` mutants
at a time, and always on the pure-Python build (``TIMEBOUND_PURE_PYTHON=1``): a
mutant of a compiled module (``core/rpc/*``, ``core/atmostonce/*``,
``core/wire/_frame.py``) is a ``.py`` edit the mypyc build does not contain, so the
baseline and every mutant run the same, pure, modules (``timebound/_compiled.py``
would also fall back to them on the stale hash; this makes it explicit).

    .venv/bin/python scripts/mutate.py                       # every mutant
    .venv/bin/python scripts/mutate.py merge rpc             # only those protocols
    .venv/bin/python scripts/mutate.py --jobs 2 --out mutation-score.txt

Prints one row per mutant and the score; exit status 0 when every mutant was caught.

``ROW_MUTANTS`` (below) are named one-line breaks of the rules the rows of
docs/reproduction.md check; this script does not run them: the reproduction's own jobs
and verdicts do, in ``tests/test_reproduction_mutants.py``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = ROOT / ".venv" / "bin" / "python"

#: protocol -> its fast core test files (property and hand tests are told apart by
#: Hypothesis's own ``hypothesis`` marker, not by file)
TESTS = {
    "atmostonce": ["tests/test_atmostonce_properties.py",
                   "tests/test_atmostonce_marked.py",
                   "tests/test_atmostonce_monotonic_properties.py",
                   "tests/test_atmostonce_estimator_mutants.py",
                   "tests/test_atmostonce_receiver.py"],
    "slotted": ["tests/test_slotted_properties.py", "tests/test_slotted_mutants.py",
                "tests/test_slotted_core.py", "tests/test_exact_boundaries.py"],
    "merge": ["tests/test_merge_properties.py"],
    "causal": ["tests/test_causal_properties.py", "tests/test_causal_mutants.py",
               "tests/test_causal_variants.py", "tests/test_exact_boundaries.py"],
    "stability": ["tests/test_stability_theorems.py", "tests/test_stability_mutants.py",
                  "tests/test_exact_boundaries.py"],
    "rpc": ["tests/test_rpc_statemachine.py", "tests/test_rpc_server.py",
            "tests/test_rpc_client.py"],
    "wire": ["tests/test_net_wire.py", "tests/test_wire_mutants.py"],
    "pubsub": ["tests/test_group_pubsub_properties.py", "tests/test_pubsub_core_rules.py",
               "tests/test_net_pubsub_core.py", "tests/test_net_pubsub_hostile.py"],
    "group": ["tests/test_group_pubsub_properties.py", "tests/test_group_core_rules.py",
              "tests/test_net_group_core.py", "tests/test_net_group_hostile.py"],
    "rpc_live": ["tests/test_rpc_incarnation.py", "tests/test_net_service.py",
                 "tests/test_rpc_hostile.py", "tests/test_exact_boundaries.py"],
    "channel": ["tests/test_net_channel_core.py", "tests/test_channel_mutants.py"],
}

AMO = "atmostonce/_receiver.py"
TABLE = "atmostonce/_table.py"
EST = "atmostonce/_estimators.py"
SLOT = "slotted/_receiver.py"
MERGE = "merge/_merger.py"
CAUSAL = "causal/_process.py"
STAB = "stability/_sender.py"
WIRE = "wire/_frame.py"
LIVE = "rpc/_live.py"
PUBSUB = "pubsub/_nodes.py"
GROUP = "group/_member.py"
CH_RECV = "channel/_receiver.py"
CH_SEND = "channel/_sender.py"

#: (protocol, file, original line, replacement[, which occurrence]): the line must
#: occur exactly once, or, with an occurrence index (0 = first), at least that often
#: (the at-most-once receiver has the figures' path and the reorder window's path).
Mutant = tuple[str, str, str, str] | tuple[str, str, str, str, int]
MUTANTS: list[Mutant] = [
    ("atmostonce", AMO, "            if ts <= last:", "            if ts < last:"),
    ("atmostonce", AMO, "        elif ts <= (self.upper_marked if marked else self.upper):",
     "        elif ts < (self.upper_marked if marked else self.upper):"),
    ("atmostonce", AMO,
     "        elif ts <= (bound := self.upper_marked if marked else self.upper):",
     "        elif ts < (bound := self.upper_marked if marked else self.upper):"),
    ("atmostonce", AMO, "        if latest is not None and ts > latest:",
     "        if latest is not None and ts > latest + 1:"),
    ("atmostonce", AMO, "        if slack is not None and ts > now + slack:",
     "        if slack is not None and ts > now + slack + 1:"),
    ("atmostonce", AMO, "            self.upper = record.latest",
     "            self.upper = record.latest - 1"),
    ("atmostonce", TABLE, "        threshold = now - self.estimator.estimate",
     "        threshold = now - self.estimator.estimate + 1"),
    ("atmostonce", TABLE, "        if ts > self.upper:", "        if ts < self.upper:"),
    ("atmostonce", TABLE, "        if ts > self.upper_marked:",
     "        if ts < self.upper_marked:"),
    ("atmostonce", AMO, "        elif ts <= (self.upper_marked if marked else self.upper):",
     "        elif ts <= (0 if marked else self.upper):"),
    ("atmostonce", AMO,
     "        elif ts <= (bound := self.upper_marked if marked else self.upper):",
     "        elif ts <= (bound := 0 if marked else self.upper):"),
    ("atmostonce", AMO,
     "            floor = max(bound, min(self.upper, ts - 1)) if marked else bound",
     "            floor = bound"),
    ("atmostonce", AMO, "            self.upper = max(self.upper, self._refuse_until)",
     "            self.upper = max(self.upper, self._refuse_until - 1)"),
    ("atmostonce", AMO,
     "                table[conn] = ts  # its expiry key stays below ts: see _evict",
     "                pass", 0),
    ("atmostonce", EST, "        if maxltime > self.estimate:",
     "        if maxltime > self.estimate + 1:"),
    ("atmostonce", EST,
     "        if self.numacc > self.p * self.numrej and self.estimate > maxltime > 0:",
     "        if self.numacc >= self.p * self.numrej and self.estimate > maxltime > 0:"),
    ("atmostonce", EST, "        self.numacc -= self.p * self.numrej",
     "        self.numacc -= self.numrej"),
    ("slotted", SLOT, "            if order <= self._f_last:",
     "            if order < self._f_last:"),
    ("slotted", SLOT, "            elif order == self._f_last + 1:",
     "            elif order == self._f_last + 2:"),
    ("slotted", SLOT, "            if self._r_delivered < fr.stamp.order:",
     "            if self._r_delivered < fr.stamp.order - 1:"),
    ("slotted", SLOT, "        if stamp.slot < self._slot:",
     "        if stamp.slot < self._slot - 1:"),
    ("slotted", SLOT, "        limit = self._now - self._f_hold",
     "        limit = self._now - self._f_hold + 1"),
    ("merge", MERGE, "        return stamp.r + stamp.c + self._wait",
     "        return stamp.r + stamp.c + self.delta"),
    ("merge", MERGE, "        if due < now:", "        if due <= now:"),
    ("merge", MERGE, "        while heap and heap[0][0] <= now:",
     "        while heap and heap[0][0] < now:"),
    ("merge", MERGE, "        if key in self._seen:", "        if False:"),
    ("causal", CAUSAL,
     "        return self._commit(rt, max(0, self.r + self.c - rt, stamp.r + m_c - rt), kn)",
     "        return self._commit(rt, max(0, self.r + self.c - rt), kn)"),
    ("causal", CAUSAL,
     "            c = max(0, self.r + self.c - rt, stamp.r + stamp.c - rt + 1)",
     "            c = max(0, self.r + self.c - rt, stamp.r + stamp.c - rt)"),
    ("causal", CAUSAL, "        kn = [value if value > 0 else 0 for value in kn]",
     "        kn = [value if value > 1 else 0 for value in kn]"),
    ("stability", STAB,
     "        while buffer and (bound is None or buffer[0][0] <= bound):",
     "        while buffer and (bound is None or buffer[0][0] < bound):"),
    ("stability", STAB,
     "                self._min = ack if self._min is None else min(self._min, ack)",
     "                self._min = ack"),
    ("stability", STAB, "        if current == self._min:", "        if current != self._min:"),
    ("rpc", "rpc/_server.py",
     "        if entry.reply_time >= now - max(self._class_of(conn).estimate, self.kappa):",
     "        if entry.reply_time > now - max(self._class_of(conn).estimate, self.kappa):"),
    ("rpc", "rpc/_client.py",
     "        ts = now if now > last and now >= 1 else max(now, last + 1, 1)",
     "        ts = now if now > last and now >= 1 else max(now, last, 1)"),
    ("rpc", "rpc/_client.py",
     "            pending.give_up_at = max(pending.give_up_at, now + self.policy.give_up_after)",
     "            pass"),
    # -- added: the frame codec, the channel cores, the slotted sender, the stability
    # receiver and the causal order (every core has mutants)
    ("wire", WIRE, "        if kind == 0 or flags & ~FLAG_AUTH:", "        if kind == 0:"),
    ("wire", WIRE, "            if hmac.compare_digest(key.tag(signed, prefix), tag):",
     "            if True:"),
    ("wire", WIRE, "            self.previous_until is None or now < self.previous_until",
     "            self.previous_until is None or now <= self.previous_until"),
    ("wire", WIRE, "        if size < HEADER_BYTES + TAG_BYTES:",
     "        if size < HEADER_BYTES + TAG_BYTES - 1:"),
    ("channel", CH_RECV, "        if seq < s.floor or seq in s.seen:",
     "        if seq < s.floor:"),
    ("channel", CH_RECV, "        if session is not None and session.ts == msg.ts:",
     "        if session is not None:"),
    ("channel", CH_SEND, "        done = [s for s in unacked if s < ack.cum]",
     "        done = [s for s in unacked if s <= ack.cum]"),
    ("channel", CH_SEND,
     "        return self.failed is None and self._next - self.floor < self.window",
     "        return self.failed is None and self._next - self.floor <= self.window"),
    ("channel", CH_SEND, "        if now >= self._progress + self.give_up:",
     "        if now > self._progress + self.give_up:"),
    ("slotted", "slotted/_sender.py", "            self._sent_f = 0", "            pass"),
    ("stability", "stability/_receiver.py", "        if last is None or ts <= last:",
     "        if last is None or ts < last:"),
    # -- the live RPC service (core/rpc/_live.py): incarnation marks, deadlines,
    # address validation, amplification
    ("rpc_live", LIVE, "                if (_TS.unpack_from(message, at + 5 + message[at])[0] == incarnation",
     "                if (_TS.unpack_from(message, at + 5 + message[at])[0] != 0"),
    ("rpc_live", LIVE, "                        and self.server.epoch == self._epoch):",
     "                        and True):"),
    ("rpc_live", LIVE, "        if incarnation and incarnation == self.incarnation:",
     "        if False:"),
    ("rpc_live", LIVE, "        return start.ts + budget * self.ticks_per_ms if budget else None",
     "        return start.ts + 2 * budget * self.ticks_per_ms if budget else None"),
    ("rpc_live", LIVE, "        return deadline is not None and now > deadline",
     "        return deadline is not None and now >= deadline"),
    ("rpc_live", LIVE, "            if len(o.datagram) > budget and not self.validated(o.peer, now):",
     "            if False:"),
    ("rpc_live", LIVE, "                or not hmac.compare_digest(self._token(issued, peer), token)):",
     "                or False):"),
    # -- pub-sub nodes: Theorem 4.4 at the deadline tick, G1's boundary, the bounds
    ("pubsub", PUBSUB, "        return self._deliver(now - 1)",
     "        return self._deliver(now)"),
    ("pubsub", PUBSUB, "        if message.stamp.r > now + self.epsilon:",
     "        if message.stamp.r >= now + self.epsilon:"),
    ("pubsub", PUBSUB,
     "        if len(self._messages) >= self.max_pending and key not in self._messages:",
     "        if len(self._messages) > self.max_pending and key not in self._messages:"),
    ("pubsub", PUBSUB,
     "                self.merger is not None and body.seq >= self._next + self.max_waiting):",
     "                self.merger is not None and body.seq > self._next + self.max_waiting):"),
    ("pubsub", PUBSUB, "                if oldest + self.gap_wait > now:",
     "                if oldest + self.gap_wait >= now:"),
    ("pubsub", PUBSUB, "        if body.seq < self._next or body.seq in self._waiting:",
     "        if body.seq < self._next:"),
    ("pubsub", PUBSUB,
     "        if self.secret is not None and not self._valid(body.token, peer, now):",
     "        if False:"),
    # exact boundaries (tests/test_exact_boundaries.py), each moved by one both ways
    ("stability", STAB, "            if ack is not None and ts > ack:",
     "            if ack is not None and ts >= ack:"),
    ("stability", STAB, "            if ack is not None and ts > ack:",
     "            if ack is not None and ts > ack + 1:"),
    ("causal", CAUSAL,
     "        c = max(0, self.r + self.c - rt) if self.r + 2 * self.epsilon >= rt else 0",
     "        c = max(0, self.r + self.c - rt) if self.r + 2 * self.epsilon > rt else 0"),
    ("causal", CAUSAL,
     "        c = max(0, self.r + self.c - rt) if self.r + 2 * self.epsilon >= rt else 0",
     "        c = max(0, self.r + self.c - rt) if self.r + 2 * self.epsilon >= rt - 1 else 0"),
    ("causal", CAUSAL, "        if self.r + two_eps >= rt:", "        if self.r + two_eps > rt:"),
    ("causal", CAUSAL, "        if self.r + two_eps >= rt:", "        if self.r + two_eps >= rt - 1:"),
    ("causal", CAUSAL, "        if stamp.r + two_eps >= rt:", "        if stamp.r + two_eps > rt:"),
    ("causal", CAUSAL, "        if stamp.r + two_eps >= rt:",
     "        if stamp.r + two_eps >= rt - 1:"),
    ("rpc_live", LIVE,
     "        if reason is Reason.STALE and now <= self.down_until and not self._marked:",
     "        if reason is Reason.STALE and now < self.down_until and not self._marked:"),
    ("rpc_live", LIVE,
     "        if reason is Reason.STALE and now <= self.down_until and not self._marked:",
     "        if reason is Reason.STALE and now <= self.down_until + 1 and not self._marked:"),
    ("slotted", SLOT, "            elif order in self._f_waiting:", "            elif False:"),
    ("slotted", SLOT, "            if order <= self._f_last:",
     "            if order <= self._f_last + 1:"),
    # the digest is the SHA-256 of the (proc, msg) lines; a lease lapses at LEASE; a
    # subscriber that left renews nothing and has no deadline when nothing waits
    ("pubsub", PUBSUB,
     '            self._hash.update(f"{message.proc}\\x00{message.msg}\\n".encode())',
     '            self._hash.update(f"{message.proc}\\n".encode())'),
    ("pubsub", PUBSUB,
     "        for peer in [p for p, until in self._subs.items() if until <= now]:",
     "        for peer in [p for p, until in self._subs.items() if until < now]:"),
    ("pubsub", PUBSUB, "        if self._renew is not None and now >= self._renew:",
     "        if now >= (self._renew or 0):"),
    ("pubsub", PUBSUB, "            due = gap if due is None else min(due, gap)",
     "            due = gap"),
    # -- group members: reliable FIFO, null messages, NACK answers, incarnations, bounds
    ("group", GROUP, "        if seq >= p.expect + MAX_AHEAD:",
     "        if seq > p.expect + MAX_AHEAD:"),
    ("group", GROUP,
     "        if p.expect >= hb.next and last is not None and hb.promise > last:",
     "        if last is not None and hb.promise > last:"),
    ("group", GROUP, "            elif ((self.check_sources and source != peer.name)",
     "            elif ((False)"),
    ("group", GROUP, "                      and now < peer.answered + self.nack_every // 2)):",
     "                      and now < peer.answered)):"),
    ("group", GROUP, "        if inc < p.inc:", "        if False:"),
    ("group", GROUP, "            ts = max(now, self._last_ts + 1, self._promised + 1)",
     "            ts = max(now, self._last_ts + 1)"),
    ("group", GROUP, "        return len(self._frames) < self.max_buffer",
     "        return len(self._frames) <= self.max_buffer"),
    ("group", GROUP, "        if hb.base > p.expect:", "        if False:"),
    # Theorem 1 (a): a message delivered past a gap lets acks cover the missing one;
    # (b): acks that release nothing, or NACKs answered with nothing, never make it stable;
    # max_skew's boundary for incarnations and timestamps
    ("group", GROUP, "        if seq > p.expect:", "        if seq > p.expect + 1:"),
    ("group", GROUP, "        self._stable(self.node.receive_ack(hb.ack, now=now), events)",
     "        self.node.receive_ack(hb.ack, now=now)"),
    ("group", GROUP, "                        sends.append((peer.name, frame))",
     "                        pass"),
    ("group", GROUP, "        if not 1 <= msg.head.inc <= now + self.max_skew:",
     "        if not 1 <= msg.head.inc <= now + self.max_skew + 1:"),
    ("group", GROUP, "            limit = min(now + self.max_skew, SEQ_LIMIT - 1)",
     "            limit = min(now + self.max_skew + 1, SEQ_LIMIT - 1)"),
    ("causal", "causal/_timestamp.py", "        if a < b:", "        if a <= b:"),
    ("causal", "causal/_timestamp.py",
     "    return se < sf or (se == sf and e.r < f.r)",
     "    return se < sf or (se == sf and e.r <= f.r)"),
]

#: Named one-line breaks of the rules the rows of docs/reproduction.md check,
#: ``name: (file under src/timebound/core, original line, replacement)``; each line
#: occurs exactly once. ``tests/test_reproduction_mutants.py`` runs each on a copy of
#: ``src`` through the reproduction's own jobs and verdicts and sees its rows differ.
ROW_MUTANTS: dict[str, tuple[str, str, str]] = {
    # at-most-once receiver (SCMP, adaptive timeouts)
    "amo-accept-equal-ts": (AMO, "            if ts <= last:", "            if ts < last:"),
    "amo-no-early-refusal": (AMO, "        if latest is not None and ts > latest:",
                             "        if False:"),
    "amo-no-stale-refusal": (AMO,
                             "        elif ts <= (self.upper_marked if marked else self.upper):",
                             "        elif False:"),
    "amo-marks-ignored": (AMO,
                          "        elif ts <= (self.upper_marked if marked else self.upper):",
                          "        elif ts <= self.upper:"),
    "amo-no-reorder-window": (AMO, "            elif self._admit(conn, ts):",
                              "            elif False:"),
    "amo-recovery-upper-low": (AMO, "            self.upper = max(self.upper, self._refuse_until)",
                               "            self.upper = max(self.upper, self._refuse_until - 1)"),
    "amo-no-recovery-grace": (AMO, "        self._no_evict_until = now + self.recovery_grace",
                              "        self._no_evict_until = now"),
    "gc-quarter-horizon": (TABLE, "        threshold = now - self.estimator.estimate",
                           "        threshold = now - self.estimator.estimate // 4"),
    "gc-fixed-horizon": (TABLE, "        threshold = now - self.estimator.estimate",
                         "        threshold = now - 50_000"),
    "est-never-decreases": (EST,
        "        if self.numacc > self.p * self.numrej and self.estimate > maxltime > 0:",
        "        if False:"),
    "est-decrease-ignores-p": (EST,
        "        if self.numacc > self.p * self.numrej and self.estimate > maxltime > 0:",
        "        if self.estimate > maxltime > 0:"),
    "est-raise-late": (EST, "        if maxltime > self.estimate:",
                       "        if maxltime > 2 * self.estimate:"),
    "est-every-lifetime-a-spike": (EST, "        if len(top) <= self.spikes:",
                                   "        if len(top) <= self.window:"),
    "est-chases-spikes": (EST, "        if len(top) <= self.spikes:", "        if len(top) <= 0:"),
    # slotted receiver
    "slot-fr-skips-r": (SLOT, "            if self._r_delivered < fr.stamp.order:",
                        "            if self._r_delivered < fr.stamp.order - 1:"),
    "slot-f-reversed": (SLOT, "            for order in sorted(self._f_waiting):",
                        "            for order in sorted(self._f_waiting, reverse=True):"),
    "slot-closed-kept": (SLOT, "        if stamp.slot < self._slot:",
                         "        if stamp.slot < self._slot - 1:"),
    "slot-next-slot-taken": (SLOT, "        if stamp.slot > self._slot:",
                             "        if stamp.slot > self._slot + 1:"),
    "slot-fr-waits-f-gaps": (SLOT, "            if self._r_delivered < fr.stamp.order:",
                             "            if self._r_delivered < fr.stamp.order or self._f_waiting:"),
    "slot-r-not-counted": (SLOT, "            self._r_delivered += 1", "            pass"),
    # stability
    "stab-release-strict": (STAB,
        "        while buffer and (bound is None or buffer[0][0] <= bound):",
        "        while buffer and (bound is None or buffer[0][0] < bound):"),
    "stab-ack-max": ("stability/_receiver.py",
                     "            value = min(self._vector.values()) if self._vector else clock",
                     "            value = max(self._vector.values()) if self._vector else clock"),
    "stab-lamport-physical": ("stability/_node.py", "            ts = self._lamport",
                              "            ts = now"),
    "ack-vector-one-entry": ("group/_wire.py",
                             "    for name, value in sorted(ack.entries.items()):",
                             "    for name, value in sorted(ack.entries.items())[:1]:"),
    # merge and causal timestamps
    "merge-deadline-r-plus-c": (MERGE, "        self._wait = delta + epsilon",
                                "        self._wait = 0"),
    "merge-deadline-eps-early": (MERGE, "        self._wait = delta + epsilon",
                                 "        self._wait = delta"),
    "merge-deadline-2eps-late": (MERGE, "        self._wait = delta + epsilon",
                                 "        self._wait = delta + 3 * epsilon"),
    "merge-deadline-delta-twice": (MERGE, "        self._wait = delta + epsilon",
                                   "        self._wait = 2 * delta + epsilon"),
    "merge-wait-ignores-delta": (MERGE, "        self._wait = delta + epsilon",
                                 "        self._wait = epsilon"),
    "merge-ties-by-arrival": (MERGE,
        "            (due, envelope.stamp.tiebreak(), envelope.proc, envelope.msg, now, envelope),",
        "            (due, (now,), envelope.proc, envelope.msg, now, envelope),"),
    "merge-deadline-ignores-c": (MERGE, "        return stamp.r + stamp.c + self._wait",
                                 "        return stamp.r + self._wait"),
    "causal-kn-n-bits": ("causal/_wire.py", "        self._kbits = n.bit_length()",
                         "        self._kbits = n"),
    "causal-message-not-checked": (CAUSAL, "        if not check(m_c, m_kn, self.n):",
                                   "        if False:"),
}


def run_pass(tests: list[str], marker: str, src: Path, timeout: float) -> tuple[str, str]:
    """('failed', test) | ('passed', '') | ('timeout', '') | ('broken', why)."""
    env = dict(os.environ, PYTHONPATH=f"{src}{os.pathsep}{ROOT}",
               HYPOTHESIS_PROFILE=os.environ.get("HYPOTHESIS_PROFILE", "mutation"),
               PYTHONDONTWRITEBYTECODE="1", TIMEBOUND_PURE_PYTHON="1")
    cmd = [str(PYTHON), "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
           "-o", "addopts=", "-m", marker, *tests]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return "timeout", ""
    if proc.returncode in (0, 5):  # 5: no test of this kind in these files
        return "passed", ""
    failed = [line.split()[1] for line in out.splitlines() if line.startswith("FAILED ")]
    if proc.returncode == 1 and failed:
        return "failed", failed[0]
    errors = [line for line in out.splitlines() if line.startswith("ERROR ")]
    why = errors[0] if errors else f"pytest exit {proc.returncode}"
    return "broken", why[:100]


def check_copy_is_used(src: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(src))
    out = subprocess.run([str(PYTHON), "-c", "import timebound; print(timebound.__file__)"],
                         env=env, capture_output=True, text=True, check=True).stdout
    if not out.strip().startswith(str(src)):
        sys.exit(f"mutate: PYTHONPATH copy is not imported first ({out.strip()})")


def judge(tests: list[str], src: Path, timeout: float) -> str:
    """The verdict of one source tree (module docstring)."""
    status, what = run_pass(tests, "hypothesis", src, timeout)
    if status == "failed":
        return f"caught (property) by {what}"
    if status == "broken":
        return f"broken: {what}"
    property_timeout = status == "timeout"
    status, what = run_pass(tests, "not hypothesis", src, timeout)
    if status == "failed":
        return f"caught (hand) by {what}" + (" [properties timed out]"
                                             if property_timeout else "")
    if status == "broken":
        return f"broken: {what}"
    if status == "timeout" or property_timeout:
        return "timeout"
    return "SURVIVED"


def mutant_name(rel: str, original: str, replacement: str, nth: int | None = None) -> str:
    where = "" if nth is None else f" (occurrence {nth + 1})"
    return f"{rel}{where}: {original.strip()} -> {replacement.strip()}"


def mutant_lines(src: Path, mutant: Mutant) -> tuple[list[str], int | None]:
    """The lines of the mutant's file under ``src`` (a copy of ``src/``) and the index of
    the line it replaces (None: the original line is not there as the mutant says, a
    bad mutant: the core changed under it)."""
    rel, original = mutant[1], mutant[2]
    nth = mutant[4] if len(mutant) == 5 else None
    lines = (src / "timebound" / "core" / rel).read_text(encoding="utf-8").split("\n")
    hits = [i for i, line in enumerate(lines) if line == original]
    if (len(hits) != 1) if nth is None else (len(hits) <= nth):
        return lines, None
    return lines, hits[nth or 0]


def run_mutant(snapshot: Path, mutant: Mutant, timeout: float) -> str:
    protocol, rel, original, replacement = mutant[:4]
    tmp = Path(tempfile.mkdtemp(prefix="timebound-mutant-"))
    try:
        src = tmp / "src"
        shutil.copytree(snapshot, src)
        path = src / "timebound" / "core" / rel
        lines, at = mutant_lines(src, mutant)
        if at is None:
            return f"BAD MUTANT ({sum(line == original for line in lines)} matches)"
        lines[at] = replacement
        path.write_text("\n".join(lines), encoding="utf-8")
        return judge(TESTS[protocol], src, timeout)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="mutate.py", description=__doc__.split("\n")[0])
    parser.add_argument("protocols", nargs="*", metavar="PROTOCOL",
                        help=f"only these ({', '.join(TESTS)}); default every one")
    parser.add_argument("--jobs", type=int, default=2, help="mutants at a time (default 2)")
    parser.add_argument("--timeout", type=float, default=240,
                        help="seconds per test pass of one mutant (default 240)")
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.protocols) - set(TESTS))
    if unknown:
        parser.error(f"unknown protocol(s) {unknown}; choose from {', '.join(TESTS)}")
    if not 1 <= args.jobs <= 8:
        parser.error("--jobs must be in [1, 8]")
    wanted = set(args.protocols) or set(TESTS)
    mutants = [m for m in MUTANTS if m[0] in wanted]
    started = time.monotonic()
    header = []
    tmp = Path(tempfile.mkdtemp(prefix="timebound-mutate-"))
    try:
        snapshot = tmp / "src"
        shutil.copytree(ROOT / "src", snapshot,
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        check_copy_is_used(snapshot)
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "src/timebound/core"],
                               cwd=ROOT, capture_output=True, text=True).stdout.strip()
        header.append(f"# scripts/mutate.py {' '.join(argv)}".rstrip())
        header.append(f"# {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, HEAD {commit}"
                      f"{' + uncommitted core edits' if dirty else ''}, profile "
                      f"{os.environ.get('HYPOTHESIS_PROFILE', 'mutation')}, "
                      f"jobs {args.jobs}, timeout {args.timeout:g} s per pass")
        for line in header:
            print(line, flush=True)
        with ThreadPoolExecutor(args.jobs) as pool:
            baseline = dict(zip(sorted(wanted), pool.map(
                lambda p: judge(TESTS[p], snapshot, args.timeout), sorted(wanted))))
            for protocol, verdict in baseline.items():
                if verdict != "SURVIVED":
                    print(f"baseline of {protocol} is not green ({verdict}): "
                          "its mutants are not run", flush=True)
            runnable = [m for m in mutants if baseline[m[0]] == "SURVIVED"]
            futures = {m: pool.submit(run_mutant, snapshot, m, args.timeout)
                       for m in runnable}
            rows = []
            for m in mutants:
                verdict = futures[m].result() if m in futures else "not run (baseline red)"
                rows.append((mutant_name(m[1], m[2], m[3], m[4] if len(m) == 5 else None),
                             verdict))
                print(f"{verdict:<78} {rows[-1][0]}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.monotonic() - started
    count = {key: sum(1 for _, v in rows if v.startswith(key)) for key in (
        "caught (property)", "caught (hand)", "SURVIVED", "timeout", "broken", "BAD",
        "not run")}
    summary = (
        f"score: {count['caught (property)'] + count['caught (hand)']}/{len(rows)} caught "
        f"({count['caught (property)']} by a property test, {count['caught (hand)']} by a "
        f"hand test), {count['SURVIVED']} survived, {count['timeout']} timeout, "
        f"{count['broken']} broken, {count['BAD']} bad mutant(s), {count['not run']} not "
        f"run; {elapsed:.0f} s")
    survivors = [name for name, v in rows if v == "SURVIVED"]
    print(f"\n{summary}\nsurvivors: {survivors or 'none'}")
    if args.out is not None:
        table = [f"{v:<78} {name}" for name, v in rows]
        args.out.write_text("\n".join([*header, *table, "", summary,
                                        f"survivors: {survivors or 'none'}", ""]),
                            encoding="utf-8")
    caught = count["caught (property)"] + count["caught (hand)"]
    return 0 if caught == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
