#!/usr/bin/env bash
# The whole test suite, after setting up the test dependencies. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh tests
ruff check .
python -m pytest tests -q --timeout 600 --durations=15 "$@"
