"""Live check ``rpc`` (``python -m timebound.net.live rpc``): at-most-once RPC under
loss, duplication and a SIGKILL of the server (SCMP §2.3, §2.4, §3.1).

What runs, all on 127.0.0.1 with ports the system picks:

- ``timebound rpc serve timebound.net.examples:app --no-marks`` in a process of its
  own (so that it can be SIGKILLed), with ``latest`` on a storage file, ``--beta``
  ``BETA`` and ``--latest-every`` ``LATEST_EVERY``; its ``record`` handler appends
  the call's payload to the execution ledger (``$TIMEBOUND_LEDGER``, one
  ``O_APPEND`` write per execution, so the ledger survives the SIGKILL). The paper's
  rule after a restart (``--no-marks``): every call stamped at or below the
  recovered bound is refused ``down``.
- A ``FaultProxy`` in this process in front of it, dropping and duplicating
  ``LOSS`` and ``DUPLICATE`` of the datagrams in both directions (its draws seeded
  by the seed), and ``Size.callers`` callers, each its own ``RpcClient`` (its own
  connections), making sequential ``record`` calls through it, each with a payload
  no other call has (the call's id in the ledger) and the client's retransmissions.
- After ``Size.before_kill`` seconds the server is SIGKILLed mid-load and a second
  server started on the same port and storage (the proxy keeps its upstream
  address; the callers keep calling). The second server's process is started with
  the first and waits, its imports done, for the word to bind: the restart costs a
  bind and a read of the storage file, not an interpreter start. The callers stop
  ``Size.after`` seconds after t_cr + beta (t_cr: the kill, on the clients' and
  server's common clock); a call in flight then finishes or times out.

Runs (``measure`` returns both):

- ``loss``: the calls that ended before the kill (the lossy, duplicating network
  alone);
- ``kill``: the calls in flight at the kill or issued after it.

Measures of each run: ``calls``, ``answered``, ``timeouts``, ``refused``;
``executions`` (ledger lines of the run's calls), ``duplicates`` (executions beyond
one per call id: SCMP's at-most-once says 0), ``answered_not_run_once`` (answered
calls whose id is not in the ledger exactly once); the proxy's ``datagrams_lost``
and ``datagrams_duplicated`` over the run's span; ``server_duplicates``: the
server's own count of duplicate call datagrams it caught (read with
``timebound.stats`` from the first server just before the kill, and from the second
at the end). ``kill`` adds ``restart_s`` (kill to the second server's ready line),
``beta_s``, ``refused_down`` (calls refused ``down`` or ``stale`` by the second
server: the recovered bound at work), ``sent_after_crash_beta``
(calls issued after t_cr + beta), ``refused_after_crash_beta`` (of those, refused
``down``, ``stale`` or ``early``: SCMP §2.4 says 0) and ``answered_after_crash_beta``.

Every process started here is killed and reaped on every exit path (and dies with
this one on Linux: ``PR_SET_PDEATHSIG``); the files live in a temporary directory.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ctypes
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from timebound.net._client import RpcClient
from timebound.net._clock import Clock
from timebound.net._errors import CallRejected, CallTimeout, RpcError
from timebound.net._loop import run as run_loop
from timebound.net._proxy import FaultProxy, Faults
from timebound.net._server import STATS_PROCEDURE

HOST = "127.0.0.1"
#: Share of datagrams the proxy drops, and duplicates, in each direction.
LOSS = 0.10
DUPLICATE = 0.10
#: How often the server writes latest = now + beta to its storage, µs.
LATEST_EVERY_US = 100_000
#: The retransmission interval of the callers' clients, s.
INTERVAL = 0.02
#: Seconds a server may take to print its ready line (a loaded machine).
START_TIMEOUT = 30.0
#: Refusals that the at-most-once rule makes (the crash row counts these).
AT_MOST_ONCE_REFUSALS = ("down", "stale", "early")
#: The server process: imports what ``timebound rpc serve`` will need (the command
#: line's parsers, the handlers, the event loop), then waits for one line (extra
#: options: ``--port N``) and runs the command: a restart then takes tens of ms.
_SERVE = "\n".join((
    "import sys, encodings.idna, timebound.cli as cli, timebound.net.examples",
    "try:\n    import uvloop\nexcept ImportError:\n    pass",
    "cli.build_parser(\"rpc\")",
    "extra = sys.stdin.readline().split()",
    "sys.exit(cli.main(sys.argv[1:] + extra))"))


@dataclass(frozen=True)
class Size:
    """One size of the check: ``callers`` clients; the kill after ``before_kill`` s;
    ``beta_us``; the callers stop ``after`` s past t_cr + beta; ``timeout``: each
    call's, s."""

    callers: int
    before_kill: float
    beta_us: int
    after: float
    timeout: float


