#!/usr/bin/env bash
# Installs sb3_pref with the given extras into the current Python environment.
# torch is installed first from its CPU build, so that the bare "torch" requirement of
# stable-baselines3 does not pull the CUDA build (several GB) on machines without a GPU.
set -euo pipefail
extras="${1:-all}"
if ! python -c "import torch" >/dev/null 2>&1; then
  python -m pip install --quiet "torch==2.13.0" \
    || python -m pip install --quiet torch --index-url https://download.pytorch.org/whl/cpu
fi
python -m pip install --quiet -e ".[${extras}]"
# Offscreen MuJoCo rendering (dm_control / Meta-World frames) uses OSMesa on machines without a GPU.
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1 && ! ldconfig -p | grep -q libOSMesa; then
  (apt-get update -qq && apt-get install -y -qq libosmesa6 >/dev/null) || echo "note: libosmesa6 not installed; rendering tests will be skipped"
fi
