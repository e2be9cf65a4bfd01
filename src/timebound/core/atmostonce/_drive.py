"""One ``Receiver`` deciding trace messages: the one copy of a message row's decision.

No rule of its own (SCMP Fig. 2-1, Fig. 2-2 driven by a trace): ``decide_message``
is what every driver does for one message ``(conn, ts, at)`` -- the timers due by
``at`` (``handle_timer``), the down check, the estimate in force, ``receive``, the
table size after it. A message that arrives while the receiver is down (Fig. 2-2) is
still given to ``receive`` (which counts it as refused while down) and reported as
``DOWN`` with no estimate and no size. ``AtMostOnceAdapter.decide`` (the row path)
calls it once per row.

``drive`` and ``drive_resilient`` run it over a run of messages, in order, and return
the results as columns (``AtMostOnceAdapter.decide_receiver``, the column path of the
replay, the pipeline, the stream and the library). ``drive_resilient`` is exactly
``decide_message`` per message; ``drive`` is the same step for a receiver that is
never down (not resilient), with one saving: ``handle_timer`` is called only once
``at`` reaches ``next_deadline()``, since before it a timer call changes nothing
(the differential tests compare both paths row for row). The module is compiled with
the receiver (``timebound._compiled``), so the loops call the receiver's methods
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


def decide_message(receiver: Receiver, conn: str, ts: int, at: int,
                   marked: bool = False) -> tuple[int, int, int, bool]:
    """One message at ``at``: its verdict code, the estimate in force when it arrived,
    the table size after it, and False when the receiver was down (then the estimate
    and the size are 0: none). ``marked``: the message carries an incarnation mark
    (``Receiver.receive(..., marked=)``)."""
    receiver.handle_timer(now=at)
    if receiver.down:
        receiver.receive(conn, ts, now=at, marked=marked)  # counted as refused while down
        return DOWN_CODE, 0, 0, False
    estimate = receiver.estimator.estimate
    code = code_of(receiver.receive(conn, ts, now=at, marked=marked))
    return code, estimate, receiver.entries, True


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
    """``drive`` for a resilient receiver: ``decide_message`` per message; the last
    column is False for a message refused because the receiver was down."""
    verdicts: list[int] = []
    estimates: list[int] = []
    sizes: list[int] = []
    up: list[bool] = []
    for conn, ts, at in zip(conns, stamps, times):
        code, estimate, size, ok = decide_message(receiver, conn, ts, at)
        verdicts.append(code)
        estimates.append(estimate)
        sizes.append(size)
        up.append(ok)
    return verdicts, estimates, sizes, up
