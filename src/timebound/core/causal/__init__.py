"""Bounded, stabilizing logical timestamps built on loosely synchronized clocks.

Kulkarni and Ravikant, "Stabilizing Causal Deterministic Merge": ⟨r, c, kn⟩ of Fig. 1
with the resets of section 3.3 (``CausalProcess``), its bounded wire form
(``WireCodec``, ``decode_r``), the ⟨r, c⟩ variant of Fig. 3 (``RCProcess``) and the
bounded-c variant of section 5.2 (``BoundedRCProcess``, ``QuietWindows``). Each module
opens with how it works and the choices made where the paper is silent.
"""

from timebound.core.causal._process import (
    BoundedRCProcess,
    CausalProcess,
    QuietWindows,
    RCProcess,
)
from timebound.core.causal._timestamp import (
    RCTimestamp,
    Timestamp,
    check,
    initial,
    less,
    less_rc,
    lexgraph,
)
from timebound.core.causal._wire import WireCodec, bounded, decode_r, min_modulus

__all__ = [
    "BoundedRCProcess",
    "CausalProcess",
    "QuietWindows",
    "RCProcess",
    "RCTimestamp",
    "Timestamp",
    "WireCodec",
    "bounded",
    "check",
    "decode_r",
    "initial",
    "less",
    "less_rc",
    "lexgraph",
    "min_modulus",
]
