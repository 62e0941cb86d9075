"""
The learning-quality guard (issues 23 and 42): the README's demo must teach the task, and known regressions must fail.

The demo (``examples/quickstart.py``) trains PPO_REWARD on cartpole_balance from 400 oracle labels, with nothing
set but the reward model, the teacher and the label budget: the schedule is the library's default plan for the
budget (``sb3_pref.core.feedback_plan``), so the guard guards the defaults.

The guard runs the whole demo budget, one ``learn(120_000)`` call, on each of ``GUARD_SEEDS`` (1 and 32) and judges
the *final* deterministic true return (5 episodes): it must end above the seed's own start by ``MARGIN`` (250).
Judging the end, not the first good check, fails a run that peaks and then collapses.

How the seeds were chosen. A guard needs seeds on which today's main passes and a known regression fails, so its
seeds are picked by a screen of the three settings that ``benchmarks/demo/README.md`` showed regress on some seeds
(``REGRESSIONS``), applied on top of the defaults (``python tests/test_learning_guard.py [NAME-PREFIX] [SEEDS]``;
AMD EPYC, AVX2, one thread per run, two runs at a time; runs in ``benchmarks/demo/results/guard_screen``). True
return after 120k steps, the seed's start in brackets, **bold** where it fails (end below start + 250):

=============================  =========  =========  =========  =========  =========  =========  =========
run                            1 (641)    2 (637)    3 (650)    4 (548)    31 (682)   32 (570)   33 (612)
=============================  =========  =========  =========  =========  =========  =========  =========
the defaults (today's main)    985.5      998.6      999.7      910.9      992.0      985.6      992.5
200 first, then 50 every 12k   999.5      969.0                            935.3      **725.8**  986.8
200 first, then 25 every 8k    999.3      997.7      999.7      999.7      985.6      971.2      997.8
label_margin=0.05              **765.2**  992.2                            960.8      967.6      967.1
=============================  =========  =========  =========  =========  =========  =========  =========

and on seeds 34-39 (start in brackets):

=============================  =========  =========  =========  =========  =========  =========
run                            34 (709)   35 (579)   36 (569)   37 (623)   38 (703)   39 (694)
=============================  =========  =========  =========  =========  =========  =========
the defaults (today's main)    **185.7**  997.0      959.9      **413.0**  996.8      995.9
200 first, then 50 every 12k   636.1                            492.4
200 first, then 25 every 8k    962.1      998.3      943.2      999.6      921.5      999.8
label_margin=0.05              364.0      993.4      907.8      508.4      977.2      999.1
=============================  =========  =========  =========  =========  =========  =========

- Seed 32 fails "200 first, then 50 every 12k"; seed 1 fails ``label_margin=0.05``; the defaults pass both. Seeds
  34 and 37 separate nothing: the defaults fail there too (the basin failure ``benchmarks/demo/README.md``
  describes: 3 of the 19 seeds nobody chose anything on, 31-39 and 101-110, end below their start, as
  ``benchmarks/defaults/README.md`` reports).
- "200 first, then 25 every 8k" is not a regression of today's defaults: it ends far above its start on all 13
  seeds screened (1-4, 31-39), above the defaults on 7 of them. Its 400.4 on seed 1 in ``demo/README.md`` was
  measured on the demo as it was before issue 41's defaults, not on today's library. No guard of today's main can
  fail it, so this one does not.
- Seed 1 is one of the development seeds the default plan was chosen on (0-16), so the defaults passing on it is
  no evidence of quality; it is here because it is the only screened seed that catches ``label_margin=0.05``.
  Quality is reported on seeds nobody chose anything on: ``benchmarks/defaults`` (101-110) and the frozen
  protocol (``benchmarks/quality``). Seed 31 (in the guard until issue 42's screen) separates nothing that seed 32
  does not, so seed 1 replaced it at the same cost: two seeds, about 150 CPU s each, the suite's two workers.
- Seed-specific regressions beyond these are the protocol's job; an absolute bar tight enough to separate 971 from
  986 would also separate this machine's trajectories from another CPU's.
"""

import os
import sys
from typing import Any

import pytest
import torch as th

