"""timebound: delivery guarantees from loosely synchronized clocks.

``timebound.core`` holds the protocols as pure state machines (no I/O, no clock, no
randomness); the drivers (``replay``, and the network, simulator and Spark layers)
feed them.
"""

__version__ = "0.1.0"

from timebound import _compiled  # noqa: E402

_compiled.select()  # the compiled core if built and current (before any core import)
