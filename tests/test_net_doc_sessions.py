"""Every session of docs/net.md (a fenced block of ``$ timebound ...`` commands) prints
what the doc shows: every doc output matches what the command prints.

The sessions start services in the background (``&``), which the runnable-examples test
(tests/test_docs_examples.py) does not do, so they are run here, as a user at a terminal
runs them, in a new empty folder:

- a command ending in ``&`` is its own process, in its own process group, stdout and
  stderr together as on the terminal (the ``&`` commands of one line start together);
  it is ready when it prints its ``listening on udp://...`` line (read, never slept
  for, at most 60 s), and the lines the doc shows under it are what it printed up to
  that line;
- ``NAME=VALUE`` sets a shell variable for the commands after it (``$M``);
- any other command runs through ``bash -c``, after the one before it. The lines the
  doc shows under it are its output (stdout and stderr together), then possibly lines
  that a background command prints meanwhile (``channel recv``'s messages, a
  subscriber's deliveries): those must be what one background command printed since
  it was ready, in that order.

The doc's ports are replaced by free ones (every ``--port P`` and ``HOST:P`` of the
block, in commands and in ``M=a=127.0.0.1:9201,...``) and back in what is compared. A
block that uses a port of the block before continues its session (the fault proxy's
upstream is the ``rpc serve`` started above it). Each line is compared through the
runnable-examples test's matcher (``...`` placeholders). Two things the doc cannot fix
an order for are compared as sets: the ``join`` lines of a group member (in the order
the others' heartbeats arrive) and which background command prints the lines after a
command. The mergers of the pub-sub session print their own deliveries too, at their
own deadlines, interleaved with the rest by timing; the doc shows the subscriber's.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.ports import free_ports
from tests.test_docs_examples import PLACEHOLDER, _environment, output_matches

DOC = Path(__file__).resolve().parent.parent / "docs" / "net.md"
DEADLINE_S = 60  # every wait is bounded by this
READY = "listening on udp://"
PORT = re.compile(r"(?:--port\s+|[\w.]+:)(\d{2,5})(?!\d)")
ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=\S*")


@dataclass
class Command:
    text: str
    background: bool
    line: int  # index of its ``$`` line in the block (several ``&`` share one)
    expected: list[str] = field(default_factory=list)


@dataclass
class Block:
    line: int  # 1-based line of the opening fence
    commands: list[Command]

    def ports(self) -> set[str]:
        return {port for command in self.commands for port in PORT.findall(command.text)}


def _blocks() -> list[Block]:
    """The doc's fenced blocks holding ``$ timebound`` commands, in order."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        if not lines[index].startswith("```"):
            index += 1
            continue
        start, body = index + 1, []
        index += 1
        while lines[index] != "```":
            body.append(lines[index])
            index += 1
        index += 1
        if any(line.startswith("$ timebound") or " | timebound" in line
               for line in body if line.startswith("$ ")):
            blocks.append(Block(start, _commands(body)))
    return blocks


def _commands(body: list[str]) -> list[Command]:
    commands: list[Command] = []
    rows = iter(body)
    for number, row in enumerate(rows):
        if not row.startswith("$ "):
            assert commands, f"output before the first command: {row!r}"
            commands[-1].expected.append(row)
            continue
        text = row[2:]
        while text.endswith("\\"):
            text += "\n" + next(rows)
        if text.rstrip().endswith("&"):
            assert "&&" not in text, text
            commands += [Command(part.strip(), True, number)
                         for part in text.split("&") if part.strip()]
        else:
            commands.append(Command(text, False, number))
    return commands


def _sessions() -> list[list[Block]]:
    sessions: list[list[Block]] = []
    for block in _blocks():
        if sessions and block.ports() & sessions[-1][-1].ports():
            sessions[-1].append(block)
        else:
            sessions.append([block])
    return sessions


SESSIONS = _sessions()


def _first(block: Block) -> str:
    """The block's first ``timebound`` command and subcommand."""
    found = next(re.search(r"timebound (\S+ \S+)", command.text)
                 for command in block.commands if "timebound" in command.text)
    assert found is not None
    return found.group(1)


def test_every_session_of_the_doc_is_found() -> None:
    firsts = [[_first(block) for block in session] for session in SESSIONS]
    assert firsts == [["rpc serve", "net proxy"], ["channel recv"], ["group join"],
                      ["pubsub merge"]], firsts


def _replace(text: str, mapping: dict[str, str]) -> str:
    for old, new in mapping.items():
        text = re.sub(rf"(?<=[:\s]){old}(?!\d)", new, text)
    return text


def _joins_sorted(output: str) -> str:
    """``output`` with each run of ``join`` lines in order (the doc's: by member)."""
    lines, out = output.splitlines(), []
    index = 0
    while index < len(lines):
        end = index
        while end < len(lines) and lines[end].startswith('{"event": "join"'):
            end += 1
        if end == index:
            out.append(lines[index])
            index += 1
        else:
            out += sorted(lines[index:end])
            index = end
    return "\n".join(out) + "\n"


