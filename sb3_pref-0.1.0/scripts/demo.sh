#!/usr/bin/env bash
# The main job: set up, then a short preference-based training on a dm_control task.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dmc
python examples/quickstart.py "$@"
