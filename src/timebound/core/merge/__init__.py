"""Causal deterministic merge by replicated mergers (causal merge paper, section 4).

``Merger`` buffers each message until ``r + c + δ + ε`` and delivers equal deadlines
by ``less``, then process id, then message id; ``level_parameters`` gives the
``(ε, δ)`` of the next level when mergers are stacked (Theorem 4.3).
"""

from timebound.core.merge._merger import (
    Delivery,
    Envelope,
    Merger,
    MergerStatistics,
    Stamp,
    Verdict,
    level_parameters,
)
from timebound.core.merge._snapshot import merger_snapshot, restore_merger

__all__ = [
    "Delivery",
    "Envelope",
    "Merger",
    "MergerStatistics",
    "Stamp",
    "Verdict",
    "level_parameters",
    "merger_snapshot",
    "restore_merger",
]
