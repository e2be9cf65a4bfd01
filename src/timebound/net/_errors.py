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
    """The server refused the call; ``reason`` is ``stale``, ``early``, ``down``,
    ``overloaded`` or ``expired``. ``early``, ``overloaded`` and ``expired`` (its
    deadline had passed when it reached the server): the call did not run. ``stale``
    and ``down``: this copy did not run, an earlier copy may have run once before a
    server crash (the outcome is unknown, as for a timeout). Never twice.

    ``authenticated`` is False when the client has no key: then anyone on the path
    could have forged the refusal, so it proves nothing and the call may have run
    (``did_not_run`` is then False whatever the reason)."""

    def __init__(self, reason: str, *, authenticated: bool = True) -> None:
        self.reason = reason
        self.authenticated = authenticated
        note = "" if authenticated else (
            " (unauthenticated: without a key a refusal can be forged; the call may "
            "have run)")
        super().__init__(f"call rejected by the server: {reason}{note}")

    @property
    def did_not_run(self) -> bool:
        """Whether the refusal proves the call did not run (and may be retried)."""
        return self.authenticated and self.reason in ("early", "overloaded", "expired")


class RemoteError(RpcError):
    """The handler raised (or the procedure does not exist); the call ran once."""

    def __init__(self, message: str, *, no_procedure: bool = False) -> None:
        self.message = message
        self.no_procedure = no_procedure
        super().__init__(message)
