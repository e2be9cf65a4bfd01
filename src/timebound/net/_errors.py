"""What ``RpcClient.call`` raises."""

from __future__ import annotations

from timebound.errors import TimeboundError


class RpcError(TimeboundError):
    """Base class of the errors of a remote call."""


class CallTimeout(RpcError):
    """No answer within the timeout. The outcome is unknown: the call ran at most
    once — it may have run (and its reply was lost), or not at all — and it will
    never run again because of this call (its retransmissions are duplicates)."""


#: Refusal reasons that prove the call did not run.
_DID_NOT_RUN = ("early", "overloaded", "expired")


class CallRejected(RpcError):
    """The server refused the call; ``reason`` is ``stale``, ``early``, ``down``,
    ``overloaded`` or ``expired``.

    ``ran`` says what the caller knows: ``False`` when the call certainly did not
    run (``early``, ``overloaded``, ``expired``: its deadline had passed when it
    reached the server), so it may be issued again as a new call
    (``RpcClient.call(..., retry_refused=True)`` does that); ``None`` when the
    outcome is unknown (``stale``, ``down``: this copy did not run, an earlier copy
    may have run once before a server crash or an eviction, exactly as for a
    timeout). Never twice either way.

    ``authenticated`` is False when the client has no key: then anyone on the path
    could have forged the refusal, so it proves nothing and the call may have run
    (``ran`` is then ``None`` whatever the reason). ``incarnation``: the refusing
    server's id; ``marked``: the call carried it (it was made after that server
    started), so a ``stale`` refusal of it is about that incarnation alone."""

    def __init__(self, reason: str, *, authenticated: bool = True, incarnation: int = 0,
                 marked: bool = False) -> None:
        self.reason = reason
        self.authenticated = authenticated
        self.incarnation = incarnation
        self.marked = marked
        if not authenticated:
            note = (" (unauthenticated: without a key a refusal can be forged; the call "
                    "may have run)")
        elif reason in _DID_NOT_RUN:
            note = " (it did not run)"
        else:
            note = " (it may have run once: the outcome is unknown)"
        super().__init__(f"call rejected by the server: {reason}{note}")

    @property
    def ran(self) -> bool | None:
        """False: the call certainly did not run; None: the outcome is unknown."""
        return False if self.authenticated and self.reason in _DID_NOT_RUN else None

    @property
    def did_not_run(self) -> bool:
        """Whether the refusal proves the call did not run (``ran is False``)."""
        return self.ran is False


class RemoteError(RpcError):
    """The handler raised (or the procedure does not exist); the call ran once."""

    def __init__(self, message: str, *, no_procedure: bool = False) -> None:
        self.message = message
        self.no_procedure = no_procedure
        super().__init__(message)
