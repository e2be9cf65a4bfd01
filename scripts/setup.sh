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
# Headless Chromium renders the report in its screenshot tests (skipped without it):
# installed with apt where apt is usable; the setup never fails for want of it.
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ] &&
      { apt-get install -y -qq chromium >/dev/null 2>&1 ||
        { apt-get update -qq >/dev/null 2>&1 &&
          apt-get install -y -qq chromium >/dev/null 2>&1; }; }; then
    echo "chromium: installed (apt-get install chromium)"
  else
    echo "chromium: not installed (needs apt-get as root); the report screenshot tests will be skipped"
  fi
fi
.venv/bin/timebound demo
