"""Restart outage: callers through a lossy proxy, the server SIGKILLed
mid-load and restarted at once from the same storage.

Run: .venv/bin/python benchmarks/bench_restart.py [--smoke] [--callers N] [--seconds S]
[--beta B] [--no-marks] [--json PATH]

``timebound rpc serve timebound.net.examples:app --storage DIR/latest.json`` runs as a
subprocess with ``$TIMEBOUND_LEDGER`` naming its execution ledger (the ``record``
handler appends each payload it runs). A ``FaultProxy`` in this process (10% loss,
10% duplication, both directions) sits in front of it; N callers, each its own
``RpcClient``, make sequential ``record`` calls with distinct payloads through it.
After ``--warmup`` seconds the server is SIGKILLed and a new one started at once on
the same port and storage (the proxy keeps its upstream address); the callers go on
for ``--seconds`` after the new server announced itself, then stop (a call in
flight finishes or times out).

Reported: every call's outcome (success; refused ``down`` or ``stale``: outcome
unknown; refused ``early``, ``overloaded`` or ``expired``: did not run; timeout:
outcome unknown), the fraction of calls with an unknown outcome, for each caller the
time from the restart (the new server's ready line) until its first success after
the kill, their median (p50), p99 and max (the time until every caller is served
again), the same less each caller's own wait at the ready line (until its
outstanding call's next retransmission, or its next call: what is left of its
current retransmission interval; so what the restart itself costs, about a round
trip, more where the proxy drops a datagram), and the duplicate executions in the ledger (a payload run twice; a success missing from
the ledger counts too): the script exits 1 if there is any.

Incarnation marks (the server's default; ``--no-marks`` runs the paper's rule): each
call records the incarnation its client had heard of when it was issued (its mark)
and when it ended. Reported: the calls refused ``down`` or ``stale`` that were made
after their client heard from the new server (the marked rule says: none), and for each caller
the time from hearing from the new server (the end of the call that brought its id)
until its first success (within about one round trip: the next call runs).

Every process it starts is killed and reaped on every exit path (and dies with this
process on Linux: ``PR_SET_PDEATHSIG``); its files live in a temporary directory,
removed at the end. Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import ctypes
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from timebound.net import (
    STATS_PROCEDURE,
    CallRejected,
    CallTimeout,
    FaultProxy,
    Faults,
    RemoteError,
    RpcClient,
    RpcError,
)
from timebound.net._server import DEFAULT_BETA, DEFAULT_LATEST_EVERY

HOST = "127.0.0.1"
#: Outcomes, in the table's order: (name, what the caller knows).
OUTCOMES = (("ok", "ran once"), ("down", "unknown"), ("stale", "unknown"),
            ("timeout", "unknown"), ("early", "did not run"),
            ("overloaded", "did not run"), ("expired", "did not run"),
            ("error", "handler or driver error"))
UNKNOWN = ("down", "stale", "timeout")
REFUSED_UNKNOWN = ("down", "stale")
#: Most calls one caller makes (a bound on top of the time bound).
MAX_CALLS_PER_CALLER = 200_000
#: Seconds a server may take to print its ready line.
START_TIMEOUT = 20.0


@dataclass
class Call:
    """One call: when it was issued and ended (monotonic seconds) and its outcome."""

    caller: int
    payload: bytes
    issued: float
    ended: float = 0.0
    outcome: str = ""
    mark: int = 0  # the incarnation the client had heard of at issue (the call's mark)
    heard: int = 0  # ... and at the end


@dataclass
class Run:
    """What the load saw: every call and the restart's moments."""

    calls: list[Call] = field(default_factory=list)
    killed: float = 0.0
    killed_us: int = 0  # the same moment on the servers' clock (µs since the epoch)
    restarted: float = 0.0  # the new server's ready line was read
    stopped: float = 0.0
    proxy: dict[str, int] = field(default_factory=dict)
    server_stats: dict[str, Any] | None = None
    clients: dict[int, RpcClient] = field(default_factory=dict)  # caller -> its client
    # Per caller, seconds from the ready line until its next retransmission (or its
    # next call, after its pause): its current retransmission interval's remainder.
    retry_in: list[float] = field(default_factory=list)


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL it when this (single-threaded) process dies,
    so a killed benchmark leaves no server behind."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Servers:
    """The ``timebound rpc serve`` processes of one run; ``close`` kills and reaps all."""

    def __init__(self, workdir: Path, args: list[str], env: dict[str, str]) -> None:
        self.workdir = workdir
        self.args = args
        self.env = env
        self.procs: list[subprocess.Popen[bytes]] = []
        self._files: list[IO[bytes]] = []

    async def start(self, port: int = 0) -> tuple[subprocess.Popen[bytes], tuple[str, int]]:
        """Start one server (on ``port``, 0: any) and wait for its ready line."""
        n = len(self.procs)
        out_path = self.workdir / f"server{n}.out"
        err_path = self.workdir / f"server{n}.err"
        out = open(out_path, "wb")  # closed in close()
        err = open(err_path, "wb")
        self._files += [out, err]
        cmd = [sys.executable, "-m", "timebound.cli", "rpc", "serve", *self.args,
               "--host", HOST, "--port", str(port)]
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                env=self.env,
                                preexec_fn=_die_with_parent if sys.platform == "linux" else None)
        self.procs.append(proc)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            text = out_path.read_bytes().decode(errors="replace")
            for line in text.splitlines():
                if line.startswith("listening on udp://") and text.endswith("\n"):
                    host, _, port_text = line.removeprefix("listening on udp://").rpartition(":")
                    return proc, (host.strip("[]"), int(port_text))
            if proc.poll() is not None:
                raise RuntimeError(f"server exited {proc.returncode}: "
                                   f"{err_path.read_text(errors='replace')[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"server not ready in {START_TIMEOUT} s")
            await asyncio.sleep(0.005)

    async def kill(self, proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL ``proc`` and reap it without blocking the loop."""
        proc.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 10
        while proc.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.002)

    def stderr_lines(self) -> list[str]:
        """The servers' stderr lines, each prefixed with its server's index."""
        lines = []
        for n in range(len(self.procs)):
            path = self.workdir / f"server{n}.err"
            if path.exists():
                lines += [f"server{n}: {x}" for x in path.read_text(errors="replace").splitlines()]
        return lines

    def close(self) -> None:
        """SIGTERM every live server (a clean stop), SIGKILL it if it lingers; reap all."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        for f in self._files:
            f.close()
        self._files.clear()


async def caller(index: int, address: tuple[str, int], run: Run, stop: asyncio.Event,
                 *, timeout: float, pause: float, interval: float) -> None:
    """Sequential ``record`` calls with distinct payloads until ``stop`` is set."""
    async with RpcClient(address, interval=interval) as client:
        run.clients[index] = client
        for n in range(MAX_CALLS_PER_CALLER):
            if stop.is_set():
                return
            call = Call(index, b"c%d-%d" % (index, n), time.monotonic(),
                        mark=client.caller.incarnation)
            run.calls.append(call)
            try:
                await client.call("record", call.payload, timeout=timeout)
                call.outcome = "ok"
            except CallTimeout:
                call.outcome = "timeout"
            except CallRejected as exc:
                call.outcome = exc.reason if exc.reason in dict(OUTCOMES) else "error"
            except (RemoteError, RpcError):
                call.outcome = "error"
            call.ended = time.monotonic()
            call.heard = client.caller.incarnation
            if pause:
                await asyncio.sleep(pause)


def _retry_in(client: RpcClient | None, pause: float) -> float:
    """Seconds until ``client`` next sends its outstanding call (its retransmission
    schedule), or ``pause`` when it has none (it makes its next call then)."""
    if client is None:
        return pause
    due = client.caller.client.next_deadline()
    return pause if due is None else max(0.0, (due - client.clock.now()) / 1e6)


async def load(servers: Servers, args: argparse.Namespace) -> Run:
    """Start the server and proxy, run the callers, kill and restart mid-load."""
    run = Run()
    first, address = await servers.start()
    faults = Faults(loss=args.loss, duplicate=args.duplicate)
    async with FaultProxy(address, faults, seed=args.seed) as proxy:
        stop = asyncio.Event()
        tasks = [asyncio.ensure_future(caller(i, proxy.address, run, stop, timeout=args.timeout,
                                              pause=args.pause, interval=args.interval))
                 for i in range(args.callers)]
        try:
            await asyncio.sleep(args.warmup)
            if args.kill_phase is not None:
                period = args.latest_every or DEFAULT_LATEST_EVERY
                phase = time.time_ns() // 1000 % period
                await asyncio.sleep(((args.kill_phase * period - phase) % period) / 1e6)
            run.killed = time.monotonic()
            run.killed_us = time.time_ns() // 1000
            await servers.kill(first)
            await servers.start(port=address[1])  # same port: the proxy's upstream
            run.restarted = time.monotonic()
            run.retry_in = [_retry_in(run.clients.get(i), args.pause)
                            for i in range(args.callers)]
            await asyncio.sleep(args.seconds)
            stop.set()
            run.stopped = time.monotonic()
            await asyncio.wait_for(asyncio.gather(*tasks), args.timeout + 10)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        run.proxy = {k: int(v) for k, v in vars(proxy.stats).items()}
    with contextlib.suppress(RpcError, OSError, ValueError):
        async with RpcClient(address) as direct:
            run.server_stats = json.loads(await direct.call(STATS_PROCEDURE, timeout=2.0))
    return run


def summarize(run: Run, ledger: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The figures of one run (all JSON-serializable)."""
    done = [c for c in run.calls if c.outcome]  # cancelled ones (none normally) left out
    counts = collections.Counter(c.outcome for c in done)
    total = len(done)
    executed = collections.Counter(ledger.read_bytes().split()) if ledger.exists() else {}
    twice = sorted(p.decode() for p, k in executed.items() if k > 1)
    missing = sorted(c.payload.decode() for c in done
                     if c.outcome == "ok" and executed.get(c.payload, 0) != 1)
    served: list[float | None] = []
    # Each caller's calls that ended after the kill, up to its first success: what
    # kept it waiting (seconds from the restart: issued, ended; the outcome).
    waits: list[list[tuple[float, float, str]]] = []
    for i in range(args.callers):
        mine = sorted((c for c in done if c.caller == i and c.ended >= run.killed),
                      key=lambda c: c.issued)
        oks = [c.ended for c in mine if c.outcome == "ok" and c.issued >= run.killed]
        served.append(round(min(oks) - run.restarted, 4) if oks else None)
        first = min(oks) if oks else float("inf")
        waits.append([(round(c.issued - run.restarted, 3), round(c.ended - run.restarted, 3),
                       c.outcome) for c in mine if c.ended <= first][:50])
    known = [s for s in served if s is not None]
    # Served again beyond the caller's own next send: the round trips the restart
    # costs once the caller's retransmission schedule brings its call back.
    beyond = [None if s is None else round(max(0.0, s - r), 4)
              for s, r in zip(served, run.retry_in or [0.0] * len(served), strict=True)]
    after_restart = [c for c in done if c.issued >= run.restarted]
    down_after = [c.issued - run.restarted for c in after_restart if c.outcome == "down"]
    new = int((run.server_stats or {}).get("incarnation") or 0)
    # Each caller: when it heard from the new incarnation (the end of the call that
    # brought its id) and how long until its first success after that.
    after_heard: list[float | None] = []
    for i in range(args.callers):
        mine = [c for c in done if c.caller == i]
        heard = min((c.ended for c in mine if new and c.heard == new), default=None)
        oks = [c.ended for c in mine if c.outcome == "ok" and c.issued >= run.killed]
        if heard is None or not oks:
            after_heard.append(None)
            continue
        after_heard.append(round(max(0.0, min(e for e in oks if e >= heard)
                                     - heard) if max(oks) >= heard else float("inf"), 4))
    made_after = [c for c in done if new and c.mark == new]
    beta = args.beta if args.beta is not None else DEFAULT_BETA
    period = args.latest_every or DEFAULT_LATEST_EVERY
    phase = run.killed_us % period
    return {
        "config": {"callers": args.callers, "seconds": args.seconds, "warmup": args.warmup,
                   "beta_us": args.beta if args.beta is not None else DEFAULT_BETA,
                   "beta_given": args.beta is not None,
                   "latest_every_us": period, "kill_phase": args.kill_phase,
                   "loss": args.loss,
                   "duplicate": args.duplicate, "timeout": args.timeout,
                   "pause": args.pause, "interval": args.interval, "seed": args.seed,
                   "smoke": args.smoke, "marks": not args.no_marks},
        "calls": total,
        "outcomes": {name: counts.get(name, 0) for name, _ in OUTCOMES},
        "refused_unknown": sum(counts.get(k, 0) for k in REFUSED_UNKNOWN),
        "refused_unknown_fraction": (sum(counts.get(k, 0) for k in REFUSED_UNKNOWN) / total
                                     if total else 0.0),
        "unknown": sum(counts.get(k, 0) for k in UNKNOWN),
        "unknown_fraction": sum(counts.get(k, 0) for k in UNKNOWN) / total if total else 0.0,
        "incarnation": new,
        "calls_made_after_hearing": len(made_after),
        "refused_unknown_made_after_hearing": sum(c.outcome in REFUSED_UNKNOWN
                                                  for c in made_after),
        "not_ok_made_after_hearing": collections.Counter(
            c.outcome for c in made_after if c.outcome != "ok"),
        "served_after_hearing_s": after_heard,
        "served_after_hearing_median_s": _finite(statistics.median(
            [s if s is not None else float("inf") for s in after_heard])),
        "served_after_hearing_max_s": (max(s for s in after_heard if s is not None)
                                       if all(s is not None for s in after_heard)
                                       else None),
        "refused_unknown_calls": [
            {"caller": c.caller, "issued_s": round(c.issued - run.restarted, 4),
             "ended_s": round(c.ended - run.restarted, 4), "outcome": c.outcome,
             "marked_new": bool(new) and c.mark == new,
             "heard_new_at_end": bool(new) and c.heard == new}
            for c in done if c.outcome in REFUSED_UNKNOWN][:50],
        "calls_after_restart": len(after_restart),
        "down_after_restart": len(down_after),
        "last_down_issued_after_restart_s": round(max(down_after), 4) if down_after else None,
        "restart_s": round(run.restarted - run.killed, 4),
        # latest on storage at the kill: the last refresh (a multiple of latest_every)
        # plus beta, if that refresh's write had landed (deferred writes take ms)
        "kill_phase_s": phase / 1e6,
        "recovered_bound_after_kill_s": (beta - phase) / 1e6,
        "served_again_s": served,
        "served_again_median_s": _finite(statistics.median(
            [s if s is not None else float("inf") for s in served])),
        "served_again_p99_s": _p99(served),
        "served_again_max_s": max(known) if known and len(known) == len(served) else None,
        "never_served_again": len(served) - len(known),
        # One round trip as the callers see it here (through the proxy, in this
        # process's loop): the median latency of the successful calls before the kill.
        "round_trip_before_kill_s": _finite(statistics.median(
            [c.ended - c.issued for c in done if c.outcome == "ok" and c.ended < run.killed]
            or [float("inf")])),
        "retry_in_s": [round(r, 4) for r in run.retry_in],
        "served_beyond_retry_s": beyond,
        "served_beyond_retry_median_s": _finite(statistics.median(
            [s if s is not None else float("inf") for s in beyond])),
        "served_beyond_retry_p99_s": _p99(beyond),
        "calls_until_served_again": waits,
        "executions": sum(executed.values()),
        "duplicate_executions": sum(k - 1 for k in executed.values() if k > 1),
        "duplicated_payloads": twice[:20],
        "successes_not_executed_once": missing[:20],
        "proxy": run.proxy,
        "server_stats": run.server_stats,
    }


def _finite(value: float) -> float | None:
    return None if value == float("inf") else round(value, 4)


def _p99(values: list[float | None]) -> float | None:
    """The 99th percentile (nearest rank) of per-caller times, a caller never served
    counting as infinitely late (None: no value, or that percentile never served)."""
    ranked = sorted(float("inf") if v is None else v for v in values)
    if not ranked:
        return None
    return _finite(ranked[min(len(ranked) - 1, -(-99 * len(ranked) // 100) - 1)])


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.3f} s"


def report(figures: dict[str, Any]) -> None:
    """The compact table on stdout."""
    cfg = figures["config"]
    total = figures["calls"] or 1
    beta = f"{cfg['beta_us'] / 1e6:g} s" + ("" if cfg["beta_given"] else " (default)")
    print(f"restart outage: {cfg['callers']} callers through loss {cfg['loss']:g} / "
          f"duplication {cfg['duplicate']:g}, SIGKILL after {cfg['warmup']:g} s, "
          f"{cfg['seconds']:g} s after the restart, beta {beta}, call timeout "
          f"{cfg['timeout']:g} s")
    print(f"{'outcome':<12}{'calls':>8}{'share':>8}  caller knows")
    for name, meaning in OUTCOMES:
        n = figures["outcomes"][name]
        if n or name in ("ok", "down", "stale", "timeout"):
            print(f"{name:<12}{n:>8}{n / total:>8.1%}  {meaning}")
    print(f"{'total':<12}{figures['calls']:>8}")
    print(f"refused with unknown outcome (down+stale): {figures['refused_unknown']} "
          f"({figures['refused_unknown_fraction']:.1%}); unknown incl. timeouts: "
          f"{figures['unknown']} ({figures['unknown_fraction']:.1%})")
    print(f"kill {figures['kill_phase_s']:.3f} s after a latest refresh (every "
          f"{cfg['latest_every_us'] / 1e6:g} s): recovered bound about kill + "
          f"{figures['recovered_bound_after_kill_s']:.3f} s")
    print(f"restart (kill -> new server ready): {figures['restart_s']:.3f} s; calls issued "
          f"after it {figures['calls_after_restart']}, of them refused down "
          f"{figures['down_after_restart']} (last issued "
          f"{_seconds(figures['last_down_issued_after_restart_s'])} after the restart)")
    times = " ".join("never" if s is None else f"{s:.2f}" for s in figures["served_again_s"])
    print(f"served again after the restart, per caller (s): {times}")
    print(f"served again: median (p50) {_seconds(figures['served_again_median_s'])}, p99 "
          f"{_seconds(figures['served_again_p99_s'])}, max "
          f"{_seconds(figures['served_again_max_s'])} (every caller), never "
          f"{figures['never_served_again']}")
    print(f"beyond each caller's next send at the ready line (its retransmission "
          f"interval's remainder, p50 {_seconds(_median(figures['retry_in_s']))}): "
          f"p50 {_seconds(figures['served_beyond_retry_median_s'])}, p99 "
          f"{_seconds(figures['served_beyond_retry_p99_s'])}; one call's round trip before "
          f"the kill (median) {_seconds(figures['round_trip_before_kill_s'])}")
    if cfg["marks"]:
        print(f"incarnation marks on: {figures['calls_made_after_hearing']} calls made after "
              f"their caller heard from the new server, of them refused down or stale "
              f"{figures['refused_unknown_made_after_hearing']}, not ok "
              f"{sum(figures['not_ok_made_after_hearing'].values())} "
              f"{dict(figures['not_ok_made_after_hearing'])}")
        print(f"served after hearing from the new server: median "
              f"{_seconds(figures['served_after_hearing_median_s'])}, max "
              f"{_seconds(figures['served_after_hearing_max_s'])} (every caller)")
    else:
        print("incarnation marks off (--no-marks): the paper's rule")
    print(f"executions {figures['executions']}, duplicate executions "
          f"{figures['duplicate_executions']}, successes not run exactly once "
          f"{len(figures['successes_not_executed_once'])}")
    stats = figures["server_stats"] or {}
    keys = ("down", "stale", "early", "duplicates", "executions")
    if stats:
        print("restarted server: " + ", ".join(f"{k} {stats[k]}" for k in keys if k in stats))


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The options; ``--smoke`` fills in the small sizes not given."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true",
                        help="4 callers, 0.5 s warm-up, 1.5 s after the restart, beta 1 s, "
                             "latest every 0.1 s")
    parser.add_argument("--callers", type=int, default=None, help="callers (default 16)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="seconds of load after the restart (default 5)")
    parser.add_argument("--warmup", type=float, default=None,
                        help="seconds of load before the SIGKILL (default 1.5)")
    parser.add_argument("--beta", type=int, default=None,
                        help="the server's --beta, µs ticks (default: the server's, 2 s)")
    parser.add_argument("--latest-every", type=int, default=None,
                        help="the server's --latest-every, µs ticks (default: the "
                             "server's, 1 s; keep it below beta, or calls are refused "
                             "early between a refresh and the next)")
    parser.add_argument("--kill-phase", type=float, default=None,
                        help="kill at this fraction (0..1) of a latest-every period "
                             "after a refresh (default: right after the warm-up); "
                             "the outage is about beta minus the phase")
    parser.add_argument("--timeout", type=float, default=2.0, help="call timeout, s")
    parser.add_argument("--pause", type=float, default=0.005,
                        help="seconds a caller waits between its calls")
    parser.add_argument("--interval", type=float, default=0.02,
                        help="first retransmission interval, s")
    parser.add_argument("--loss", type=float, default=0.10)
    parser.add_argument("--duplicate", type=float, default=0.10)
    parser.add_argument("--seed", type=int, default=1, help="the proxy's seed")
    parser.add_argument("--no-marks", action="store_true",
                        help="serve with --no-marks: the paper's rule after a restart "
                             "(the 'before' of incarnation marks)")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    small = args.smoke
    args.callers = args.callers if args.callers is not None else (4 if small else 16)
    args.seconds = args.seconds if args.seconds is not None else (1.5 if small else 5.0)
    args.warmup = args.warmup if args.warmup is not None else (0.5 if small else 1.5)
    if args.beta is None and small:
        args.beta = 1_000_000
    if args.latest_every is None and small:
        args.latest_every = 100_000
    if args.latest_every is not None and args.latest_every < 1:
        parser.error("--latest-every must be >= 1")
    if args.kill_phase is not None and not 0 <= args.kill_phase < 1:
        parser.error("--kill-phase must be in [0, 1)")
    if not 1 <= args.callers <= 1024:
        parser.error("--callers must be in 1..1024")
    for name in ("seconds", "warmup", "timeout"):
        if not 0 < getattr(args, name) <= 600:
            parser.error(f"--{name} must be in (0, 600]")
    if args.beta is not None and args.beta < 0:
        parser.error("--beta must be >= 0")
    if args.json is not None and (args.json.is_dir()
                                  or not args.json.resolve().parent.is_dir()
                                  or not os.access(args.json.resolve().parent, os.W_OK)):
        parser.error(f"--json: cannot write {args.json} (a file in an existing, "
                     "writable folder)")
    return args


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # so the finally blocks reap the servers


def main(argv: list[str] | None = None) -> int:
    """Run once; 0 when no call ran twice and (marks on) no call made after its
    caller heard from the new server was refused with an unknown outcome, else 1."""
    args = parse(argv)
    signal.signal(signal.SIGTERM, _terminate)
    with tempfile.TemporaryDirectory(prefix="bench_restart.") as tmp:
        workdir = Path(tmp)
        ledger = workdir / "ledger"
        serve = ["timebound.net.examples:app", "--storage", str(workdir / "latest.json")]
        if args.beta is not None:
            serve += ["--beta", f"{args.beta}us"]
        if args.latest_every is not None:
            serve += ["--latest-every", f"{args.latest_every}us"]
        if args.no_marks:
            serve += ["--no-marks"]
        env = dict(os.environ, TIMEBOUND_LEDGER=str(ledger))
        servers = Servers(workdir, serve, env)
        try:
            budget = args.warmup + START_TIMEOUT + args.seconds + args.timeout + 30
            run = asyncio.run(asyncio.wait_for(load(servers, args), budget))
        finally:
            servers.close()
        figures = summarize(run, ledger, args)
        figures["server_stderr"] = servers.stderr_lines()[:20]
    report(figures)
    if args.json is not None:
        try:
            args.json.write_text(json.dumps(figures, indent=2) + "\n")
        except OSError as exc:
            print(f"bench_restart.py: error: --json: {exc}", file=sys.stderr)
            return 2
    bad = figures["duplicate_executions"] or figures["successes_not_executed_once"]
    if bad:
        print("FAIL: a call ran twice (or a success did not run exactly once)",
              file=sys.stderr)
    if figures["refused_unknown_made_after_hearing"]:
        bad = True
        print("FAIL: a call made after its caller heard from the new server was refused "
              "with an unknown outcome", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # the servers are reaped and the folder removed already
        print("bench_restart.py: interrupted", file=sys.stderr)
        sys.exit(130)
