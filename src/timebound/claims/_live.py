"""The live column of the table: which rows are also checked on the live services.

``simulate --reproduce`` runs, besides the simulator's jobs, one live job per service
(``LIVE_JOBS``: the job label and the ``timebound.net.live`` kind it runs) on the same
seeds: the service itself over loopback UDP, with ``timebound.net.FaultProxy`` where
the claim needs loss or reordering. A row's live check (``Live``) reads that job's
runs and is judged like the simulated column (``agrees`` only when every seed agrees).

One module per service holds its live checks (``LIVE``: the row's claim text ->
``Live``); a test checks that every key names a row of the table.

A live run measures the protocol only as far as its machine lets it: each live job
also reports how late its own event loop fired a timer due every 5 ms beside the check
(``timebound.net.live`` adds the run ``LATENESS.run``: the 99th percentile and the
largest lateness, ms). The rule (``machine_late``): a live row's verdict is ``agrees``
or ``differs`` only when, on every seed, that 99th percentile is at most
``SLACK_SHARE`` (a tenth) of the time the row checks (``Live.checks_ms``: the shortest
slot for the channel rows, the ack period for the group rows, delta and delta + 3 eps
for the pub-sub rows, beta for the RPC rows); otherwise it is ``not measured here (the
machine was late by X ms ...)``, whatever the check found, so a cause never blames a
rule while the run's own lateness explains it. The live measured text ends with the
lateness (p99 and max over the seeds). Runs that carry no lateness (written before it
was measured) are judged as they were.
"""

from __future__ import annotations

from collections.abc import Mapping

from . import _live_channel, _live_group, _live_pubsub, _live_rpc
from ._base import Live

_SERVICES = (_live_channel, _live_group, _live_pubsub, _live_rpc)

#: label of the live job -> the kind ``python -m timebound.net.live KIND`` runs
LIVE_JOBS: Mapping[str, str] = {label: kind for m in _SERVICES for label, kind in m.JOBS.items()}

#: claim text -> its live check
LIVE: Mapping[str, Live] = {claim: live for m in _SERVICES for claim, live in m.LIVE.items()}

#: claim text -> why a service does not check that row live (shown in its live column)
NO_LIVE: Mapping[str, str] = {claim: why for m in _SERVICES for claim, why in m.NO_LIVE.items()}
