#!/usr/bin/env bash
# The whole test suite. HYPOTHESIS_PROFILE=ci (set by .ci/run) runs a fixed,
# derandomized number of examples; the default profile is quicker.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m pytest --durations=15 "$@"
