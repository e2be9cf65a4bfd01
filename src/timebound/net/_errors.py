"""What ``RpcClient.call`` raises."""

from __future__ import annotations

from timebound.errors import TimeboundError


class RpcError(TimeboundError):
    """Base class of the errors of a remote call."""


class CallTimeout(RpcError):
    """No answer within the timeout. The outcome is unknown: the call ran at most
    once — it may have run (and its reply was lost), or not at all — and it will
    never run again because of this call (its retransmissions are duplicates)."""


class CallRejected(RpcError):
    """The server refused the call; ``reason`` is ``stale``, ``early``, ``down`` or
    ``overloaded``. ``early`` and ``overloaded``: the call did not run. ``stale`` and
    ``down``: this copy did not run, an earlier copy may have run once before a server
    crash (the outcome is unknown, as for a timeout). Never twice."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"call rejected by the server: {reason}")


class RemoteError(RpcError):
    """The handler raised (or the procedure does not exist); the call ran once."""

    def __init__(self, message: str, *, no_procedure: bool = False) -> None:
        self.message = message
        self.no_procedure = no_procedure
        super().__init__(message)
