#!/usr/bin/env bash
# Install matrix of the extras (slow, outside the quick suite): builds sb3_pref's sdist with `python -m build`
# (the [build-system] of pyproject.toml), then installs it into a fresh venv per scenario, extras in the given
# order, one pip call per step, and requires `pip check` to pass, a dm_control walker_walk VecEnv (and a
# Meta-World task where installed) to step, and the gym ids to resolve. Then, in the dmc-then-metaworld venv:
# the clash of issue 16 (a dm-control built for a newer MuJoCo over Meta-World's MuJoCo 3.3.0) must warn at
# `import sb3_pref.envs`; `pip install -U dm-control` (MuJoCo 4 in three packages past Meta-World's pin,
# issue 26) must warn naming Meta-World's pin, and the command printed must repair the venv.
#
#   bash tests/install_matrix.sh [WORKDIR]      # prints one line per scenario and a summary table
#   SCENARIOS="dmc-then-metaworld" bash tests/install_matrix.sh   # only these scenarios (default: all)
set -uo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
work="${1:-$(mktemp -d)}"
mkdir -p "$work"
export MUJOCO_GL="${MUJOCO_GL:-osmesa}" PIP_DISABLE_PIP_VERSION_CHECK=1

rm -rf "$work/dist" "$work/src" && mkdir -p "$work/src"
# Built from a copy of the tracked and new files, so that setup.py's build folders never land in the checkout.
git ls-files -co --exclude-standard | tar cf - -T - | tar xf - -C "$work/src"
# In an isolated build environment from pyproject.toml's [build-system], as pip and `python -m build` build it.
rm -rf "$work/venv-build" && python -m venv "$work/venv-build" && "$work/venv-build/bin/pip" install -q build >/dev/null 2>&1 \
  || { echo "installing build failed"; exit 1; }
(cd "$work/src" && "$work/venv-build/bin/python" -m build --sdist -o "$work/dist" >"$work/build.log" 2>&1) \
  || { echo "sdist build failed (see $work/build.log)"; exit 1; }
sdist="$(ls "$work"/dist/sb3_pref-*.tar.gz)"
echo "sdist: $(basename "$sdist")"
grep -q "License classifiers are deprecated" "$work/build.log" && { echo "FAIL the build warns about the license classifier"; exit 1; }
pkg_info="$(tar xzf "$sdist" -O "$(basename "$sdist" .tar.gz)/PKG-INFO")"
grep -qx "License-Expression: MIT" <<<"$pkg_info" || { echo "FAIL PKG-INFO lacks License-Expression: MIT"; exit 1; }
# The sdist must carry what its tests and docs build need.
contents="$(tar tzf "$sdist")"
for needed in mkdocs.yml docs/index.md tests/test_docs.py benchmarks/README.md examples/quickstart.py LICENSE \
  sb3_pref/py.typed sb3_pref/zoo/hyperparams/ppo_reward.yml; do
  grep -q "/$needed\$" <<<"$contents" || { echo "FAIL sdist lacks $needed"; exit 1; }
done
echo "sdist carries docs/, tests/, benchmarks/, examples/, mkdocs.yml, LICENSE, zoo hyperparameters"

smoke_py='
import warnings, importlib.util, gymnasium as gym
# Our version-clash warning fails the smoke test (warnings of other libraries, e.g. the env checker of gymnasium, do not).
warnings.filterwarnings("error", message="MuJoCo mismatch", category=UserWarning)
import sb3_pref
from sb3_pref.envs import make_vec_dmcontrol_env
import numpy as np
if importlib.util.find_spec("dm_control"):
    env = make_vec_dmcontrol_env("walker_walk", n_envs=1, seed=0)
    env.reset()
    obs, reward, done, info = env.step(np.zeros((1, 6), dtype=np.float32))
    assert obs.shape == (1, 24), obs.shape
    env.close()
    assert gym.make("cheetah_run").reset(seed=0)[0].shape == (17,)
    print("dm_control walker_walk steps", end="; ")
if importlib.util.find_spec("metaworld"):
    env = gym.make("metaworld_button-press-topdown-v2")
    obs, _ = env.reset(seed=0)
    env.step(env.action_space.sample())
    assert obs.shape == (39,), obs.shape
    print("metaworld button-press-topdown steps", end="; ")
if importlib.util.find_spec("pygame"):
    from importlib.metadata import version
    print("pygame-ce", version("pygame-ce"), end="; ")
print("ok")
'

run_scenario() {  # name, then one extras spec per install step
  local name="$1"; shift
  local venv="$work/venv-$name" log="$work/$name.log" steps="$*"
  rm -rf "$venv"
  python -m venv "$venv"
  # torch first (CPU build), as scripts/setup.sh does, so no step pulls the CUDA build.
  if ! "$venv/bin/pip" install -q "torch==2.13.0" >"$log" 2>&1; then echo "| $name | $steps | torch install failed | - |"; return 1; fi
  for extras in "$@"; do
    if ! "$venv/bin/pip" install -q "${sdist}[${extras}]" >>"$log" 2>&1; then
      echo "| $name | $steps | pip install [$extras] failed (see $log) | - |"; return 1
    fi
  done
  local check smoke versions
  check="$("$venv/bin/pip" check 2>&1 | tail -1)"
  versions="$("$venv/bin/python" -c 'from importlib.metadata import version as v, PackageNotFoundError as E
out = []
for p in ("mujoco", "dm-control", "metaworld"):
    try: out.append(f"{p} {v(p)}")
    except E: pass
print(", ".join(out))')"
  # stdout only (library warnings go to the log), so the one summary line is kept whole.
  smoke="$(cd "$work" && "$venv/bin/python" -c "$smoke_py" 2>>"$log" | tail -1)"
  echo "| $name | $steps | $versions | $check | $smoke |"
  [[ "$check" == "No broken requirements found." && "$smoke" == *ok ]]
}

