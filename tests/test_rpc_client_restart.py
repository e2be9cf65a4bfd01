"""A caller that starts while its server is down still hears the restarted server.

While nothing listens, a connected UDP socket's reads fail with ECONNREFUSED (ICMP
port unreachable). uvloop stops watching a socket after such a failed read (asyncio's
loop does not), so an ``RpcClient`` on uvloop used to read nothing more: a call made
while the server was down waited its whole timeout and ended ``timeout`` although the
restarted server answered it (``rejected: stale`` or ``down``, or its reply). The
client now watches its socket again after a failed read. Both loops, on loopback."""

from __future__ import annotations

import asyncio

import pytest

from tests.ports import free_port
from timebound.net import CallRejected, CallTimeout, RpcClient, RpcServer
from timebound.net._loop import install_uvloop, run


@pytest.mark.parametrize("uvloop", [False, True], ids=["asyncio", "uvloop"])
def test_a_call_made_while_the_server_is_down_hears_it_when_it_is_back(uvloop: bool) -> None:
    if uvloop and not install_uvloop():
        pytest.skip("uvloop is not installed")
    port = free_port()

    async def main() -> tuple[str, float, int]:
        loop = asyncio.get_running_loop()
        async with RpcClient(("127.0.0.1", port), interval=0.02, max_interval=0.1) as client:
            call = asyncio.ensure_future(client.call("echo", b"hi", timeout=6.0))
            await asyncio.sleep(0.4)  # retransmissions meet a closed port meanwhile
            errors = client.socket_errors
            started = loop.time()
            async with RpcServer({"echo": lambda p: p}, port=port):
                try:
                    outcome = (await call).decode()
                except CallRejected as exc:
                    outcome = f"rejected: {exc.reason}"
                except CallTimeout:
                    outcome = "timeout"
                return outcome, loop.time() - started, errors

    outcome, waited, errors = run(main(), use_uvloop=uvloop)
    assert errors > 0  # the port was closed: the reads did fail
    # A server started after the call refuses it (stamped before its start): the
    # caller hears so in about a retransmission interval, not at its timeout.
    assert outcome in ("rejected: down", "rejected: stale", "hi"), outcome
    assert waited < 3.0
