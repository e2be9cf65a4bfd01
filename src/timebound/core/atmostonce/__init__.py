"""At-most-once messages without handshakes (SCMP) with adaptive lifetime estimation.

- ``Receiver``: connection table + ``upper`` (SCMP Fig. 2-1), resilient ``latest``
  on stable storage (Fig. 2-2) or the monotonic-clock alternative, capacity;
- estimators ``Fixed`` (rho), ``UnlimitedHorizon`` (adaptive Fig. 2) and
  ``LimitedHorizon`` (adaptive Fig. 3);
- ``ClassifiedReceiver``: one receiver per class of clients (SCMP section 2.4);
- ``ReceiverConfig``: the options that name a receiver, building fresh ones.
"""

from timebound.core.atmostonce._classes import (
    ClassifiedReceiver,
    ClassifiedStatistics,
    Classifier,
    crc32_class,
    crc32_classes,
    crc32_classifier,
)
from timebound.core.atmostonce._config import ESTIMATORS, ReceiverConfig, build_receiver
from timebound.core.atmostonce._drive import CODES as VERDICT_CODES
from timebound.core.atmostonce._drive import decide_message, drive, drive_resilient
from timebound.core.atmostonce._estimators import (
    Estimator,
    Fixed,
    LimitedHorizon,
    UnlimitedHorizon,
    nextpow2,
)
from timebound.core.atmostonce._events import ReceiverStatistics, StableRecord, Verdict
from timebound.core.atmostonce._receiver import (
    MemoryStorage,
    MonotonicClock,
    Receiver,
    Resilience,
    StableLatest,
    StableStorage,
)
from timebound.core.atmostonce._resilience import aligned_records
from timebound.core.atmostonce._snapshot import (
    classified_snapshot,
    receiver_snapshot,
    restore_classified,
    restore_receiver,
)

__all__ = [
    "build_receiver",
    "ESTIMATORS",
    "ClassifiedReceiver",
    "ClassifiedStatistics",
    "Classifier",
    "Estimator",
    "Fixed",
    "LimitedHorizon",
    "MemoryStorage",
    "MonotonicClock",
    "Receiver",
    "ReceiverConfig",
    "ReceiverStatistics",
    "Resilience",
    "StableLatest",
    "StableRecord",
    "StableStorage",
    "UnlimitedHorizon",
    "VERDICT_CODES",
    "aligned_records",
    "decide_message",
    "drive",
    "drive_resilient",
    "Verdict",
    "classified_snapshot",
    "crc32_class",
    "crc32_classes",
    "crc32_classifier",
    "nextpow2",
    "receiver_snapshot",
    "restore_classified",
    "restore_receiver",
]
