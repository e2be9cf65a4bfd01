"""At-most-once RPC over SCMP (SCMP paper, section 3.1 and Fig. 3-1), sans-IO.

- messages ``Call`` (full or truncated), ``Ack``, ``Reply``, ``ReplyAck`` with a
  compact binary ``encode()`` and ``decode()`` (``MalformedDatagram`` on garbage);
- ``Server``: the SCMP ``Receiver`` (or a ``ClassifiedReceiver``, ``receiver=``) as
  duplicate filter plus the per-connection IDLE / COMPUTING / REPLYING state;
  ``receive`` returns datagrams to send and calls to start, ``complete`` returns the
  REPLY; extension points ``on_refused`` (answer what Fig. 3-1 ignores) and
  ``wrap`` (frame every datagram it sends);
- ``Client``: retransmission schedule (``Policy``), truncated retransmissions once
  ACKed, give-up; outcomes ``Completed`` and ``GaveUp``;
- the live service and caller around them, the names every driver uses: the
  live-only messages and payload formats (``_live_messages``: ``Status``,
  ``Reason``, ``encode_call_payload``, incarnation ids), ``RpcService`` with
  ``build_receiver`` (``_live``: procedures, refusals, deadlines, address
  validation, incarnation marks; records ``Invocation``, ``ServiceOutput``) and
  ``RpcCaller`` (``_caller``: records ``CallerOutput``, ``Answered``, ``Rejected``;
  ``budget_for_timeout``, the budget a call sends for its caller's timeout).
"""

from timebound.core.atmostonce import build_receiver
from timebound.core.rpc._caller import (
    Answered,
    CallerOutput,
    Rejected,
    RpcCaller,
    budget_for_timeout,
)
from timebound.core.rpc._client import (
    CallId,
    Calling,
    Client,
    ClientOutput,
    ClientStatistics,
    Completed,
    GaveUp,
    Outcome,
    Policy,
)
from timebound.core.rpc._live import (
    AMPLIFICATION,
    Invocation,
    RpcService,
    ServiceOutput,
)
from timebound.core.rpc._live_messages import (
    INCARNATION_BYTES,
    MAX_BUDGET_MS,
    MAX_INCARNATION,
    READONLY_ARGS_BYTES,
    STATS_PROCEDURE,
    Reason,
    Status,
    call_mark,
    encode_call_payload,
    split_incarnation,
)
from timebound.core.rpc._messages import (
    MAX_BODY_BYTES,
    MAX_CONN_BYTES,
    MAX_TS,
    Ack,
    Call,
    Message,
    Reply,
    ReplyAck,
    decode,
)
from timebound.core.rpc._server import (
    MAX_RESENDS,
    ConnState,
    DupAction,
    Outgoing,
    Server,
    ServerOutput,
    ServerStatistics,
    StartCall,
)

__all__ = [
    "AMPLIFICATION",
    "MAX_RESENDS",
    "INCARNATION_BYTES",
    "MAX_BODY_BYTES",
    "MAX_BUDGET_MS",
    "MAX_CONN_BYTES",
    "MAX_INCARNATION",
    "MAX_TS",
    "READONLY_ARGS_BYTES",
    "STATS_PROCEDURE",
    "Ack",
    "Answered",
    "Call",
    "CallId",
    "CallerOutput",
    "Calling",
    "Client",
    "ClientOutput",
    "ClientStatistics",
    "Completed",
    "ConnState",
    "DupAction",
    "GaveUp",
    "Invocation",
    "Message",
    "Outcome",
    "Outgoing",
    "Policy",
    "Reason",
    "Rejected",
    "Reply",
    "ReplyAck",
    "RpcCaller",
    "RpcService",
    "Server",
    "ServerOutput",
    "ServerStatistics",
    "ServiceOutput",
    "StartCall",
    "Status",
    "budget_for_timeout",
    "build_receiver",
    "call_mark",
    "decode",
    "encode_call_payload",
    "split_incarnation",
]
