"""The network commands' line: ``timebound rpc serve|call|stats|bench`` and ``net
proxy`` (``rpc``), ``channel``, ``group`` and ``pubsub`` (``services``), ``key``
(``timebound.net._keygen``), and what they share (``common``).

Every bad input is one line ``timebound: error: ...`` and exit status 2 (raised as
``UsageError`` for ``timebound.cli``); what the network did is one line naming it and
a status of its own (``timebound.exitcodes``): 3 a timeout, 4 a refusal that proves
the call did not run, 5 one that does not, 6 a remote error (``rpc call``, ``rpc
stats``), 7 a failed channel (``channel send``).
"""

from timebound.net.cli.common import check_host, format_address, parse_target, resolve_targets
from timebound.net.cli.rpc import (
    SHOWN_RECEIVER_DEFAULTS,
    add_key_parser,
    add_net_parser,
    add_rpc_parser,
    add_service_parsers,
    receiver_options,
)
from timebound.net.cli.rpc_client import MAX_PAYLOAD, call_payload, timeout_line
from timebound.net.cli.services import StdinLines

__all__ = [
    "MAX_PAYLOAD",
    "SHOWN_RECEIVER_DEFAULTS",
    "StdinLines",
    "add_key_parser",
    "add_net_parser",
    "add_rpc_parser",
    "add_service_parsers",
    "call_payload",
    "check_host",
    "format_address",
    "parse_target",
    "receiver_options",
    "resolve_targets",
    "timeout_line",
]
