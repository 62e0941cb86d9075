#!/usr/bin/env bash
# The whole test suite, after setting up the test dependencies. CI runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh tests
ruff check .
# One worker per core (pytest-xdist): every test runs on one torch thread (conftest.py), so they do not compete for cores.
python -m pytest tests -q -n auto --dist load --timeout 600 --durations=15 "$@"
