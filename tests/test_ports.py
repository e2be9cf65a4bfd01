"""tests/ports.py: the ports it gives lie outside the kernel's ephemeral range, in this
worker's slab, free, and never twice in a run (until its slab wraps)."""

from __future__ import annotations

import socket

from tests import ports


def test_ports_are_free_outside_the_ephemeral_range_and_never_given_twice() -> None:
    low, high = ports._ephemeral_range()
    given = ports.free_ports(5) + [ports.free_port() for _ in range(20)]
    assert len(set(given)) == len(given)
    assert all(port in ports._SLAB for port in given)
    if ports._SLAB.start > high or ports._SLAB.stop <= low:
        assert not any(low <= port <= high for port in given)
    for port in given[:3]:
        assert ports._is_free(port)


def test_a_held_port_is_not_given() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as held:
        port = ports.free_port()
        held.bind(("127.0.0.1", port))
        assert not ports._is_free(port)
        # one whole turn of the slab: the held port comes up once, and is passed over
        following = [ports.free_port() for _ in range(ports.SLAB)]
    assert port not in following


def test_a_slab_per_worker() -> None:
    spans = ports._slabs([(15000, 32767), (61000, 65535)])
    assert spans[0] == range(15000, 16500) and spans[-1].stop <= 65536
    assert all(a.stop <= b.start for a, b in zip(spans, spans[1:]))
