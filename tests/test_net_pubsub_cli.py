"""``timebound pubsub publish|merge|subscribe`` as processes on loopback: two
publishers, two replicated mergers, a subscriber on each; the two
subscribers print their common messages in the same order (and the same running
digest when they saw the same set); one replica killed with SIGKILL mid-stream does
not disturb the other. The two-level hierarchy runs in tests/test_net_pubsub.py.
Every process is killed."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time

from tests.test_net_channel_cli import Lines
from tests.test_net_support import TIMEBOUND, stop

SYSTEM = ["--epsilon", "5ms", "--delta", "60ms"]


def start_all(commands: list[list[str]], timeout: float = 30.0
              ) -> list[tuple[subprocess.Popen[bytes], tuple[str, int]]]:
    """Start every command at once (start-up dominates under load); wait for each
    one's ``listening on udp://`` line on stderr."""
    procs = [subprocess.Popen(TIMEBOUND + c, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for c in commands]
    out = []
    deadline = time.monotonic() + timeout
    for proc in procs:
        assert proc.stderr is not None
        line = b""
        while not line.endswith(b"\n"):
            ready, _, _ = select.select([proc.stderr], [], [],
                                        max(0.0, deadline - time.monotonic()))
            if not ready:
                for p in procs:
                    stop(p)
                raise AssertionError("not ready in time")
            chunk = os.read(proc.stderr.fileno(), 1)
            assert chunk, "exited before it was ready"
            line += chunk
        host, _, port = line.decode().strip().removeprefix("listening on udp://").rpartition(":")
        out.append((proc, (host.strip("[]"), int(port))))
    return out


def test_cli_publishers_replicated_mergers_and_subscribers_agree() -> None:
    procs: list[subprocess.Popen[bytes]] = []
    try:
        started = start_all([["pubsub", "merge", "m1", "--port", "0", "--quiet", *SYSTEM],
                             ["pubsub", "merge", "m2", "--port", "0", "--quiet", *SYSTEM]])
        (m1, a1), (m2, a2) = started
        procs += [m1, m2]
        subs = start_all([["pubsub", "subscribe", f"{a[0]}:{a[1]}", "--name", n]
                          for n, a in (("s1", a1), ("s2", a2))])
        procs += [p for p, _ in subs]
        lines = {"s1": Lines(subs[0][0]), "s2": Lines(subs[1][0])}
        time.sleep(0.2)  # the SUBs reached the mergers
        mergers = f"{a1[0]}:{a1[1]},{a2[0]}:{a2[1]}"
        pubs = []
        for name in ("p1", "p2"):
            pub = subprocess.Popen(TIMEBOUND + ["pubsub", "publish", name, "--mergers", mergers,
                                                *SYSTEM], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            procs.append(pub)
            pubs.append((pub, "".join(f"{name} line {i}\n" for i in range(60)).encode()))
        for pub, text in pubs:
            out, err = pub.communicate(text, timeout=60)
            assert pub.returncode == 0, err
            assert [json.loads(x)["msg"] for x in out.decode().splitlines()] == list(range(60))
        rows = {n: ls.wait_for(120, 5) for n, ls in lines.items()}
        orders = {n: [(r["proc"], r["msg"]) for r in rs] for n, rs in rows.items()}
        common = set(orders["s1"]) & set(orders["s2"])
        assert len(common) >= 60, len(common)  # a loaded host can make some late
        assert [x for x in orders["s1"] if x in common] == [x for x in orders["s2"]
                                                            if x in common]
        if set(orders["s1"]) == set(orders["s2"]):
            assert rows["s1"][-1]["digest"] == rows["s2"][-1]["digest"]
        for order in orders.values():
            for proc in ("p1", "p2"):
                mine = [m for p, m in order if p == proc]
                assert mine == sorted(mine)

        m2.send_signal(signal.SIGKILL)  # one replica dies; the other keeps serving
        m2.wait(timeout=10)
        before = len(lines["s1"].lines)
        pub = subprocess.run(TIMEBOUND + ["pubsub", "publish", "p3", "--mergers", mergers,
                                          *SYSTEM], input=b"after 1\nafter 2\n",
                             capture_output=True, timeout=60)
        assert pub.returncode == 0
        after = lines["s1"].wait_for(before + 2, 10)
        assert [r["data"] for r in after[before:]] == ["after 1", "after 2"]
    finally:
        for p in procs:
            stop(p, signal.SIGTERM)


def test_bad_options_exit_2() -> None:
    for argv in (["pubsub", "merge", "m", "--port", "1", "--epsilon", "0ms", "--delta", "5ms"],
                 ["pubsub", "merge", "m", "--port", "1", "--epsilon", "5", "--delta", "5ms"],
                 ["pubsub", "publish", "p", "--mergers", "nohost", "--epsilon", "5ms",
                  "--delta", "5ms"],
                 ["pubsub", "subscribe", "127.0.0.1:1", "--gap-wait-ms", "-1"]):
        done = subprocess.run([*TIMEBOUND, *argv], capture_output=True, timeout=30,
                              input=b"")
        assert done.returncode == 2, argv
        assert done.stderr.decode().count("\n") == 1
