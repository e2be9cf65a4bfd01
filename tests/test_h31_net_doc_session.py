"""docs/net.md's ``rpc serve`` / ``rpc call`` / ``rpc stats`` session prints what the
doc shows (issue 31, item 4: every doc output matches what the command prints; the doc's
``rpc stats`` counts were once off by one).

The block starts a server in the background (``&``), which the runnable-examples test
(tests/test_docs_examples.py) does not do, so it is run here: the server as its own
process, the other commands through ``bash -c`` one after the other in a new empty
folder, on a free port instead of the doc's 9000; each output is compared with the
doc's through that test's matcher (``...`` placeholders)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

from tests.test_docs_examples import _environment, output_matches

DOC = Path(__file__).resolve().parent.parent / "docs" / "net.md"
DOC_PORT = "9000"
DEADLINE_S = 60


def _session() -> list[tuple[str, list[str]]]:
    """(command, expected lines) of the doc's first ``console`` block."""
    text = DOC.read_text(encoding="utf-8")
    body = re.search(r"^```console\n(.*?)^```$", text, re.S | re.M)
    assert body is not None, "docs/net.md has no console block"
    steps: list[tuple[str, list[str]]] = []
    for line in body.group(1).splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            steps[-1][1].append(line)
    assert steps[0][0].startswith("timebound rpc serve ") and steps[0][0].endswith(" &")
    assert any(command.startswith("timebound rpc stats ") for command, _ in steps)
    return steps


def _free_port() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


def test_the_rpc_session_prints_what_the_doc_shows(tmp_path: Path) -> None:
    steps = _session()
    port = _free_port()
    env = _environment()
    serve_command, serve_expected = steps[0]
    log = tmp_path / "serve.out"
    with open(log, "wb") as out:
        server = subprocess.Popen(
            ["bash", "-c", "exec " + serve_command.removesuffix("&").strip().replace(
                DOC_PORT, port)],
            cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + DEADLINE_S
        while "listening on" not in log.read_text() and server.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        printed = log.read_text().replace(port, DOC_PORT)
        assert output_matches(serve_expected, printed), printed
        for command, expected in steps[1:]:
            done = subprocess.run(["bash", "-c", command.replace(DOC_PORT, port)],
                                  cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, timeout=DEADLINE_S,
                                  stdin=subprocess.DEVNULL)
            assert output_matches(expected, done.stdout), (
                f"$ {command} printed (exit {done.returncode}):\n{done.stdout}"
                "--- the doc shows:\n" + "\n".join(expected))
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
