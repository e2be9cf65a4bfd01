"""A library caller of the network services meets the project's typed errors: a
caller's mistake is a ``CallerError`` (``UsageError`` naming the keyword, or
``ProtocolUsageError``), never a bare ``ValueError`` or ``RuntimeError``; what the
network does is the drivers' own errors (``CallTimeout``, ``CallRejected``...)."""

from __future__ import annotations

import asyncio

import pytest

from timebound.errors import CallerError, ProtocolUsageError, TimeboundError, UsageError
from timebound.net import RpcClient, RpcServer


def test_a_callers_mistakes_are_typed() -> None:
    async def main() -> list[BaseException]:
        caught: list[BaseException] = []
        client = RpcClient(("127.0.0.1", 9))
        try:
            await client.call("echo", b"")  # not open
        except TimeboundError as exc:
            caught.append(exc)
        async with RpcServer({"echo": lambda b: b}) as server:
            try:
                await server.start()  # twice
            except TimeboundError as exc:
                caught.append(exc)
            async with RpcClient(server.address) as open_client:
                for timeout in (0.0, -1.0):
                    for retry in (False, True):
                        try:
                            await open_client.call("echo", b"", timeout=timeout,
                                                   retry_refused=retry)
                        except TimeboundError as exc:
                            caught.append(exc)
                try:
                    await open_client.open()  # twice
                except TimeboundError as exc:
                    caught.append(exc)
        return caught

    caught = asyncio.run(main())
    assert [type(e) for e in caught] == [ProtocolUsageError, ProtocolUsageError,
                                         UsageError, UsageError, UsageError, UsageError,
                                         ProtocolUsageError], caught
    assert all(isinstance(e, CallerError) for e in caught)
    timeouts = [e for e in caught if isinstance(e, UsageError)]
    assert all(e.option == "timeout" and "must be > 0 s" in e.reason for e in timeouts)


def test_no_uvloop_is_a_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from timebound.errors import MissingExtra
    from timebound.net import _loop

    monkeypatch.setattr(_loop, "_uvloop_factory", lambda: None)
    with pytest.raises(MissingExtra, match=r"pip install 'timebound\[uvloop\]'"):
        _loop.new_event_loop(True)
