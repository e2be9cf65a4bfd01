"""Command-line options shared by the commands of several drivers: the at-most-once
receiver's flags (``timebound replay atmostonce``, ``rpc serve``, ``stream
atmostonce``), declared once on an argparse parser and read back into the shared
layer's typed options (``adapters.receiver_config``). The command layer's: the
adapters and cores below never see argparse.
"""

from __future__ import annotations

import argparse

from timebound.adapters import receiver_config
from timebound.contract import ESTIMATORS
from timebound.core.atmostonce import ReceiverConfig


def add_receiver_arguments(parser: argparse.ArgumentParser, *, classes: bool = True) -> None:
    """Declare the receiver options of ``timebound replay atmostonce`` on ``parser``
    (numeric ones default to None, so a missing or meaningless one is detected)."""
    est = parser.add_argument_group("lifetime estimator")
    est.add_argument("--estimator", choices=ESTIMATORS, default="fixed",
                     help="fixed rho (default), unlimited horizon (adaptive Fig. 2) or "
                          "limited horizon (adaptive Fig. 3)")
    est.add_argument("--rho", type=int, metavar="R",
                     help="fixed: the lifetime rho, ticks >= 1 (no default in a trace: "
                          "required; rpc serve has its own)")
    est.add_argument("--window", type=int, metavar="S",
                     help="limited: lifetimes per GC period, a count >= 1 (required "
                          "with --estimator limited)")
    est.add_argument("--spikes", type=int, metavar="H",
                     help="limited: spikes ignored per period, a count 0 <= H < S "
                          "(required with --estimator limited)")
    est.add_argument("--p", type=int, metavar="P",
                     help="limited: lost/accepted target 1/P, P >= 1 (required with "
                          "--estimator limited)")
    est.add_argument("--gc-every", type=int, metavar="G",
                     help="fixed, unlimited: GC at every multiple of G ticks, G >= 1 "
                          "(no default in a trace: required; rpc serve has its own)")
    res = parser.add_argument_group("resilient receivers (SCMP Fig. 2-2)")
    res.add_argument("--resilient", action="store_true",
                     help="keep latest on stable storage (SCMP Fig. 2-2), so a crash "
                          "accepts no message twice; a trace may then hold crash rows "
                          "(default off)")
    res.add_argument("--beta", type=int, metavar="B",
                     help="resilient: latest = time + B, ticks >= 0 (no default in a "
                          "trace: required; rpc serve has its own)")
    res.add_argument("--latest-every", type=int, metavar="L",
                     help="resilient: refresh latest at every multiple of L ticks, "
                          "L >= 1 (no default in a trace: required; rpc serve has its own)")
    res.add_argument("--recovery-grace", type=int, metavar="T",
                     help="optional: after a recovery, GC forgets nothing for T ticks "
                          "(SCMP 2.4; default 0, the figures' behaviour)")
    ext = parser.add_argument_group("beyond the paper")
    ext.add_argument("--reorder-window", type=int, metavar="W",
                     help="accept a genuine message overtaken on its connection if it is "
                          "among the W most recent timestamps the connection keeps "
                          "(1 <= W <= 4096; default 1, SCMP's rule)")
    if classes:
        parser.add_argument("--classes", type=int, metavar="K",
                            help="hash classes per receiver: crc32(utf-8 conn) mod K "
                                 "(default 1)")


def receiver_config_from_args(args: argparse.Namespace) -> ReceiverConfig:
    """``receiver_config`` of a namespace parsed with ``add_receiver_arguments``."""
    return receiver_config(vars(args))
