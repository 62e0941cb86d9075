#!/usr/bin/env bash
# Runs the quality_grid/README.md grid (benchmarks/quality_grid/quality.yaml, then quality_teachers.yaml), cheapest task first, on
# all cores; run it again after a stop and it resumes where it stopped. Every two minutes, each finished
# run's run.json and progress.csv are copied to benchmarks/quality_grid/results/quality/runs/ (commit them from there),
# which `python -m sb3_pref.experiments report benchmarks/quality_grid/results/quality/runs` reads like the run folder.
#   bash benchmarks/quality_grid/run_quality.sh     # RUNS=runs/quality WORKERS=2 KEEP=benchmarks/quality_grid/results/quality/runs by default
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-runs/quality}
WORKERS=${WORKERS:-2}
KEEP=${KEEP:-benchmarks/quality_grid/results/quality/runs}

sync_results() {
  python - "$RUNS" "$KEEP" <<'PY'
import os, shutil, sys
from sb3_pref.experiments.records import FINISHED, RunRecord
runs, keep = sys.argv[1:]
for folder, _, files in os.walk(runs):
    if "run.json" in files and "progress.csv" in files and RunRecord(folder).status == FINISHED:
        target = os.path.join(keep, os.path.relpath(folder, runs))
        os.makedirs(target, exist_ok=True)
        for name in ("run.json", "progress.csv"):
            shutil.copy2(os.path.join(folder, name), target)
PY
}

grid() {
  python -m sb3_pref.experiments run "$1" --output-dir "$RUNS" --workers "$WORKERS" --only "$2" || true
}

(while sleep 120; do sync_results; done) &
SYNC=$!
trap 'kill $SYNC 2>/dev/null; sync_results' EXIT
grid benchmarks/quality_grid/quality.yaml '*/cartpole_balance/*'
grid benchmarks/quality_grid/quality.yaml '*/Pendulum-v1/*'
grid benchmarks/quality_grid/quality_teachers.yaml '*'
grid benchmarks/quality_grid/quality.yaml '*/cartpole_swingup/*'
grid benchmarks/quality_grid/quality.yaml '*'
