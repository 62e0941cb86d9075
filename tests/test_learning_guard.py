"""
The learning-quality guard (issues 23 and 42): the README's demo must teach the task, on seeds nobody tuned on.

The demo (``examples/quickstart.py``) trains PPO_REWARD on cartpole_balance from 400 oracle labels, with nothing
set but the reward model, the teacher and the label budget: the schedule is the library's default plan for the
budget (``sb3_pref.core.feedback_plan``), so the guard guards the defaults.

The guard runs the whole demo budget, one ``learn(120_000)`` call, on each of ``GUARD_SEEDS`` and judges the *final*
deterministic true return (5 episodes): it must end above the seed's own start by ``MARGIN``. The suite runs seeds 31
and 32; the study below (``STUDY_SEEDS``) adds seed 33, which in the table separates nothing that seed 31 does not
(both pass every variant), while its 2.5 CPU minutes put the suite past its 10 minutes. The seeds were fixed
before anything was run on them and were never used to choose a setting (the plan was chosen on seeds 0-16, reports
use 100 and up). Judging the end, not the first good check, fails a run that peaks and then collapses.

The figures (``python tests/test_learning_guard.py``, AMD EPYC, AVX2, one thread per run, two runs at a time), true
return start -> end (5 episodes each), ``MARGIN`` = 250:

=============================  ==============  ==============  ==============
run                            seed 31         seed 32         seed 33
=============================  ==============  ==============  ==============
the defaults (today's main)    681.9 -> 992.0  569.7 -> 985.6  611.6 -> 992.5
200 first, then 50 every 12k   681.9 -> 935.3  569.7 -> 725.8  611.6 -> 986.8  FAILS (seed 32)
200 first, then 25 every 8k    681.9 -> 985.6  569.7 -> 971.2  611.6 -> 997.8  passes
label_margin=0.05              681.9 -> 960.8  569.7 -> 967.6  611.6 -> 967.1  passes
=============================  ==============  ==============  ==============

So the guard catches what regresses on these seeds ("50 every 12k" fails seed 32; the demo's schedule before issue
23, 50 labels every 12k, ended at 288 / 191 / 421 on seeds 0-2 in ``demo/README.md`` and was not rerun on these seeds) and
lets through what regresses only on other seeds: "25 every 8k" (400.4 on seed 1 in ``demo/README.md``) and
``label_margin=0.05`` (331.4 / 344.2 on seeds 1-2) end within 3% of the defaults here.

Looking for seeds that would fail the other two, seeds 34-39 were run too (``python tests/test_learning_guard.py
"" 34,35,36,37,38,39``, the runs in ``benchmarks/demo/results/guard_screen``, same machine, two runs at a time beside
two other jobs; end of each run, start in brackets):

=============================  =======  =======  =======  =======  =======  =======
run                            34 (709) 35 (579) 36 (569) 37 (623) 38 (703) 39 (694)
=============================  =======  =======  =======  =======  =======  =======
the defaults (today's main)    185.7    997.0    959.9    413.0    996.8    995.9
200 first, then 50 every 12k   636.1                      492.4
200 first, then 25 every 8k    962.1    998.3    943.2    999.6    921.5    999.8
label_margin=0.05              364.0    993.4    907.8    508.4    977.2    999.1
=============================  =======  =======  =======  =======  =======  =======

``label_margin=0.05`` fails only on seeds 34 and 37, where **the defaults fail too**: they are not seeds a guard of
today's main can run, and no seed of 31-39 separates ``label_margin=0.05`` or "25 every 8k" from the defaults (the
latter ends far above its start on all nine). What the screen found instead is the defaults' own failure rate at this
budget: 2 of these 9 seeds end below their start (with 1 of 17 development seeds and 1 of 10 fresh ones,
``benchmarks/defaults/README.md``), the failure the demo's write-up describes (the first rewards lead the policy into a
basin that the later labels correct in the reward, not in the policy). Seed-specific regressions are the frozen
protocol's job (``benchmarks/quality``, 10 fresh seeds); an absolute bar tight enough to separate 971 from 986 would
also separate this machine's trajectories from another CPU's.
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

#: fixed before any run on them; never used to choose a setting
STUDY_SEEDS = (31, 32, 33)
#: the seeds the suite runs: seed 32 is the one that fails "50 every 12k"
GUARD_SEEDS = STUDY_SEEDS[:2]
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
