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
# System packages, where this is a Debian machine we administer: OSMesa for offscreen MuJoCo
# rendering without a GPU, and Debian's Chromium for the human-feedback page's browser tests
# (Playwright drives it through executable_path; it never downloads a browser of its own).
apt_packages=()
ldconfig -p | grep -q libOSMesa || apt_packages+=(libosmesa6)
if [ "${extras}" = "tests" ] && ! command -v chromium >/dev/null 2>&1; then apt_packages+=(chromium); fi
if [ "${#apt_packages[@]}" -gt 0 ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_packages[@]}" >/dev/null
  else
    echo "note: install ${apt_packages[*]} with your system's package manager for rendering and browser tests"
  fi
fi
