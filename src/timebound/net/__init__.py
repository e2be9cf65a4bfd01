"""``timebound.net``: at-most-once RPC over real UDP (SCMP section 3.1), asyncio.

A thin driver of the sans-IO cores (``timebound.core.rpc``, ``timebound.core.wire``,
``timebound.core.atmostonce``) after aioquic's ``asyncio/`` layer::

    from timebound.net import RpcServer, RpcClient, CallTimeout, CallRejected, RemoteError

    async with RpcServer({"incr": handler}, host="127.0.0.1", port=0,
                         storage="latest.json") as server:
        async with RpcClient(server.address) as client:
            reply = await client.call("incr", b"1", timeout=2.0)

Also: ``FaultProxy`` (loss, duplication, delay, reordering), ``Clock`` (µs, with
offset and drift for tests), ``install_uvloop``. Wire format: ``docs/wire.md``.
"""

from timebound.net._client import RpcClient
from timebound.net._clock import Clock
from timebound.net._errors import CallRejected, CallTimeout, RemoteError, RpcError
from timebound.net._loop import install_uvloop, new_event_loop
from timebound.net._proxy import FaultProxy, Faults
from timebound.net._server import STATS_PROCEDURE, RpcServer

__all__ = [
    "STATS_PROCEDURE",
    "CallRejected",
    "CallTimeout",
    "Clock",
    "FaultProxy",
    "Faults",
    "RemoteError",
    "RpcClient",
    "RpcError",
    "RpcServer",
    "install_uvloop",
    "new_event_loop",
]