FULL = Size(callers=16, before_kill=1.5, beta_us=1_000_000, after=1.0, timeout=1.5)
QUICK = Size(callers=8, before_kill=0.35, beta_us=500_000, after=0.25, timeout=1.0)


@dataclass
class _Call:
    payload: bytes
    issued_us: int  # the clients' clock (µs) just before the call: <= its timestamp
    issued: float  # monotonic
    ended: float = 0.0
    outcome: str = ""


@dataclass
class _Load:
    calls: list[_Call] = field(default_factory=list)
    killed: float = 0.0  # monotonic
    killed_us: int = 0  # the same moment on the clock the server and clients share
    restarted: float = 0.0
    restarted_us: int = 0
    proxy_at_kill: dict[str, int] = field(default_factory=dict)
    proxy_at_end: dict[str, int] = field(default_factory=dict)
    stats_before: dict[str, Any] = field(default_factory=dict)
    stats_after: dict[str, Any] = field(default_factory=dict)


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL it when this process dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class _Servers:
    """The server processes of one check; ``close`` stops and reaps them all."""

    def __init__(self, workdir: Path, args: list[str], env: dict[str, str]) -> None:
        self.workdir = workdir
        self.args = args
        self.env = env
        self.procs: list[subprocess.Popen[bytes]] = []
        self._files: list[IO[bytes]] = []

    def spawn(self) -> int:
        """Start a server process that imports and waits for ``go``; its index."""
        n = len(self.procs)
        out = open(self.workdir / f"server{n}.out", "wb")  # closed in close()
        self._files.append(out)
        err = open(self.workdir / f"server{n}.err", "wb")
        self._files.append(err)
        proc = subprocess.Popen(
            [sys.executable, "-c", _SERVE, "rpc", "serve", *self.args],
            stdin=subprocess.PIPE, stdout=out, stderr=err, env=self.env,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None)
        self.procs.append(proc)
        return n

    async def go(self, n: int, port: int) -> tuple[str, int]:
        """Let server ``n`` bind ``port`` (0: any); its address once it is ready."""
        proc = self.procs[n]
        assert proc.stdin is not None
        proc.stdin.write(b"--port %d\n" % port)
        proc.stdin.flush()
        out_path = self.workdir / f"server{n}.out"
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            text = out_path.read_bytes().decode(errors="replace")
            if text.startswith("listening on udp://") and "\n" in text:
                line = text.splitlines()[0].removeprefix("listening on udp://")
                host, _, port_text = line.rpartition(":")
                return host.strip("[]"), int(port_text)
            if proc.poll() is not None:
                err = (self.workdir / f"server{n}.err").read_text(errors="replace")
                raise RuntimeError(f"server exited {proc.returncode}: {err[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"server not ready in {START_TIMEOUT} s")
            await asyncio.sleep(0.005)

    async def kill(self, n: int) -> None:
        """SIGKILL server ``n`` and reap it without blocking the loop."""
        proc = self.procs[n]
        proc.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 10
        while proc.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.002)

    def close(self) -> None:
        """SIGTERM every live server (a clean stop; one still waiting for ``go``
        just ends), SIGKILL it if it lingers; reap all, close their files."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
        for f in self._files:
            f.close()
        self._files.clear()


async def _caller(index: int, seed: int, address: tuple[str, int], load: _Load,
                  stop: asyncio.Event, size: Size) -> None:
    """Sequential ``record`` calls with payloads no other call has, until ``stop``;
    a seeded pause (0-2 ms) between calls."""
    rng = random.Random(seed * 1000 + index)
    async with RpcClient(address, interval=INTERVAL) as client:
        n = 0
        while not stop.is_set():
            call = _Call(b"c%d-%d" % (index, n), client.clock.now(), time.monotonic())
            n += 1
            load.calls.append(call)
            try:
                await client.call("record", call.payload, timeout=size.timeout)
                call.outcome = "ok"
            except CallTimeout:
                call.outcome = "timeout"
            except CallRejected as exc:
                call.outcome = exc.reason
            except RpcError:
                call.outcome = "error"
            call.ended = time.monotonic()
            await asyncio.sleep(rng.uniform(0.0, 0.002))


async def _stats(address: tuple[str, int]) -> dict[str, Any]:
    """The server's counters (``timebound.stats``, straight to it, not through the
    proxy); empty if it does not answer."""
    with contextlib.suppress(RpcError, OSError, ValueError):
        async with RpcClient(address) as direct:
            stats: dict[str, Any] = json.loads(await direct.call(STATS_PROCEDURE,
                                                                 timeout=2.0))
            return stats
    return {}


async def _load(seed: int, size: Size, servers: _Servers) -> _Load:
    load = _Load()
    clock = Clock()
    first, standby = servers.spawn(), servers.spawn()
    address = await servers.go(first, 0)
    faults = Faults(loss=LOSS, duplicate=DUPLICATE)
    async with FaultProxy(address, faults, seed=seed) as proxy:
        stop = asyncio.Event()
        tasks = [asyncio.ensure_future(_caller(i, seed, proxy.address, load, stop, size))
                 for i in range(size.callers)]
        try:
            await asyncio.sleep(size.before_kill)
            load.stats_before = await _stats(address)
            load.proxy_at_kill = dict(vars(proxy.stats))
            load.killed_us = clock.now()
            load.killed = time.monotonic()
            await servers.kill(first)
            await servers.go(standby, address[1])  # same port: the proxy's upstream
            load.restarted = time.monotonic()
            load.restarted_us = clock.now()
            end_us = load.killed_us + size.beta_us + round(size.after * 1e6)
            await asyncio.sleep(max(0.0, (end_us - clock.now()) / 1e6))
            stop.set()
            # asyncio.wait, not wait_for(gather(...)): cancelled (SIGTERM), wait_for
            # leaves the gathering future's CancelledError unretrieved, on stderr
            ended, late = await asyncio.wait(tasks, timeout=size.timeout + 5.0)
            for task in ended:
                task.result()  # a caller's failure is the check's
            if late:
                raise TimeoutError(f"{len(late)} callers still calling "
                                   f"{size.timeout + 5.0} s after the stop")
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        load.proxy_at_end = dict(vars(proxy.stats))
    load.stats_after = await _stats(address)
    return load


def _run_measures(calls: list[_Call], executed: collections.Counter[bytes]) -> dict[str, float]:
    outcomes = collections.Counter(c.outcome for c in calls)
    runs = [executed.get(c.payload, 0) for c in calls]
    return {
        "calls": len(calls),
        "answered": outcomes["ok"],
        "timeouts": outcomes["timeout"],
        "refused": len(calls) - outcomes["ok"] - outcomes["timeout"],
        "executions": sum(runs),
        "duplicates": sum(k - 1 for k in runs if k > 1),
        "answered_not_run_once": sum(1 for c, k in zip(calls, runs)
                                     if c.outcome == "ok" and k != 1),
    }


def summarize(load: _Load, ledger: Path, beta_us: int) -> dict[str, dict[str, float]]:
    """The runs ``loss`` and ``kill`` of one load (see the module's docstring)."""
    executed = collections.Counter(ledger.read_bytes().split()) if ledger.exists() \
        else collections.Counter()
    done = [c for c in load.calls if c.outcome]
    before = [c for c in done if c.ended < load.killed]
    after = [c for c in done if c.ended >= load.killed]
    loss = _run_measures(before, executed)
    kill = _run_measures(after, executed)
    at_kill, at_end = load.proxy_at_kill, load.proxy_at_end
    for run, lo, hi in ((loss, {}, at_kill), (kill, at_kill, at_end)):
        run["datagrams_lost"] = hi.get("lost", 0) - lo.get("lost", 0)
        run["datagrams_duplicated"] = hi.get("duplicated", 0) - lo.get("duplicated", 0)
    loss["server_duplicates"] = float(load.stats_before.get("duplicates", float("nan")))
    kill["server_duplicates"] = float(load.stats_after.get("duplicates", float("nan")))
    late = [c for c in after if c.issued_us > load.killed_us + beta_us]
    kill.update({
        "restart_s": round(load.restarted - load.killed, 4),
        "beta_s": beta_us / 1e6,
        "refused_down": sum(1 for c in after if c.outcome in ("down", "stale")),
        "sent_after_crash_beta": len(late),
        "refused_after_crash_beta": sum(1 for c in late
                                        if c.outcome in AT_MOST_ONCE_REFUSALS),
        "answered_after_crash_beta": sum(1 for c in late if c.outcome == "ok"),
    })
    return {"loss": loss, "kill": kill}


def measure(seed: int, quick: bool) -> dict[str, dict[str, float]]:
    """Run the check once on ``seed`` (``QUICK`` or ``FULL`` size); its runs."""
    size = QUICK if quick else FULL
    with tempfile.TemporaryDirectory(prefix="timebound-live-rpc-") as tmp:
        workdir = Path(tmp)
        ledger = workdir / "ledger"
        env = dict(os.environ, TIMEBOUND_LEDGER=str(ledger))
        args = ["timebound.net.examples:app", "--storage", str(workdir / "latest.json"),
                "--host", HOST, "--no-marks", "--beta", f"{size.beta_us}us",
                "--latest-every", f"{LATEST_EVERY_US}us"]
        servers = _Servers(workdir, args, env)
        try:
            load = run_loop(_load(seed, size, servers), use_uvloop=False)
        finally:
            servers.close()
        return summarize(load, ledger, size.beta_us)