@dataclass
class Background:
    command: str
    process: subprocess.Popen[bytes]
    log: Path
    seen: int = 0  # lines of the log already compared

    def lines(self) -> list[str]:
        return self.log.read_text(encoding="utf-8", errors="replace").splitlines()


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _launch(text: str, shown: str, folder: Path, env: dict[str, str],
            number: int) -> Background:
    """Start ``text`` (the command, ports replaced; ``shown``: as the doc writes it) in
    its own process group."""
    log = folder.parent / f"background-{number}.out"
    with open(log, "wb") as out:
        process = subprocess.Popen(["bash", "-c", "exec " + text], cwd=folder,
                                   env=env, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    return Background(shown, process, log)


def _ready(started: Background, expected: list[str], back: dict[str, str]) -> None:
    """Wait until ``started`` prints its listening line; what it printed up to there
    is what the doc shows under it (if the doc shows anything)."""
    deadline = time.monotonic() + DEADLINE_S
    while not any(line.startswith(READY) for line in started.lines()):
        if started.process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"$ {started.command} never got ready "
                                 f"(exit {started.process.poll()}):\n"
                                 + "\n".join(started.lines()))
        time.sleep(0.02)
    lines = started.lines()
    started.seen = 1 + next(i for i, line in enumerate(lines) if line.startswith(READY))
    if expected:
        printed = _replace("\n".join(lines[:started.seen]), back)
        assert output_matches(expected, printed), (
            f"$ {started.command} printed:\n{printed}\n--- the doc shows:\n"
            + "\n".join(expected))


def _split(expected: list[str], output: str) -> int:
    """How many of ``expected``'s first lines the foreground output is."""
    for count in range(len(expected) + 1):
        if output_matches(expected[:count], output):
            return count
    return -1


def _printed_meanwhile(rest: list[str], backgrounds: list[Background],
                       back: dict[str, str]) -> None:
    """Wait until one background command has printed ``rest`` since it was ready."""
    needed = sum(1 for line in rest if line.strip() != PLACEHOLDER)
    deadline = time.monotonic() + DEADLINE_S
    while True:
        new = [_replace("\n".join(b.lines()[b.seen:]), back) for b in backgrounds]
        for started, printed in zip(backgrounds, new, strict=True):
            if output_matches(rest, printed):
                started.seen += len(printed.splitlines())
                return
        if all(len(printed.splitlines()) >= needed for printed in new) \
                or time.monotonic() > deadline:
            raise AssertionError(
                "no background command printed what the doc shows:\n" + "\n".join(rest)
                + "".join(f"\n--- $ {b.command} printed:\n{printed}"
                          for b, printed in zip(backgrounds, new, strict=True)))
        time.sleep(0.02)


@pytest.mark.parametrize("session", SESSIONS,
                         ids=[f"net.md:{session[0].line}" for session in SESSIONS])
def test_the_session_prints_what_the_doc_shows(session: list[Block], tmp_path: Path) -> None:
    doc_ports = sorted(set().union(*(block.ports() for block in session)))
    mapping = dict(zip(doc_ports, map(str, free_ports(len(doc_ports))), strict=True))
    back = {new: old for old, new in mapping.items()}
    env = _environment()
    folder = tmp_path / "session"
    folder.mkdir()
    backgrounds: list[Background] = []
    pending: list[tuple[Background, list[str]]] = []
    try:
        for block in session:
            for index, command in enumerate(block.commands):
                text = _replace(command.text, mapping)
                if ASSIGNMENT.fullmatch(text):
                    name, value = text.split("=", 1)
                    env[name] = value
                    continue
                if command.background:
                    # the ``&`` commands of one line start together, then are waited for
                    backgrounds.append(_launch(text, command.text, folder, env,
                                               len(backgrounds)))
                    pending.append((backgrounds[-1], command.expected))
                    following = block.commands[index + 1:index + 2]
                    if not (following and following[0].background
                            and following[0].line == command.line):
                        for started, expected in pending:
                            _ready(started, expected, back)
                        pending.clear()
                    continue
                done = subprocess.run(["bash", "-c", text], cwd=folder, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, timeout=DEADLINE_S,
                                      stdin=subprocess.DEVNULL)
                printed = _joins_sorted(_replace(done.stdout, back))
                count = _split(command.expected, printed)
                assert count >= 0, (
                    f"$ {command.text} printed (exit {done.returncode}):\n{printed}"
                    "--- the doc shows:\n" + "\n".join(command.expected))
                if count < len(command.expected):
                    _printed_meanwhile(command.expected[count:], backgrounds, back)
    finally:
        for started in backgrounds:
            _stop(started.process)
