"""The bounded wire form of ⟨r, c, kn⟩ (causal merge paper, sections 3.2-3.3).

A message carries ``brt = r mod B`` instead of the unbounded clock value ``r``. The
receiver recovers ``r`` from ``brt`` and its own clock ``now``: under G1 and G2 the
clock values it can meet during recovery lie in ``[now - 2ε - δ, now + 4ε - 1]``
(section 3.3), a window of ``6ε + δ`` values, so with ``B >= 6ε + δ + 1`` exactly one
value in the window ``[now - 2ε - δ, now - 2ε - δ + B - 1]`` has residue ``brt``:

    r = lo + ((brt - lo) mod B),   lo = now - 2ε - δ.

(A legitimate message has ``r`` in ``[now - ε - δ, now + ε]``; the wider window is the
one Theorem 3.7 needs while corrupted knowledge drains.) A corrupted ``brt`` still
decodes to *some* value in the window, never to an arbitrary far one -- that is what
bounds the damage.

``WireCodec`` packs a timestamp into a fixed number of bytes: ``brt`` in
``bits(B - 1)`` bits, ``c`` in ``bits(ε - 1)`` bits and each of the 2ε counters in
``bits(n)`` bits (Lemmas 3.2 and 3.4 bound them), big-endian, padded to whole bytes.
That is Theorem 3.8's ``O(ε log n + log δ)``. Encoding refuses a timestamp outside
those bounds (the caller's state is illegitimate -- reset it first); decoding accepts
any bytes of the right length, since the receiver checks the timestamp (Lemmas 3.1,
3.2, 3.4) before use anyway; a wrong length is a ``MalformedDatagram``.
"""

from __future__ import annotations

from timebound.core.causal._timestamp import Timestamp
from timebound.errors import MalformedDatagram, ProtocolUsageError


def min_modulus(epsilon: int, delta: int) -> int:
    """The smallest B of Theorem 3.7: ``6ε + δ + 1``."""
    return 6 * epsilon + delta + 1


def bounded(rt: int, modulus: int) -> int:
    """``brt = rt mod B``."""
    return rt % modulus


def decode_r(brt: int, now: int, epsilon: int, delta: int, modulus: int) -> int:
    """The unique clock value with residue ``brt`` in ``[now-2ε-δ, now-2ε-δ+B-1]``."""
    low = now - 2 * epsilon - delta
    return low + (brt - low) % modulus


class WireCodec:
    """Fixed-size bit-packed ⟨brt, c, kn⟩ for one system ``ds(ε, δ)`` of ``n`` processes."""

    __slots__ = ("epsilon", "delta", "n", "modulus", "_rbits", "_cbits", "_kbits", "size")

    def __init__(self, epsilon: int, delta: int, n: int, modulus: int | None = None) -> None:
        if epsilon < 1 or delta < 0 or n < 1:
            raise ProtocolUsageError("need epsilon >= 1, delta >= 0, n >= 1")
        least = min_modulus(epsilon, delta)
        if modulus is None:
            modulus = least
        if modulus < least:
            raise ProtocolUsageError(f"modulus must be >= 6*epsilon+delta+1 = {least}")
        self.epsilon, self.delta, self.n, self.modulus = epsilon, delta, n, modulus
        self._rbits = (modulus - 1).bit_length()
        self._cbits = (epsilon - 1).bit_length()
        self._kbits = n.bit_length()
        bits = self._rbits + self._cbits + 2 * epsilon * self._kbits
        #: bytes per encoded timestamp
        self.size = (bits + 7) // 8

    def encode(self, stamp: Timestamp) -> bytes:
        eps = self.epsilon
        if len(stamp.kn) != 2 * eps or not 0 <= stamp.c < eps:
            raise ProtocolUsageError("timestamp outside the wire bounds (reset it first)")
        value = stamp.r % self.modulus
        value = (value << self._cbits) | stamp.c
        kbits, top = self._kbits, self.n
        for count in stamp.kn:
            if not 0 <= count <= top:
                raise ProtocolUsageError(f"kn entry {count} outside 0..{top}")
            value = (value << kbits) | count
        return value.to_bytes(self.size, "big")

    def decode(self, data: bytes, now: int) -> Timestamp:
        """The timestamp in ``data``, its ``r`` recovered against the clock ``now``."""
        if len(data) != self.size:
            raise MalformedDatagram(f"timestamp must be {self.size} bytes, got {len(data)}")
        value = int.from_bytes(data, "big")
        kbits = self._kbits
        mask = (1 << kbits) - 1
        kn = [0] * (2 * self.epsilon)
        for index in range(2 * self.epsilon - 1, -1, -1):
            kn[index] = value & mask
            value >>= kbits
        c = value & ((1 << self._cbits) - 1)
        value >>= self._cbits
        brt = value & ((1 << self._rbits) - 1)
        # Corrupted bits may exceed B-1; reduce so decode_r sees a residue.
        r = decode_r(brt % self.modulus, now, self.epsilon, self.delta, self.modulus)
        return Timestamp(r, c, tuple(kn))
