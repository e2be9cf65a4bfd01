"""``timebound group join`` as processes on loopback: a member
stopped with SIGSTOP holds every buffer (nothing it lacks is released) and the
buffers drain once it resumes; a member killed with SIGKILL and restarted rejoins
(section 6) and the group goes on. Every process is killed."""

from __future__ import annotations

import json
import signal
import subprocess
import time

from tests.ports import free_ports
from tests.test_net_channel_cli import Lines, start
from tests.test_net_support import TIMEBOUND, stop


def events(lines: Lines, kind: str) -> list[dict[str, object]]:
    return [e for e in (json.loads(x) for x in list(lines.lines)) if e["event"] == kind]


def wait(predicate: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def test_stalled_member_holds_buffers_and_killed_member_rejoins() -> None:
    ports = free_ports(3)
    members = ",".join(f"{n}=127.0.0.1:{p}" for n, p in zip("abc", ports, strict=True))
    procs: dict[str, subprocess.Popen[bytes]] = {}
    lines: dict[str, Lines] = {}

    def join(name: str) -> None:
        proc, _ = start(["group", "join", name, "--members", members, "--ack-every-ms", "10"],
                        stdin=subprocess.PIPE)
        procs[name] = proc
        lines[name] = Lines(proc)

    def say(name: str, text: str) -> None:
        stdin = procs[name].stdin
        assert stdin is not None
        stdin.write(text.encode() + b"\n")
        stdin.flush()

    try:
        for name in "abc":
            join(name)
        assert wait(lambda: len(events(lines["a"], "join")) >= 2, 15)
        say("a", "warm-up")
        assert wait(lambda: len(events(lines["a"], "stable")) == 1, 15)
        procs["c"].send_signal(signal.SIGSTOP)
        for i in range(10):
            say("a", f"m{i}")
        assert wait(lambda: len([e for e in events(lines["b"], "deliver")
                                 if e["sender"] == "a"]) == 11, 15)
        time.sleep(1.0)
        assert len(events(lines["a"], "stable")) == 1  # c lacks them: none released
        procs["c"].send_signal(signal.SIGCONT)
        assert wait(lambda: len(events(lines["a"], "stable")) == 11, 15)
        got = [e["data"] for e in events(lines["c"], "deliver") if e["sender"] == "a"]
        assert got == ["warm-up"] + [f"m{i}" for i in range(10)]

        procs["c"].send_signal(signal.SIGKILL)
        procs["c"].wait(timeout=10)
        stop(procs.pop("c"))
        join("c")  # a new incarnation: a and b disconnect the old one, join the new one
        assert wait(lambda: len([e for e in events(lines["a"], "join")
                                 if e["member"] == "c"]) >= 2, 15)
        for i in range(5):
            say("a", f"n{i}")
        assert wait(lambda: len(events(lines["a"], "stable")) == 16, 20)
        got = [e["data"] for e in events(lines["c"], "deliver") if e["sender"] == "a"]
        assert got[-5:] == [f"n{i}" for i in range(5)]
        assert any(e["reason"] == "restart" for e in events(lines["a"], "leave"))
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
            if proc.stdin is not None:
                proc.stdin.close()
            stop(proc, signal.SIGTERM)


def test_bad_members_exit_2() -> None:
    for argv in (["group", "join", "z", "--members", "a=127.0.0.1:1"],
                 ["group", "join", "a", "--members", "a=127.0.0.1"],
                 ["group", "join", "a", "--members", "a=127.0.0.1:1", "--acks", "nope"]):
        done = subprocess.run([*TIMEBOUND, *argv], capture_output=True, timeout=30)
        assert done.returncode == 2, argv
        assert done.stderr.decode().count("\n") == 1


def test_join_lines_come_before_the_first_delivery() -> None:
    """The docs' example: b and c run, then ``echo hello | group join a``: a waits (at
    most --join-wait) until it has heard every member, so its output starts with the two
    join lines, then its own delivery; --join-wait 0s sends at once."""
    ports = free_ports(3)
    members = ",".join(f"{n}=127.0.0.1:{p}" for n, p in zip("abc", ports, strict=True))
    procs = []
    try:
        for name in "bc":
            proc, _ = start(["group", "join", name, "--members", members, "--ack-every",
                             "10ms"], stdin=subprocess.PIPE)
            procs.append(proc)
        done = subprocess.run(
            [*TIMEBOUND, "group", "join", "a", "--members", members, "--ack-every", "10ms",
             "--exit-when-stable", "--join-wait", "10s"],
            input=b"hello\n", capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr
        kinds = [json.loads(line)["event"] for line in done.stdout.decode().splitlines()]
        assert kinds[:3] == ["join", "join", "deliver"], kinds
        assert "stable" in kinds
    finally:
        for proc in procs:
            if proc.stdin is not None:
                proc.stdin.close()
            stop(proc, signal.SIGTERM)


def test_join_wait_is_a_duration_at_most_a_minute() -> None:
    for bad, reason in (("61s", "must be between 0s and 1m, got 61s"), ("soon", "duration"),
                        ("2", "needs its unit: 2us, 2ms or 2s")):
        done = subprocess.run([*TIMEBOUND, "group", "join", "a", "--members",
                               "a=127.0.0.1:1", "--join-wait", bad],
                              input=b"", capture_output=True, timeout=60)
        assert done.returncode == 2
        err = done.stderr.decode()
        assert err.startswith("timebound: error:") and err.count("\n") == 1, err
        assert reason in err, err
