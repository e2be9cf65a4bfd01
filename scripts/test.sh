#!/usr/bin/env bash
# The whole test suite, on two pytest workers (pytest-xdist): the tests that use the
# shared Spark session all run on one of them (--dist loadgroup, tests/conftest.py),
# so one local session serves them; the other tests spread over both, the Spark
# session's group and the slow ones first (tests/conftest.py orders them). Any pytest
# argument may follow (-n 0 runs everything in this process, one test at a time).
# HYPOTHESIS_PROFILE=ci (set by .ci/run) runs a fixed, derandomized number of
# examples; the default profile is quicker.
# Python's bytecode caches are written even where the environment turns them off
# (PYTHONDONTWRITEBYTECODE): the suite starts hundreds of Python processes (timebound
# commands, Spark's Python workers, the pytest workers' rewritten test modules), and
# each would otherwise compile the same sources again.
set -euo pipefail
cd "$(dirname "$0")/.."
unset PYTHONDONTWRITEBYTECODE
exec .venv/bin/python -m pytest -n 2 --dist loadgroup --no-loadscope-reorder --durations=15 "$@"
