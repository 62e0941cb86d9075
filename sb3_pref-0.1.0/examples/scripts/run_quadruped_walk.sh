#!/usr/bin/env bash
# B-Pref's quadruped_walk grid: PrefPPO (6 teachers x budgets 1000/100 and 2000/200), PPO and
# PPO + unsupervised pretraining on the true reward, for each seed.
#   examples/scripts/run_quadruped_walk.sh               # B-Pref's ten seeds
#   BUDGETS=1000:100 TEACHERS=skip examples/scripts/run_quadruped_walk.sh 12345
# (see common.sh for the other knobs)
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
BUDGETS="${BUDGETS:-1000:100 2000:200}"

PPO_FLAGS=(--env quadruped_walk --lr 0.00005 --batch-size 128 --n-envs 16 --ent-coef 0.0 --n-steps 500
    --total-timesteps 4000000 --num-layer 3 --hidden-dim 256 --clip-init 0.4 --gae-lambda 0.9)
PRETRAIN_FLAGS=(--unsuper-step 32000 --unsuper-n-epochs 50)

dmc_grid "${PPO_FLAGS[@]}" -- "${PRETRAIN_FLAGS[@]}"