pytest.importorskip("dm_control")
from stable_baselines3.common.evaluation import evaluate_policy

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from examples.quickstart import build
from sb3_pref import RewardModel
from sb3_pref.envs import make_vec_dmcontrol_env

#: the seeds ``python tests/test_learning_guard.py`` screens when given none
STUDY_SEEDS = (1, 2, 31, 32, 33)
#: the seeds the suite runs: seed 1 fails ``label_margin=0.05``, seed 32 fails "200 first, then 50 every 12k"
GUARD_SEEDS = (1, 32)
#: the demo's step budget and label budget
GUARD_STEPS, LABELS = 120_000, 400
#: the final return must clear the seed's start by this much
MARGIN = 250.0

#: settings that ``benchmarks/demo/README.md`` showed regress on some seeds and pass on others; the guard must fail each
#: of them (``python tests/test_learning_guard.py`` runs them)
REGRESSIONS: dict[str, dict[str, Any]] = {
    "200 first, then 50 every 12k": dict(model=dict(initial_mb_size=200, mb_size=50), num_interaction=12_000),
    "200 first, then 25 every 8k": dict(model=dict(initial_mb_size=200, mb_size=25), num_interaction=8_000),
    "label_margin=0.05": dict(model=dict(label_margin=0.05)),
}


def train_demo(seed: int, **options: Any) -> tuple[float, float, int]:
    """
    The demo on one seed, as a user runs it: build, evaluate, one ``learn`` over the whole budget, evaluate.

    :param seed: the seed of the envs (evaluation: ``seed + 1000``), the policy, the reward model and the teacher
    :param options: ``model`` (``RewardModel`` keyword arguments) and ``PPO_REWARD`` options that replace the defaults
    :return: the deterministic true return before and after (5 episodes each) and the labels asked
    """
    env = make_vec_dmcontrol_env("cartpole_balance", n_envs=8, seed=seed)
    eval_env = make_vec_dmcontrol_env("cartpole_balance", n_envs=1, seed=seed + 1000)
    model_kwargs = options.pop("model", {})
    if model_kwargs:
        options["reward_model"] = RewardModel(env.observation_space, env.action_space, **model_kwargs)
    model = build(env, seed=seed, max_feed=LABELS, **options)
    before, _ = evaluate_policy(model, eval_env, n_eval_episodes=5)
    model.learn(GUARD_STEPS)
    after, _ = evaluate_policy(model, eval_env, n_eval_episodes=5)
    return float(before), float(after), int(model.pref_learner.total_feed)


@pytest.mark.parametrize("seed", GUARD_SEEDS)
def test_the_demo_lifts_the_true_return_far_above_its_start(seed):
    before, after, asked = train_demo(seed)
    assert asked == LABELS  # the whole budget was asked: the reward really was learned
    assert after > before + MARGIN, f"seed {seed}: true return {before:.1f} -> {after:.1f}: the demo no longer learns"


def _run(job: tuple[str, int]) -> tuple[str, int, float, float]:
    name, seed = job
    th.set_num_threads(1)
    options = {} if name == "defaults" else {k: (dict(v) if isinstance(v, dict) else v) for k, v in REGRESSIONS[name].items()}
    before, after, _ = train_demo(seed, **options)
    return name, seed, before, after


if __name__ == "__main__":
    # The guard's own study: the defaults and each regression on the study seeds, two runs at a time. Arguments, both
    # optional: only the runs whose name starts with the first, on the seeds of the second (comma-separated), e.g.
    # ``python tests/test_learning_guard.py label 34,37``.
    from concurrent.futures import ProcessPoolExecutor

    names = [name for name in ("defaults", *REGRESSIONS) if len(sys.argv) < 2 or name.startswith(sys.argv[1])]
    seeds = [int(seed) for seed in sys.argv[2].split(",")] if len(sys.argv) > 2 else STUDY_SEEDS
    jobs = [(name, seed) for name in names for seed in seeds]
    with ProcessPoolExecutor(2) as pool:
        for name, seed, before, after in pool.map(_run, jobs):
            verdict = "passes" if after > before + MARGIN else "FAILS"
            print(f"| {name} | {seed} | {before:.1f} | {after:.1f} | {verdict} |", flush=True)
