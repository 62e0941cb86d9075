# Helpers for the B-Pref grid scripts (sourced by run_*.sh, not run on its own).
#
# Positional arguments of every grid script: the seeds (default: B-Pref's ten).
# Environment variables:
#   ALGOS            runs to launch, any of "PrefPPO PPO PPO_unsuper" (default: all three)
#   TEACHERS         teacher presets for PrefPPO (default: B-Pref's six)
#   BUDGETS          "max_feed:re_batch" pairs for PrefPPO (default: the script's B-Pref budgets)
#   FEED_TYPE        query selection, 0-5 or a name (default 1 = disagreement, as in B-Pref's scripts)
#   NUM_INTERACTION  env steps between query rounds (default 16000)
#   LOG_DIR          root of the run folders (default logs)
#   PYTHON           interpreter (default python)
#   EXTRA_ARGS       flags appended to every command; later flags win, e.g. "--total-timesteps 100000"
#   DRY_RUN=1        print the commands instead of running them

set -euo pipefail

# comment_block FILE: the comment lines at the top of FILE (after its shebang), without their "# ".
comment_block() {
    awk 'NR == 1 && /^#!/ { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$1"
}

# --help: what the calling script runs, then the knobs above; the seeds would otherwise take "--help" as one.
for arg in "$@"; do
    if [[ "$arg" == "-h" || "$arg" == "--help" ]]; then
        comment_block "$0"
        echo
        comment_block "${BASH_SOURCE[0]}" | tail -n +3
        exit 0
    fi
done

EXAMPLES_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BPREF_SEEDS="12345 23451 34512 45123 51234 67890 78906 89067 90678 6789"
SEEDS="${*:-$BPREF_SEEDS}"
ALGOS="${ALGOS:-PrefPPO PPO PPO_unsuper}"
TEACHERS="${TEACHERS:-oracle noisy myopic mistake skip equal}"
FEED_TYPE="${FEED_TYPE:-1}"
NUM_INTERACTION="${NUM_INTERACTION:-16000}"
LOG_DIR="${LOG_DIR:-logs}"

# wants ALGO: whether ALGO is among the runs asked for.
wants() {
    [[ " $ALGOS " == *" $1 "* ]]
}

# run SCRIPT ARGS...: one training run of examples/SCRIPT, or its command line under DRY_RUN=1.
run() {
    local script="$1"
    shift
    # EXTRA_ARGS is split on spaces on purpose: it holds several flags.
    # shellcheck disable=SC2206
    local command=("${PYTHON:-python}" "$EXAMPLES_DIR/$script" "$@" --tensorboard-log "$LOG_DIR" ${EXTRA_ARGS:-})
    if [[ "${DRY_RUN:-0}" == 1 ]]; then
        echo "${command[*]}"
    else
        echo ">>> ${command[*]}" >&2
        "${command[@]}"
    fi
}

# prefppo_grid SEED PPO_FLAGS... -- PREF_FLAGS...: PrefPPO for every budget in BUDGETS and every teacher.
prefppo_grid() {
    local seed="$1"
    shift
    local budget max_feed re_batch teacher
    for budget in $BUDGETS; do
        max_feed="${budget%%:*}"
        re_batch="${budget##*:}"
        for teacher in $TEACHERS; do
            run train_PrefPPO.py "$@" --seed "$seed" --teacher "$teacher" --re-feed-type "$FEED_TYPE" \
                --re-num-interaction "$NUM_INTERACTION" --re-max-feed "$max_feed" --re-batch "$re_batch"
        done
    done
}

# dmc_grid PPO_FLAGS... -- PRETRAIN_FLAGS...: B-Pref's dm_control grid for every seed: PrefPPO (segments
# of 50, every budget and teacher), PPO, and PPO with unsupervised pretraining, as ALGOS asks.
dmc_grid() {
    local ppo_flags=() pretrain_flags=() seed
    while [[ $# -gt 0 && "$1" != "--" ]]; do
        ppo_flags+=("$1")
        shift
    done
    [[ $# -gt 0 ]] && shift
    pretrain_flags=("$@")
    for seed in $SEEDS; do
        if wants PrefPPO; then
            prefppo_grid "$seed" "${ppo_flags[@]}" "${pretrain_flags[@]}" --re-segment 50
        fi
        if wants PPO; then
            run train_PPO.py "${ppo_flags[@]}" --seed "$seed"
        fi
        if wants PPO_unsuper; then
            run train_PPO.py "${ppo_flags[@]}" "${pretrain_flags[@]}" --seed "$seed" --pretrain 1
        fi
    done
}
