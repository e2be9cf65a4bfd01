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
.venv/bin/timebound demo