failures=0
scenarios="${SCENARIOS:-dmc-then-metaworld metaworld-then-dmc together all zoo-human-dmc}"
scenario() {  # runs the scenario when SCENARIOS names it
  [[ " $scenarios " == *" $1 "* ]] || return 0
  run_scenario "$@" || failures=$((failures + 1))
}
echo
echo "| scenario | install steps, in order | versions after | pip check | smoke |"
echo "| --- | --- | --- | --- | --- |"
scenario dmc-then-metaworld dmc metaworld
scenario metaworld-then-dmc metaworld dmc
scenario together dmc,metaworld
scenario all all
scenario zoo-human-dmc zoo human dmc

venv="$work/venv-dmc-then-metaworld"
if [[ " $scenarios " == *" dmc-then-metaworld "* ]] && [ -x "$venv/bin/pip" ]; then
  # Issue 26: `pip install -U dm-control` beside Meta-World pulls MuJoCo 4 (mujoco, mujoco-core, mujoco-studio)
  # past Meta-World's pin. The warning must name that pin, and the command it prints must repair the venv.
  "$venv/bin/pip" install -q -U dm-control >"$work/upgrade.log" 2>&1
  warning="$("$venv/bin/python" -W always -c "import sb3_pref.envs" 2>&1 | grep -o 'MuJoCo mismatch: .*' | head -1)"
  fix="$(grep -o 'Fix: .*' <<<"$warning" | sed 's/^Fix: //')"
  versions="$("$venv/bin/pip" list 2>/dev/null | grep -iE '^(dm.control|mujoco)' | tr -s ' ' | paste -sd, | sed 's/,/, /g')"
  echo "after pip install -U dm-control ($versions): ${warning:0:160}..."
  if [[ "$warning" != *"metaworld 3.1.1 needs mujoco==3.3.0"* || "$warning" != *"Meta-World 3.1.1 pins mujoco==3.3.0"* \
    || "$fix" != "pip uninstall -y mujoco mujoco-core mujoco-studio && pip install \"dm-control==1.0.28\" \"mujoco==3.3.0\"" ]]; then
    echo "FAIL the warning after pip install -U dm-control does not name Meta-World's pin and the repair"; failures=$((failures + 1))
  else
    # The printed command, as a person pastes it into the venv's shell.
    PATH="$venv/bin:$PATH" bash -c "$fix" >"$work/repair.log" 2>&1
    check="$("$venv/bin/pip" check 2>&1 | tail -1)"
    smoke="$(cd "$work" && "$venv/bin/python" -c "import mujoco; $smoke_py" 2>>"$work/repair.log" | tail -1)"
    echo "the printed repair ($fix): $check; $smoke"
    [[ "$check" == "No broken requirements found." && "$smoke" == *ok ]] || failures=$((failures + 1))
  fi

  # The clash of issue 16, forced: sb3_pref.envs must warn and name the fix.
  if "$venv/bin/pip" install -q --no-deps "dm-control==1.0.50" >/dev/null 2>&1; then
    warning="$("$venv/bin/python" -W always -c "import sb3_pref.envs" 2>&1 | grep -o 'dm-control 1.0.50 needs.*' | head -1)"
    if [[ "$warning" == *"The dm_control tasks will fail. Fix: pip uninstall -y mujoco mujoco-core mujoco-studio && pip install \"dm-control==1.0.28\" \"mujoco==3.3.0\"" ]]; then
      echo "forced clash (dm-control 1.0.50 over mujoco 3.3.0) warns at import: ${warning:0:120}..."
    else
      echo "FAIL forced clash gave no warning naming the fix"; failures=$((failures + 1))
    fi
  fi
fi

# The sdist's own tests run from the unpacked sdist (registration and version checks need no extra tool).
venv="$work/venv-together"
if [ -x "$venv/bin/pip" ]; then
  rm -rf "$work/unpacked" && mkdir -p "$work/unpacked" && tar xzf "$sdist" -C "$work/unpacked"
  "$venv/bin/pip" install -q pytest pytest-timeout >/dev/null 2>&1
  result="$(cd "$work"/unpacked/sb3_pref-* && "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/test_registration.py 2>&1 | tail -1)"
  echo "tests from the unpacked sdist (tests/test_registration.py): $result"
  [[ "$result" == *passed* && "$result" != *failed* ]] || failures=$((failures + 1))
fi
echo
echo "python $(python -c 'import sys; print(sys.version.split()[0])'), $(lscpu | grep 'Model name' | sed 's/ \+/ /g'), $(date -u +%Y-%m-%d)"
echo "install matrix: $failures failure(s)"
exit "$failures"
