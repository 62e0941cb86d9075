#!/usr/bin/env bash
# B-Pref's walker_walk grid: PrefPPO (6 teachers x budgets 500/50 and 1000/100), PPO and
# PPO + unsupervised pretraining on the true reward, for each seed.
#   examples/scripts/run_walker_walk.sh                  # B-Pref's ten seeds
#   ALGOS=PrefPPO TEACHERS="oracle mistake" examples/scripts/run_walker_walk.sh 1 2 3
# (see common.sh for the other knobs)
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
BUDGETS="${BUDGETS:-500:50 1000:100}"

PPO_FLAGS=(--env walker_walk --lr 0.00005 --batch-size 64 --n-envs 32 --ent-coef 0.0 --n-steps 500
    --total-timesteps 4000000 --num-layer 3 --hidden-dim 256 --clip-init 0.4 --gae-lambda 0.92)
PRETRAIN_FLAGS=(--unsuper-step 32000 --unsuper-n-epochs 50)

dmc_grid "${PPO_FLAGS[@]}" -- "${PRETRAIN_FLAGS[@]}"
