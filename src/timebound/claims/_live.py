"""The live column of the table: which rows are also checked on the live services.

``simulate --reproduce`` runs, besides the simulator's jobs, one live job per service
(``LIVE_JOBS``: the job label and the ``timebound.net.live`` kind it runs) on the same
seeds: the service itself over loopback UDP, with ``timebound.net.FaultProxy`` where
the claim needs loss or reordering. A row's live check (``Live``) reads that job's
runs and is judged like the simulated column (``agrees`` only when every seed agrees).

One module per service holds its live checks (``LIVE``: the row's claim text ->
``Live``); a test checks that every key names a row of the table.
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
