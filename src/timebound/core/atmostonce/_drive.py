"""One ``Receiver`` over a run of messages, in order: the calls a trace replay makes.

No rule of its own: for each message ``(conn, ts, at)`` it makes exactly the calls
``AtMostOnceAdapter.decide`` makes for a message row (SCMP Fig. 2-1 driven by a
trace) -- the timers due by ``at`` (``handle_timer``), the estimate in force,
``receive``, the table size after it -- and returns them as columns. A resilient
receiver (Fig. 2-2) gets ``handle_timer`` at every message, since going down and
recovering are timer events; a message that arrives while it is down is still given
to ``receive`` (which counts it as refused while down) and reported as ``DOWN`` with
no estimate and no size.

The column-wise drivers (``timebound.columnar``: the Spark operator, the streaming
processor, the library) hand each (receiver, class) its rows here. The module is compiled
with the receiver (``timebound._compiled``), so its loop calls the receiver's methods
directly and a message costs about what ``receive`` itself costs.
"""

from __future__ import annotations

from typing import Final

from timebound.core.atmostonce._events import Verdict
from timebound.core.atmostonce._receiver import Receiver

#: A verdict's code in the drivers' int8 column: its index in ``Verdict``.
CODES: Final[dict[str, int]] = {verdict.value: i for i, verdict in enumerate(Verdict)}
DOWN_CODE: Final = CODES[Verdict.DOWN.value]
_ACCEPTED: Final = Verdict.ACCEPTED
_ACCEPTED_CODE: Final = CODES[Verdict.ACCEPTED.value]
_DUPLICATE: Final = Verdict.DUPLICATE
_DUPLICATE_CODE: Final = CODES[Verdict.DUPLICATE.value]


def code_of(verdict: Verdict) -> int:
    """``CODES[verdict.value]``; the two common verdicts by identity (no lookup)."""
    if verdict is _ACCEPTED:
        return _ACCEPTED_CODE
    if verdict is _DUPLICATE:
        return _DUPLICATE_CODE
    return CODES[verdict._value_]


def drive(receiver: Receiver, conns: list[str], stamps: list[int],
          times: list[int]) -> tuple[list[int], list[int], list[int]]:
    """A receiver that is never down (not resilient): per message, its verdict code,
    the estimate in force when it arrived, and the table size after it."""
    verdicts: list[int] = []
    estimates: list[int] = []
    sizes: list[int] = []
    deadline = receiver.next_deadline()
    for conn, ts, at in zip(conns, stamps, times):
        if deadline is not None and at >= deadline:
            receiver.handle_timer(now=at)
            deadline = receiver.next_deadline()
        estimates.append(receiver.estimator.estimate)
        verdicts.append(code_of(receiver.receive(conn, ts, now=at)))
        sizes.append(receiver.entries)
    return verdicts, estimates, sizes


def drive_resilient(receiver: Receiver, conns: list[str], stamps: list[int],
                    times: list[int]) -> tuple[list[int], list[int], list[int], list[bool]]:
    """``drive`` for a resilient receiver; the last column is False for a message
    refused because the receiver was down (its estimate and size are 0: none)."""
    down = DOWN_CODE
    verdicts: list[int] = []
    estimates: list[int] = []
    sizes: list[int] = []
    up: list[bool] = []
    for conn, ts, at in zip(conns, stamps, times):
        receiver.handle_timer(now=at)
        if receiver.down:
            receiver.receive(conn, ts, now=at)  # counted by the core as refused while down
            verdicts.append(down)
            estimates.append(0)
            sizes.append(0)
            up.append(False)
            continue
        estimates.append(receiver.estimator.estimate)
        verdicts.append(code_of(receiver.receive(conn, ts, now=at)))
        sizes.append(receiver.entries)
        up.append(True)
    return verdicts, estimates, sizes, up
