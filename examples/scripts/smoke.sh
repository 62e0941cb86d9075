#!/usr/bin/env bash
# Runs every example for a few thousand steps with tiny settings, to check that they work end to
# end (a few minutes on one core). Outputs go to a temporary folder, removed unless KEEP=1.
#   examples/scripts/smoke.sh
set -euo pipefail
if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
    awk 'NR == 1 && /^#!/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
    exit 0
fi

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
EXAMPLES_DIR="$(dirname "$HERE")"
REPO_DIR="$(dirname "$EXAMPLES_DIR")"
PYTHON="${PYTHON:-python}"
OUT="$(mktemp -d "${TMPDIR:-/tmp}/sb3_pref_smoke.XXXXXX")"
if [[ "${KEEP:-0}" != 1 ]]; then
    trap 'rm -rf "$OUT"' EXIT
fi
# Small networks and one thread: these runs check plumbing, not learning.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
TINY=(--n-envs 2 --n-steps 250 --batch-size 100 --n-epochs 2 --num-layer 1 --hidden-dim 32 --total-timesteps 3000
    --unsuper-step 500 --unsuper-n-epochs 2 --re-num-interaction 1000 --re-max-feed 40 --re-batch 10 --re-update 5
    --re-segment 25)

step() {
    echo "=== $*" >&2
}

step "train_PrefPPO.py on walker_walk, mistake teacher"
"$PYTHON" "$EXAMPLES_DIR/train_PrefPPO.py" --env walker_walk "${TINY[@]}" --teacher mistake --output-dir "$OUT/prefppo_dmc" \
    --tensorboard-log "$OUT/logs" >/dev/null
"$PYTHON" - "$OUT/prefppo_dmc" <<'PY'
import os, sys
import numpy as np
out = sys.argv[1]
for name in ("args.json", "model.zip", "vecnormalize.pkl", "reward_model.pt", "preferences.npz"):
    assert os.path.isfile(os.path.join(out, name)), f"missing {name}"
with np.load(os.path.join(out, "preferences.npz")) as labels:
    n_labels = len(labels["labels"])
assert 0 < n_labels <= 40, n_labels
print(f"    saved model, VecNormalize stats, reward model and {n_labels} labelled pairs")
PY

step "train_PrefPPO.py on Meta-World button-press-topdown"
"$PYTHON" "$EXAMPLES_DIR/train_PrefPPO.py" --env metaworld_button-press-topdown-v2 "${TINY[@]}" --lr 0.0003 \
    --output-dir "$OUT/prefppo_mw" --tensorboard-log "$OUT/logs" >/dev/null

step "train_PPO.py, with and without pretraining (reward flags accepted and ignored)"
"$PYTHON" "$EXAMPLES_DIR/train_PPO.py" --env walker_walk "${TINY[@]}" --teacher skip --re-batch 999 \
    --output-dir "$OUT/ppo" --tensorboard-log "$OUT/logs" >/dev/null
"$PYTHON" "$EXAMPLES_DIR/train_PPO.py" --env walker_walk "${TINY[@]}" --pretrain 1 \
    --output-dir "$OUT/ppo_unsuper" --tensorboard-log "$OUT/logs" >/dev/null

step "a bad flag is a parser error"
if "$PYTHON" "$EXAMPLES_DIR/train_PrefPPO.py" --n-envs 0 2>/dev/null; then
    echo "--n-envs 0 was accepted" >&2
    exit 1
fi

step "grid script, first PrefPPO run of the walker grid shrunk with EXTRA_ARGS"
ALGOS=PrefPPO TEACHERS=oracle BUDGETS=40:10 LOG_DIR="$OUT/grid" EXTRA_ARGS="${TINY[*]}" \
    "$HERE/run_walker_walk.sh" 7 >/dev/null 2>&1
DRY_RUN=1 "$HERE/run_quadruped_walk.sh" 1 >/dev/null
DRY_RUN=1 "$HERE/run_metaworld.sh" 1 >/dev/null

step "migrate_from_ppo.py"
"$PYTHON" "$EXAMPLES_DIR/migrate_from_ppo.py" --timesteps 12288

step "python -m benchmarks overhead overhead"
(cd "$REPO_DIR" && "$PYTHON" -m benchmarks overhead overhead --n-envs 2 --n-steps 250 --total-timesteps 2000 --num-layer 1 --hidden-dim 32 \
    --unsuper-step 500 --num-interaction 500 --max-feed 20 --re-batch 10 --re-update 5 --segment 25 --repeats 1 \
    --output "$OUT/overhead.md") | grep -E "ratio" | head -3

echo "smoke test passed" >&2
