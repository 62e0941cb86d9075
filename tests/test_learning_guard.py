"""
The learning-quality guard (issues 23 and 42): the README's demo must teach the task, and known regressions must fail.

The demo (``examples/quickstart.py``) trains PPO_REWARD on cartpole_balance from 400 oracle labels, with nothing
set but the reward model, the teacher and the label budget: the schedule is the library's default plan for the
budget (``sb3_pref.core.feedback_plan``), so the guard guards the defaults.

The guard runs the whole demo budget, one ``learn(120_000)`` call, on each of ``GUARD_SEEDS`` (3 and 37) and judges
the *final* deterministic true return (5 episodes): it must end above the seed's own start by ``MARGIN`` (250).
Judging the end, not the first good check, fails a run that peaks and then collapses.

How the seeds were chosen. A guard needs seeds on which today's main passes and a known regression fails, so its
seeds are picked by a screen of the settings that ``benchmarks/demo/README.md`` showed regress on some seeds
(``REGRESSIONS``), applied on top of the defaults (``python tests/test_learning_guard.py [NAME-PREFIX] [SEEDS]``;
one thread per run, two runs at a time). The screen was redone when the agreement diagnostic got its own random
stream (issue 41's follow-up), which moves every run's path: AMD EPYC with AVX512-BF16 (reward model in bfloat16),
true return after 120k steps, the seed's start in brackets, **bold** where it fails (end below start + 250):

=============================  =========  =========  =========  =========  =========  =========  =========
run                            1 (641)    2 (637)    3 (650)    4 (548)    31 (682)   32 (570)   33 (612)
=============================  =========  =========  =========  =========  =========  =========  =========
the defaults (today's main)    985.7      998.7      995.1      999.8      993.6      985.1      **447.1**
200 first, then 50 every 12k   987.0      999.7      992.9      995.2      998.2      999.7      991.0
label_margin=0.05              926.4      999.4      **788.2**  981.2      954.0      994.3      979.2
=============================  =========  =========  =========  =========  =========  =========  =========

=============================  =========  =========  =========  =========  =========  =========
run                            34 (709)   35 (579)   36 (569)   37 (623)   38 (703)   39 (694)
=============================  =========  =========  =========  =========  =========  =========
the defaults (today's main)    996.6      **816.5**  998.6      994.7      995.2      990.1
200 first, then 50 every 12k   **957.1**  984.7      997.4      **655.5**  996.4      989.1
label_margin=0.05              **328.2**  999.8      981.1      966.6      996.9      985.2
=============================  =========  =========  =========  =========  =========  =========

- Seed 3 fails ``label_margin=0.05`` (788.2 against the defaults' 995.1) and seed 37 "200 first, then 50 every
  12k" (655.5 against 994.7). The suite may run on a CPU without bf16, where ``train_dtype="auto"`` trains the
  reward model in float32 and every path differs, so the guard's seeds must pass there too: with float32 forced on
  this machine the defaults end at 975.1 on seed 3 and 995.8 on seed 37, and at **608.0** on seed 34, which is why
  34 (the strongest catch of ``label_margin=0.05`` in bfloat16) is not a guard seed. Seed 3 is one of the
  development seeds the default plan was chosen on (0-16), so the defaults passing there is no evidence of quality;
  quality is reported on seeds nobody chose anything on (``benchmarks/defaults``, ``benchmarks/quality``).
- Which seeds fail moves with every change to a run's path: before the diagnostic's own stream (AVX2-only AMD EPYC,
  float32) the defaults failed 34 (185.7) and 37 (413.0) and passed 33 and 35, and the guard used seeds 1 and 32.
  At this budget the defaults and PPO on the true reward both end below start + 250 on about one seed in ten
  (``benchmarks/defaults/README.md``: 5 and 4 of 40 development seeds, never the same seed twice), so a
  guard seed is a seed on which today's path passes, not a seed that always passes.
- A faster reward head (``benchmarks/successors/README.md``, ``cost_head``) moved every path and failed seed 37 in
  float32; its float32 screen is in ``benchmarks/successors/results/cost_head/guard_screen_float32.md`` (seeds 3 and
  34 would guard both regressions there), and taking it waits for the same screen on a CPU with AVX512-BF16.
- "200 first, then 25 every 8k" (the plan with its last label at six tenths) is not in the screen: on 40
  development seeds it fell short on 8 where the defaults fell short on 5, a worse plan but not one a fixed pair of
  seeds can catch.
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
STUDY_SEEDS = (1, 2, 3, 4, *range(31, 40))
#: the seeds the suite runs: seed 3 fails ``label_margin=0.05``, seed 37 fails "200 first, then 50 every 12k"
GUARD_SEEDS = (3, 37)
#: the demo's step budget and label budget
GUARD_STEPS, LABELS = 120_000, 400
#: the final return must clear the seed's start by this much
MARGIN = 250.0

#: settings that ``benchmarks/demo/README.md`` showed regress on some seeds and pass on others; the guard must fail each
#: of them (``python tests/test_learning_guard.py`` runs them)
REGRESSIONS: dict[str, dict[str, Any]] = {
    "200 first, then 50 every 12k": dict(model=dict(initial_mb_size=200, mb_size=50), num_interaction=12_000),
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
