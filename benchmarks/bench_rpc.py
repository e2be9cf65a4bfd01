"""The paper's RPC benchmark (SCMP Figs. 3-2, 3-3): ``timebound rpc bench``.

    python benchmarks/bench_rpc.py [--smoke] [--calls N] [--runs R] [--no-grpc]

Writes benchmarks/rpc_bench.md (see ``timebound.net._bench`` for what is measured).
"""

from __future__ import annotations

import sys

from timebound.cli import main

if __name__ == "__main__":
    sys.exit(main(["rpc", "bench", *sys.argv[1:]]))
