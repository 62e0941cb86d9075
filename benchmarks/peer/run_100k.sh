#!/usr/bin/env bash
# The peer_100k study, resumable: seeds 100-109, both sides of each CPU ratio at the same time
# (imitation beside PPO_REWARD, then PPO on the true reward beside the random-teacher floor).
# A result already in results/peer_100k/ is not run again.
set -u
cd "$(dirname "$0")/../.."
IMITATION_PY=${IMITATION_PY:-/work/venvs/imitation/bin/python}
one() {  # library seed
  local interpreter=python
  [ "$1" = imitation ] && interpreter=$IMITATION_PY
  [ -f "benchmarks/peer/results/peer_100k/$1_Pendulum-v1_$2.json" ] && return 0
  "$interpreter" -m benchmarks peer run --study peer_100k --library "$1" --seed "$2" \
    > "/tmp/peer_100k_$1_$2.log" 2>&1 || echo "failed: $1 seed $2 (log /tmp/peer_100k_$1_$2.log)"
}
for seed in $(seq "${FIRST:-100}" "${LAST:-109}"); do
  one imitation "$seed" & one sb3_pref "$seed" & wait
  one ppo "$seed" & one sb3_pref_floor "$seed" & wait
  echo "seed $seed done $(date -u +%H:%M)"
done
