#!/usr/bin/env bash
# Set everything up and run the main job: .venv in the repo root, the project and its
# dependencies (every extra: spark, report; and the test tools), then `timebound demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[all,test]"
# The at-most-once and RPC cores compiled with mypyc (same source; pure Python if this fails).
if .venv/bin/python scripts/compile_core.py build > .venv/compile-core.log 2>&1; then
  echo "compiled core: built (mypyc; .venv/compile-core.log)"
else
  echo "compiled core: not built, the pure-Python core is used (.venv/compile-core.log)"
fi
# Headless Chromium for the report's screenshot tests (apt, where usable; never fatal).
bash scripts/chromium.sh
.venv/bin/timebound demo
# The test suite's JVMs map the classes Spark loads from one archive built here, once
# (tests/jvm_archive.py: about 45 s; never fatal, the suite runs without it).
.venv/bin/python tests/jvm_archive.py
