"""The exit statuses of every ``timebound`` command, in one place.

0 done, 2 your input, 1 a bug in timebound; 3 to 7 are outcomes of the network, each
with one meaning whatever the command (``rpc call``, ``rpc stats``, ``channel send``);
130 and 143 an interruption. ``STATUSES`` is the table docs/errors.md shows (a test
holds the two equal).
"""

from __future__ import annotations

EXIT_OK = 0
#: A bug in timebound (an internal error): one line, the traceback with --verbose.
EXIT_BUG = 1
#: Bad input: an option, a trace row, a dataset, a path, a missing extra.
EXIT_USAGE = 2
#: No answer in time: the call ran at most once (maybe once, maybe not at all).
EXIT_TIMEOUT = 3
#: Refused in a way that proves the call did not run (``CallRejected.ran is False``:
#: early, overloaded, expired, with a key): it may be issued again.
EXIT_REFUSED = 4
#: Refused with the outcome unknown (stale, down, or any refusal without a key): an
#: earlier copy may have run once.
EXIT_REFUSED_UNKNOWN = 5
#: The remote handler raised (or the procedure does not exist): the call ran once.
EXIT_REMOTE_ERROR = 6
#: A channel failed: ``channel send`` could not deliver its reliable lines (refused,
#: or no acknowledgment within ``--timeout``).
EXIT_CHANNEL_FAILED = 7
#: Interrupted (SIGINT, Ctrl-C); temporary output removed.
EXIT_INTERRUPTED = 130
#: Terminated (SIGTERM); temporary output removed.
EXIT_TERMINATED = 143

#: Every status and its name (the first words of its row in docs/errors.md).
STATUSES: dict[int, str] = {
    EXIT_OK: "done",
    EXIT_BUG: "internal error",
    EXIT_USAGE: "bad input",
    EXIT_TIMEOUT: "timeout",
    EXIT_REFUSED: "refused, did not run",
    EXIT_REFUSED_UNKNOWN: "refused, outcome unknown",
    EXIT_REMOTE_ERROR: "remote error",
    EXIT_CHANNEL_FAILED: "channel failed",
    EXIT_INTERRUPTED: "interrupted",
    EXIT_TERMINATED: "terminated",
}
