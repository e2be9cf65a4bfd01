"""``timebound channel``, ``group`` and ``pubsub``: the parsers of the three services
(``channel``, ``group``, ``pubsub`` modules; stdin handling in ``lines``).

Every bad input is one line ``timebound: error: ...`` and exit status 2. Readiness
lines (``listening on udp://HOST:PORT``) go to stderr so that stdout holds only the
JSON lines the commands promise.

Every server command (``channel recv``, ``group join``, ``pubsub merge``)
binds only loopback addresses without a key unless ``--insecure``; every command
takes ``--service ID`` with ``--key-file``; ``--port`` is optional everywhere
(default 0: the system picks one, announced in the listening line). Stdin is read as
bytes and decoded per line, so a line that is not UTF-8 ends the command with one
line ``timebound: error: stdin:N: not valid UTF-8 ...`` and exit 2 (``group join``
included: it used to lose its reader thread there and never exit). Hosts are
checked, and the addresses an unconnected socket sends to resolved, by
``common.check_host`` and ``resolve_targets``.
"""

from __future__ import annotations

from typing import Any

from timebound.net.cli.channel import add_channel_parser
from timebound.net.cli.group import add_group_parser
from timebound.net.cli.lines import StdinLines as StdinLines
from timebound.net.cli.pubsub import add_pubsub_parser


def add_service_parsers(commands: Any) -> None:
    """``timebound channel``, ``group`` and ``pubsub`` (one line in timebound.cli)."""
    add_channel_parser(commands)
    add_group_parser(commands)
    add_pubsub_parser(commands)
