"""The shared layer between ``timebound.core`` and the drivers.

Row adapters feed a core from table rows -- the same code for ``timebound replay``
(files), the pipeline (Spark groups), the simulator's offline re-check and streaming --
and each protocol's options are a typed object built from option values (a command
line's dests or a dataset row's option columns) by ``<Options>.from_values``. Imports
only ``timebound.core``, ``timebound.errors`` and ``timebound.contract``.

- ``Row``, ``RowAdapter`` (``_rows``); ``require``/``forbid`` (``_options``);
- ``AdapterSpec`` and ``ADAPTERS``: protocol -> (options, adapter);
- per protocol: ``atmostonce`` (``AtMostOnceAdapter``, ``AtMostOnceOptions``,
  ``receiver_config``), ``causal``, ``merge``, ``slotted``, ``stability``. A command
  line's flags become option values with ``vars(args)``; declaring them is the
  command layer's (``timebound.arguments``).
"""

from __future__ import annotations

from typing import Any

from timebound.adapters._options import Values, flag, forbid, require
from timebound.adapters._rows import Row, RowAdapter
from timebound.adapters._spec import AdapterSpec
from timebound.adapters.atmostonce import (
    AtMostOnceAdapter,
    AtMostOnceOptions,
    receiver_config,
)
from timebound.adapters.causal import CausalAdapter, CausalOptions
from timebound.adapters.merge import MergeAdapter, MergeOptions
from timebound.adapters.slotted import SlottedAdapter, SlottedOptions
from timebound.adapters.stability import StabilityAdapter, StabilityOptions

ATMOSTONCE: AdapterSpec[AtMostOnceOptions, AtMostOnceAdapter] = AdapterSpec(
    "atmostonce", AtMostOnceOptions.from_values, AtMostOnceAdapter)
CAUSAL: AdapterSpec[CausalOptions, CausalAdapter] = AdapterSpec(
    "causal", CausalOptions.from_values, CausalAdapter)
MERGE: AdapterSpec[MergeOptions, MergeAdapter] = AdapterSpec(
    "merge", MergeOptions.from_values, MergeAdapter)
SLOTTED: AdapterSpec[SlottedOptions, SlottedAdapter] = AdapterSpec(
    "slotted", SlottedOptions.from_values, SlottedAdapter)
STABILITY: AdapterSpec[StabilityOptions, StabilityAdapter] = AdapterSpec(
    "stability", StabilityOptions.from_values, StabilityAdapter)

#: protocol -> its adapter spec, in the contract's protocol order.
ADAPTERS: dict[str, AdapterSpec[Any, Any]] = {
    spec.protocol: spec for spec in (ATMOSTONCE, CAUSAL, MERGE, SLOTTED, STABILITY)
}

__all__ = [
    "ADAPTERS", "ATMOSTONCE", "CAUSAL", "MERGE", "SLOTTED", "STABILITY", "AdapterSpec",
    "AtMostOnceAdapter", "AtMostOnceOptions", "CausalAdapter", "CausalOptions",
    "MergeAdapter", "MergeOptions", "Row", "RowAdapter", "SlottedAdapter", "SlottedOptions",
    "StabilityAdapter", "StabilityOptions", "Values", "flag",
    "forbid", "receiver_config", "require",
]
