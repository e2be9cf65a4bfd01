"""One receiver configuration, shared by every driver (replay, simulator, pipeline).

The options of ``timebound replay atmostonce`` name a receiver completely: which
estimator (fixed ``rho``, unlimited horizon, limited horizon ``S, H, p``), the GC
period for the timer-driven ones and, for resilient receivers, ``beta`` and the
``latest`` refresh period and the GC pause after a recovery (``recovery_grace``, SCMP
section 2.4; 0 in the figures) and the per-connection reorder window
(``reorder_window``, our extension beyond the paper; 1, the default, is the figures)
and the byte bound of its table (``max_bytes``, None: none; ``_table``, "Bounds"):
a field here, unlike the entry bound ``capacity`` (an argument of ``new_receiver``),
so that a live driver's default bound reaches every receiver built from its config.
``ReceiverConfig`` holds them and builds fresh receivers, so no driver spells out that
mapping again. Drivers validate user input first (to name
the option); the core constructors still refuse anything out of range.
"""

from __future__ import annotations

from dataclasses import dataclass

from timebound.core.atmostonce._classes import ClassifiedReceiver, crc32_classifier
from timebound.core.atmostonce._estimators import Estimator, Fixed, LimitedHorizon, UnlimitedHorizon
from timebound.core.atmostonce._receiver import MemoryStorage, Receiver, StableLatest, StableStorage
from timebound.errors import ProtocolUsageError

ESTIMATORS = ("fixed", "unlimited", "limited")


@dataclass(frozen=True, slots=True)
class ReceiverConfig:
    estimator: str = "fixed"
    rho: int | None = None
    gc_every: int | None = None
    window: int | None = None
    spikes: int | None = None
    p: int | None = None
    resilient: bool = False
    beta: int | None = None
    latest_every: int | None = None
    recovery_grace: int = 0
    reorder_window: int = 1
    max_bytes: int | None = None

    def new_estimator(self) -> Estimator:
        if self.estimator == "fixed":
            if self.rho is None:
                raise ProtocolUsageError("a fixed estimator needs rho")
            return Fixed(self.rho)
        if self.estimator == "unlimited":
            return UnlimitedHorizon()
        if self.estimator == "limited":
            if self.window is None or self.spikes is None or self.p is None:
                raise ProtocolUsageError("a limited-horizon estimator needs window, spikes and p")
            return LimitedHorizon(self.window, self.spikes, self.p)
        raise ProtocolUsageError(f"unknown estimator {self.estimator!r}; one of {ESTIMATORS}")

    def new_receiver(self, storage: StableStorage | None = None, *, start: int = 0,
                     capacity: int | None = None, high_water: int | None = None,
                     deferred: bool = False) -> Receiver:
        """A fresh receiver, the one way every driver builds one (the replay's, the
        live services' through ``core.rpc.build_receiver``); resilient ones keep
        ``latest`` in ``storage`` (default: a new ``MemoryStorage``; ``deferred``: the
        driver writes it, ``StableLatest(deferred=True)``). ``capacity`` and
        ``high_water`` bound its table's entries, the config's ``max_bytes`` its
        bytes."""
        resilience = None
        if self.resilient:
            if self.beta is None or self.latest_every is None:
                raise ProtocolUsageError("a resilient receiver needs beta and latest_every")
            resilience = StableLatest(storage or MemoryStorage(), self.beta, self.latest_every,
                                      deferred)
        gc_every = None if self.estimator == "limited" else self.gc_every
        return Receiver(self.new_estimator(), gc_every=gc_every, resilience=resilience,
                        capacity=capacity, high_water=high_water, start=start,
                        recovery_grace=self.recovery_grace,
                        reorder_window=self.reorder_window, max_bytes=self.max_bytes)


def build_receiver(config: ReceiverConfig, storages: list[StableStorage], *, start: int,
                   capacity: int | None = None, high_water: int | None = None,
                   deferred: bool = False) -> Receiver | ClassifiedReceiver:
    """The receiver ``config`` names, with one class per storage in ``storages``
    (``crc32(utf-8 conn) mod K`` classes, as ``timebound replay atmostonce
    --classes K``; one storage: a plain ``Receiver``). ``capacity`` and
    ``high_water`` bound each class's table. A resilient config keeps each class's
    ``latest`` in its own storage; ``deferred``: the driver writes it
    (``StableLatest(deferred=True)``)."""
    if not storages:
        raise ProtocolUsageError("at least one storage (one class) is needed")
    receivers = [config.new_receiver(storage, start=start, capacity=capacity,
                                     high_water=high_water, deferred=deferred)
                 for storage in storages]
    if len(receivers) == 1:
        return receivers[0]
    return ClassifiedReceiver(receivers, crc32_classifier(len(receivers)))
