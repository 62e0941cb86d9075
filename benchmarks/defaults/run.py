"""
The defaults study (issue 41): what a user who swaps ``PPO`` for ``PPO_REWARD`` gets, giving only a reward model, a
teacher and a label budget, against PPO on the true reward, the best hand-set schedule of
``benchmarks/quality_grid/README.md``, and a floor (a teacher that answers at random, same budget).

    python -m benchmarks defaults run --phase dev       # seeds 0-4: where the plan's choices were made
    python -m benchmarks defaults run --phase report    # fresh seeds 100+: what the write-up reports
    python -m benchmarks defaults run --phase report_sac     # SAC_REWARD against SAC on Pendulum-v1
    python -m benchmarks defaults run --phase report_long    # cartpole_swingup at 400k steps
    python -m benchmarks defaults run --phase report_peer    # the peer's Pendulum-v1 tutorial budget
    python -m benchmarks defaults run --phase report_walker_sac  # SAC_REWARD against SAC on walker_stand, 100k
    python -m benchmarks defaults run --phase report_snippet     # the README's snippet: walker_walk at 1M beside PPO
    python -m benchmarks defaults table                 # the tables of README.md

``python benchmarks/defaults/run.py --phase ...`` still works: jobs run it so.

Each finished run writes ``results/<task>/<arm>/seed<N>.json`` (settings, plan, returns, evaluation curve, CPU
seconds); a run whose file exists is skipped, so a stopped study resumes. Two runs at a time, one torch thread each,
ordered so that the PPO run and the PPO_REWARD runs of a seed run side by side (both see the same load).
"""

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Optional

HERE = Path(__file__).resolve().parent
# Runs measure this checkout (its commit is recorded with each result), not whatever copy is installed.
sys.path.insert(0, str(HERE.parents[1]))
RESULTS = HERE / "results"
from benchmarks.machine import cpu_name  # noqa: E402
from benchmarks.study import Option, probe, run_script, shared, write_json  # noqa: E402  (the root is on the path from here)

# The PPO the user already has (the README demo's on dm_control; RL Zoo's tuned PPO on Pendulum-v1).
DMC_PPO: dict[str, Any] = dict(
    n_steps=250, batch_size=250, n_epochs=10, learning_rate=3e-4, gae_lambda=0.92,
    policy_kwargs={"net_arch": {"pi": [128, 128], "vf": [128, 128]}},
)  # fmt: skip
PENDULUM_PPO: dict[str, Any] = dict(
    n_steps=1024, batch_size=64, gae_lambda=0.95, gamma=0.9, n_epochs=10, learning_rate=1e-3, use_sde=True,
    sde_sample_freq=4,
)  # fmt: skip

#: task -> (env steps, label budget, envs, PPO settings, the best hand-set schedule of quality_grid/README.md at that budget)
TASKS: dict[str, dict[str, Any]] = {
    "cartpole_balance": dict(
        steps=120_000, labels=400, n_envs=8, ppo=DMC_PPO,
        # the README demo's schedule before issue 41 (benchmarks/demo/README.md)
        handset=dict(num_interaction=4000, unsuper_step=8000, unsuper_n_epochs=10, re_update=50,
                     feed_type="disagreement", model=dict(initial_mb_size=200, mb_size=25)),
    ),
    "Pendulum-v1": dict(
        steps=100_000, labels=200, n_envs=4, ppo=PENDULUM_PPO,
        handset=dict(num_interaction=4096, unsuper_step=8192, unsuper_n_epochs=10, re_update=50,
                     feed_type="disagreement", model=dict(initial_mb_size=100, mb_size=25)),
    ),
    "cartpole_swingup": dict(
        steps=400_000, labels=1000, n_envs=8, ppo=DMC_PPO,
        handset=dict(num_interaction=16000, unsuper_step=8000, unsuper_n_epochs=10, re_update=50,
                     feed_type="disagreement", model=dict(initial_mb_size=100, mb_size=50)),
    ),
    # the peer's Pendulum-v1 tutorial budget (imitation's preference-comparisons tutorial: 50k steps, 200 comparisons,
    # its PPO settings; benchmarks/peer/peer_imitation.py)
    "Pendulum-v1-peer": dict(
        steps=50_000, labels=200, n_envs=8, handset=None,
        ppo=dict(n_steps=256, batch_size=64, ent_coef=0.01, learning_rate=2e-3, clip_range=0.1, gae_lambda=0.95,
                 gamma=0.97, n_epochs=10, policy_kwargs=dict(net_arch=[32, 32])),
    ),
    # SAC_REWARD against SAC, SB3's SAC defaults (pebble/README.md's Pendulum-v1 budget)
    "Pendulum-v1-sac": dict(steps=20_000, labels=200, n_envs=1, sac=True, handset=None),
    # issue 41's SAC bar: SAC_REWARD at its defaults against SB3's SAC on dm_control walker_stand, 100k steps, B-Pref's
    # 1000 labels (pebble/README.md measured PEBBLE's hand-set schedule there: 0.65 of SAC)
    "walker_stand-sac": dict(steps=100_000, labels=1000, n_envs=1, sac=True, handset=None),
    # the README's swap snippet as written: walker_walk, 8 envs, PPO with n_steps=500 (SB3's defaults otherwise),
    # 1M steps, B-Pref's 1000 labels; issue 41's bar is 0.9 of PPO with the same settings, 3 seeds side by side
    "walker_walk": dict(steps=1_000_000, labels=1000, n_envs=8, ppo=dict(n_steps=500), handset=None),
    # issue 41's item 4 task walker_stand at 500k, 1000 labels, as quality_grid/README.md ran it: the demo's PPO with
    # observations normalised (VecNormalize, not the reward: without it PPO reaches 250 at 600k), and that grid's
    # hand-set schedule (100 labels, then 50 every 16k steps until ~296k)
    "walker_stand": dict(
        steps=500_000, labels=1000, n_envs=8, ppo=DMC_PPO, normalize_obs=True,
        handset=dict(num_interaction=16000, unsuper_step=8000, unsuper_n_epochs=10, re_update=50,
                     feed_type="disagreement", model=dict(initial_mb_size=100, mb_size=50)),
    ),
}  # fmt: skip

#: arm -> what PPO_REWARD gets beyond the user's PPO (None: PPO on the true reward)
ARMS: dict[str, Optional[dict[str, Any]]] = {
    "ppo": None,
    "defaults": {},  # only the reward model, the teacher and the budget
    # the first candidate: the planned schedule with uniform queries (dev seeds, and report seed 100 on cartpole)
    "defaults_uniform": {"feed_type": "uniform"},
    "handset": {"handset": True},
    # candidates after dev seed 11 and fresh seed 103 stayed below their start: the 8 rounds after the first spread
    # over more of the run (cartpole_balance 120k / 400 labels: the plan's last label at 40k, 1/3 of the run)
    "window_half": {"num_interaction": 6000, "model": dict(initial_mb_size=200, mb_size=25)},  # last label at 56k
    "window_two_thirds": {"num_interaction": 9000, "model": dict(initial_mb_size=200, mb_size=25)},  # ... at 80k
    "random_teacher": {"random_teacher": True},  # the floor: labels at random, the defaults otherwise
    # candidates after the README snippet's walker_walk stayed at 0.57 of PPO and swing-up lost its mid-run level by
    # the end: the plan as it is, with its last label not at a third of the run (LABEL_WINDOW) but at two thirds or at
    # nine tenths of it (the plan's window for this run only; nothing else given)
    "label_window_two_thirds": {"label_window": 2 / 3},
    "label_window_nine_tenths": {"label_window": 0.9},
    # after the label window: walker_walk's reward ranks the policy's own segments at 0.67-0.84, and the library's
    # reward network (3 members of 2x64, chosen on cartpole and Pendulum) is small for 30 inputs: B-Pref's 3x256
    "bpref_net": {"model": dict(hidden_dim=256, n_layers=3, lr=3e-4)},
    # walker_walk's learned reward stops rising with the true one above about 0.3 (reward_shape.py): the reward
    # model's inputs standardised (velocities reach 10 where orientations stay within 1)
    "input_norm": {"model": dict(input_norm=True)},
    # walker_stand at 500k: the grid's hand-set schedule (100 labels, then 50 every 16k until ~296k) ended at 1.8x the
    # defaults on fresh seeds 101-105; which of its two differences matters, screened on development seeds: the last
    # label at six tenths of the run (about the hand-set's), or a first round of 100 (the plan: 250)
    "label_window_six_tenths": {"label_window": 0.6},
    "first_round_100": {"model": dict(initial_mb_size=100)},
    # the hand-set schedule beat the defaults on 12 of 15 walker_stand seeds, the first round of 100 alone on 10 of 15:
    # is the rest its many small rounds (the plan's first round of 250, then 50 every 16k until 250k), or its later
    # window with a small first round (100, then the plan's 8 rounds until six tenths of the run)?
    "many_rounds": {"num_interaction": 16000, "model": dict(initial_mb_size=250, mb_size=50)},
    "first_round_100_six_tenths": {"label_window": 0.6, "model": dict(initial_mb_size=100)},
    # walker_walk ends lower with a first round of 100 than of 250 (dev_snippet_first_round, dev_long_shape_walk):
    # does it gain from a larger one (the other 500 planned around it)?
    "first_round_500": {"model": dict(initial_mb_size=500)},
    # swing-up ends higher with 250 labels than with 1000 (the protocol's seeds 100-104: 647.8 against 529.8): the
    # 750 labels after the first in rounds of 25, the demo's round size (30 rounds every 4k until 130k), not 8 of 94
    "rounds_of_25": {"model": dict(initial_mb_size=250, mb_size=25)},
    # swing-up's policies swing between about 800 and 200 after the last label while the learned reward ranks their
    # episodes right (episodes/, Spearman 0.92-0.98): the defaults, and the policy the learned reward judges best kept
    # (LearnedRewardEvalCallback, 5 episodes every 5% of the run); both the last and the kept policy are evaluated
    "learned_best": {"learned_best": True},
    # ... the floor, judged by its own learned reward (a random teacher's)
    "random_teacher_learned_best": {"random_teacher": True, "learned_best": True},
    # ... and PPO with SB3's EvalCallback keeping its best by the true reward, the same judging schedule
    "ppo_true_best": {"true_best": True},
    # issue 44's RIME with PEBBLE: B-Pref's mistake teacher (10% of answers flipped), without and with RIME's filter
    "mistake10": {"teacher_kwargs": {"eps_mistake": 0.1}},
    "mistake10_rime": {"teacher_kwargs": {"eps_mistake": 0.1}, "rime": True},
    # issue 44's walker_stand arms for PEBBLE: QPA (queries and hybrid replay from the last 10 episodes, its DMC
    # setting) and RIME's warm start (the reward model regressed onto the entropy reward, the critic kept)
    "qpa": {"qpa_episodes": 10},
    "rime_warm": {"rime_warm_start": True, "reset_critic": False},
}

PHASES = {
    "dev": dict(seeds=range(5), arms=("defaults", "defaults_uniform"), tasks=("cartpole_balance", "Pendulum-v1")),
    # after the fresh seed 103 stayed below its start: how often the defaults fail there, on more dev seeds
    "dev_wide": dict(seeds=range(5, 17), arms=("defaults",), tasks=("cartpole_balance",)),
    # the candidates on the slow or failed dev seeds (11, 4, 10, 16) and four that learned (0, 1, 5, 7)
    "dev_window": dict(seeds=(11, 4, 10, 16, 0, 1, 5, 7), arms=("window_half",), tasks=("cartpole_balance",)),
    # cartpole_balance's hand-set schedule is the defaults' plan at this budget, query selection included: no arm of its own
    "report": dict(seeds=range(101, 106), arms=("ppo", "defaults", "random_teacher"), tasks=("cartpole_balance",)),
    # five more fresh seeds on cartpole_balance after seed 103 (nothing was chosen on them)
    "report_more": dict(seeds=range(106, 111), arms=("ppo", "defaults", "random_teacher"), tasks=("cartpole_balance",)),
    "report_pendulum": dict(
        seeds=range(101, 106), arms=("ppo", "defaults", "handset", "random_teacher"), tasks=("Pendulum-v1",)
    ),
    "report_peer": dict(seeds=range(101, 104), arms=("ppo", "defaults", "random_teacher"), tasks=("Pendulum-v1-peer",)),
    "report_sac": dict(seeds=range(101, 104), arms=("ppo", "defaults"), tasks=("Pendulum-v1-sac",)),
    "report_long": dict(seeds=range(101, 104), arms=("ppo", "defaults", "handset"), tasks=("cartpole_swingup",)),
    # issue 44: RIME with PEBBLE (SAC_REWARD) on Pendulum-v1, beside report_sac's SAC and oracle arms on the same seeds
    "report_sac_rime": dict(
        seeds=range(101, 104), arms=("mistake10", "mistake10_rime", "random_teacher"), tasks=("Pendulum-v1-sac",)
    ),
    # about 1,800 CPU s per run (pebble/README.md): SAC and SAC_REWARD of a seed side by side, then the floor
    "report_walker_sac": dict(seeds=range(101, 104), arms=("ppo", "defaults", "random_teacher"), tasks=("walker_stand-sac",)),
    # two more fresh seeds for the SAC bar (0.89 of SAC over 101-103, against 0.9), SAC and SAC_REWARD side by side
    "report_walker_sac_more": dict(seeds=range(104, 106), arms=("ppo", "defaults"), tasks=("walker_stand-sac",)),
    # issue 44: QPA and RIME's warm start on PEBBLE's walker_stand gap, beside report_walker_sac's arms on its seeds
    "report_walker_successors": dict(seeds=range(101, 104), arms=("qpa", "rime_warm"), tasks=("walker_stand-sac",)),
    # the label window on the snippet's task, development seeds (the choice is made here, reported on 101+)
    "dev_snippet": dict(
        seeds=range(5), arms=("defaults", "label_window_two_thirds", "label_window_nine_tenths"), tasks=("walker_walk",)
    ),
    "dev_snippet_net": dict(seeds=range(2), arms=("bpref_net",), tasks=("walker_walk",)),
    # walker_stand's lead (a first round of 100, dev_walker_stand) on the snippet's task
    "dev_snippet_first_round": dict(seeds=range(2), arms=("first_round_100",), tasks=("walker_walk",)),
    # ... and a larger one (a first round of 100 ended below the plan's 250 there)
    "dev_snippet_first_round_500": dict(seeds=range(2), arms=("first_round_500",), tasks=("walker_walk",)),
    # about 6 CPU-minutes per run on the AVX512-BF16 machine: a seed's PPO and PPO_REWARD side by side, one per core
    "report_snippet": dict(seeds=range(101, 104), arms=("ppo", "defaults"), tasks=("walker_walk",)),
    # the floor beside it, after the pairs
    "report_snippet_floor": dict(seeds=range(101, 104), arms=("random_teacher",), tasks=("walker_walk",)),
    # the hand-set schedule's two differences from the plan, on development seeds (nothing reported from them)
    "dev_walker_stand": dict(
        seeds=range(5),
        arms=("defaults", "handset", "label_window_six_tenths", "first_round_100"),
        tasks=("walker_stand",),
    ),
    # which of the hand-set schedule's other parts carries its walker_stand lead (development seeds)
    "dev_walker_stand_rounds": dict(
        seeds=range(5), arms=("many_rounds", "first_round_100_six_tenths"), tasks=("walker_stand",)
    ),
    # dev_walker_stand_rounds' lead (a first round of 100 and the labels until six tenths of the run) on the other
    # long runs' development seeds: the README snippet's walker_walk (0-1, as dev_snippet) and swing-up (0-4, whose
    # defaults ran in the successors study's swingup_dev on this machine type)
    "dev_long_shape_walk": dict(seeds=range(2), arms=("first_round_100_six_tenths",), tasks=("walker_walk",)),
    "dev_long_shape_swingup": dict(seeds=range(5), arms=("first_round_100_six_tenths",), tasks=("cartpole_swingup",)),
    # SAC_REWARD on walker_stand stalls near 450 on two of five fresh seeds (report_walker_sac, _more); its plan, too,
    # draws its first 250 labels from the pretraining's states, where the walker lies on the floor: a first round of
    # 100 (chosen on PPO's walker_stand development seeds, dev_walker_stand) on the same fresh seeds
    "report_walker_sac_first_round": dict(seeds=range(101, 106), arms=("first_round_100",), tasks=("walker_stand-sac",)),
    # two more development seeds of walker_walk for the long shape's verdict there (it rested on seeds 0-1)
    "dev_long_shape_walk_more": dict(
        seeds=range(2, 4), arms=("defaults", "first_round_100_six_tenths"), tasks=("walker_walk",)
    ),
    # dev_walker_stand_rounds' lead on walker_stand's fresh seeds, beside report_walker_stand's arms on the same seeds
    # (it ran as two one-worker invocations over seeds 101-105 and 106-110, one per core; the results are the same files)
    "report_walker_stand_long_shape": dict(
        seeds=range(101, 111), arms=("first_round_100_six_tenths",), tasks=("walker_stand",)
    ),
    # cartpole_balance's failures (3 of 19 unchosen seeds below their start): "200 first, then 25 every 8k" (the plan
    # with its last label at six tenths of the run) ended above its start on all 13 seeds of the guard's screen; the
    # two side by side on 40 new development seeds of this machine (it lost there, so no other task ran it)
    "dev_six_tenths_balance": dict(
        seeds=range(40, 80), arms=("defaults", "label_window_six_tenths"), tasks=("cartpole_balance",)
    ),
    # the six tenths ended below the defaults (8 of 35 seeds short of start + 250 against 5): PPO on the true reward
    # on the same development seeds, how often the user's PPO itself stays near its start at this budget
    "dev_balance_ppo": dict(seeds=range(40, 80), arms=("ppo",), tasks=("cartpole_balance",)),
    "dev_rounds_of_25_swingup": dict(seeds=range(5), arms=("rounds_of_25",), tasks=("cartpole_swingup",)),
    "dev_learned_best_swingup": dict(seeds=range(5), arms=("learned_best",), tasks=("cartpole_swingup",)),
    "report_learned_best_swingup": dict(seeds=range(105, 110), arms=("learned_best",), tasks=("cartpole_swingup",)),
    "report_true_best_swingup": dict(seeds=range(105, 110), arms=("ppo_true_best",), tasks=("cartpole_swingup",)),
    # the judge on the README snippet's walker_walk (its curves flatten rather than swing), the snippet's fresh seeds
    "report_learned_best_snippet": dict(seeds=range(101, 104), arms=("learned_best",), tasks=("walker_walk",)),
    "report_learned_best_swingup_floor": dict(
        seeds=range(105, 110), arms=("random_teacher_learned_best",), tasks=("cartpole_swingup",)
    ),
    # walker_stand's PPO swings between about 180 and 780 at 500k (report_walker_stand): the judge there, with the
    # VecNormalize statistics of the kept policy's time; development seeds first, then the fresh seeds of
    # report_walker_stand beside PPO kept by SB3's EvalCallback on the same schedule
    "dev_learned_best_walker_stand": dict(seeds=range(5), arms=("learned_best",), tasks=("walker_stand",)),
    "report_learned_best_walker_stand": dict(
        seeds=range(101, 111), arms=("learned_best", "ppo_true_best"), tasks=("walker_stand",)
    ),
    # issue 41's walker_stand at 500k beside PPO and the grid's hand-set schedule (nothing is chosen: the defaults as
    # they are), then the floor; about 2 CPU-minutes per run on the AVX512-BF16 machine
    "report_walker_stand": dict(
        seeds=range(101, 106), arms=("ppo", "defaults", "handset", "random_teacher"), tasks=("walker_stand",)
    ),
    # dev_walker_stand's lead (a first round of 100: above the defaults on all five dev seeds, 413.2 against 255.8) on
    # the fresh seeds, after the more seeds below
    "report_walker_stand_first_round": dict(seeds=range(101, 111), arms=("first_round_100",), tasks=("walker_stand",)),
    # five more fresh seeds: the hand-set schedule's lead over 101-105 rests on three of its seeds (676-800)
    "report_walker_stand_more": dict(
        seeds=range(106, 111), arms=("ppo", "defaults", "handset", "random_teacher"), tasks=("walker_stand",)
    ),
}


def make_env(task: str, n_envs: int, seed: int) -> Any:
    from stable_baselines3.common.env_util import make_vec_env

    from sb3_pref.envs import make_vec_dmcontrol_env

    if task.startswith("Pendulum-v1"):
        return make_vec_env("Pendulum-v1", n_envs=n_envs, seed=seed)
    return make_vec_dmcontrol_env(task.removesuffix("-sac"), n_envs=n_envs, seed=seed)


def evaluate(model: Any, env: Any, episodes: int) -> float:
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import VecNormalize, sync_envs_normalization

    if isinstance(env, VecNormalize):  # the training env's observation statistics, frozen for the evaluation
        sync_envs_normalization(model.get_env(), env)
    mean, _ = evaluate_policy(model, env, n_eval_episodes=episodes, deterministic=True)
    return float(mean)


def make_judge(task: str, spec: dict[str, Any], seed: int, learned_best: bool, best_dir: str) -> Any:
    """
    The policy judged best, 5 episodes every 5% of the run on an env of its own (seed ``seed + 2000``): by the learned
    reward (``LearnedRewardEvalCallback``) or, for PPO, by the true one (SB3's ``EvalCallback``), saved in ``best_dir``.
    Under ``VecNormalize`` the judge sees what the policy does (the training statistics, synced at each judgement),
    and the statistics of the kept policy's time are saved beside it: ``LearnedRewardEvalCallback`` does so itself,
    ``EvalCallback`` through its ``callback_on_new_best``.
    """
    from stable_baselines3.common.callbacks import BaseCallback, EvalCallback
    from stable_baselines3.common.vec_env import VecNormalize

    from sb3_pref.common.learned_eval import VEC_NORMALIZE_FILE, LearnedRewardEvalCallback

    class SaveNormalization(BaseCallback):
        """``callback_on_new_best``: the training env's ``VecNormalize`` statistics, saved."""

        def _on_step(self) -> bool:
            self.model.get_vec_normalize_env().save(os.path.join(best_dir, VEC_NORMALIZE_FILE))
            return True

    judge_env, on_new_best = make_env(task, 1, seed + 2000), None
    if spec.get("normalize_obs"):
        judge_env = VecNormalize(judge_env, training=False, norm_obs=True, norm_reward=False)
        on_new_best = None if learned_best else SaveNormalization()
    judge_class = LearnedRewardEvalCallback if learned_best else EvalCallback
    return judge_class(
        judge_env, n_eval_episodes=5, eval_freq=max(1, spec["steps"] // 20 // spec["n_envs"]),
        best_model_save_path=best_dir, verbose=0, callback_on_new_best=on_new_best,
    )  # fmt: skip


def evaluate_kept(
    model: Any, judge: Any, task: str, seed: int, best_dir: str, env: Any, eval_env: Any, normalized: bool
) -> dict[str, Any]:
    """:return: the kept policy's 20-episode score (with its own time's ``VecNormalize`` statistics) and its step"""
    from stable_baselines3.common.vec_env import VecNormalize

    from sb3_pref.common.learned_eval import VEC_NORMALIZE_FILE, LearnedRewardEvalCallback

    best_env = env
    if normalized:  # evaluate() syncs the kept statistics into the evaluation env
        best_env = VecNormalize.load(os.path.join(best_dir, VEC_NORMALIZE_FILE), make_env(task, 1, seed + 1000))
        best_env.training = False
    best = type(model).load(os.path.join(best_dir, "best_model"), env=best_env)
    if isinstance(judge, LearnedRewardEvalCallback):
        return dict(
            final_learned_best=evaluate(best, eval_env, 20), learned_best_step=judge.best_timestep,
            learned_best_score=float(judge.best_mean_learned_return),
        )  # fmt: skip
    # EvalCallback does not keep the step of its best: the saved model carries it
    return dict(final_true_best=evaluate(best, eval_env, 20), true_best_step=int(best.num_timesteps))


@contextlib.contextmanager
def plan_window(label_window: Optional[float]) -> Iterator[None]:
    """
    The feedback plan's label window (the share of the run by which every label is asked) set to ``label_window`` for
    the ``learn`` call inside, restored after it: a candidate default, tried without changing the library. The plan
    is made by the first ``learn`` call and saved with the model, so the window holds for the whole run.

    :param label_window: the share (None: the library's own)
    """
    from sb3_pref.core import feedback_plan

    saved = feedback_plan.LABEL_WINDOW
    if label_window is not None:
        feedback_plan.LABEL_WINDOW = float(label_window)
    try:
        yield
    finally:
        feedback_plan.LABEL_WINDOW = saved


def run_one(task: str, arm: str, seed: int) -> str:
    """Train one arm on one task and seed; write its JSON. :return: the JSON's path"""
    return train_one(task, TASKS[task], arm, ARMS[arm], seed, RESULTS / task / arm / f"seed{seed}.json")


def train_one(task: str, spec: dict[str, Any], arm: str, extra: Optional[dict[str, Any]], seed: int, path: Path) -> str:
    """
    Train one arm on one task and seed; write its JSON (also the frozen protocol's runner, benchmarks/quality).

    :param task: the env (``Pendulum-v1...`` for gymnasium's, a dm_control task otherwise)
    :param spec: steps, labels, n_envs, ppo (or sac), handset
    :param arm: the arm's name, recorded
    :param extra: None for PPO (SAC) on the true reward; else ``{}`` (the defaults), PPO_REWARD options (and
        ``teacher_kwargs``: a ``ScriptedTeacher``'s settings), ``{"handset": True}`` or ``{"random_teacher": True}``
    :param seed: the seed of the envs (evaluation: ``seed + 1000``), the algorithm and the teacher
    :param path: the JSON to write
    :return: the JSON's path
    """
    import numpy as np
    import torch as th
    from stable_baselines3 import PPO, SAC
    from stable_baselines3.common.callbacks import BaseCallback

    from sb3_pref import PPO_REWARD, SAC_REWARD, RewardModel
    from sb3_pref.core.teachers import ScriptedTeacher

    th.set_num_threads(1)
    env = make_env(task, spec["n_envs"], seed)
    eval_env = make_env(task, 1, seed + 1000)
    if spec.get("normalize_obs"):  # observations only: the reward a PPO_REWARD run sees is its model's
        from stable_baselines3.common.vec_env import VecNormalize

        env = VecNormalize(env, norm_obs=True, norm_reward=False)
        eval_env = VecNormalize(eval_env, training=False, norm_obs=True, norm_reward=False)
    sac = spec.get("sac", False)
    label_window: Optional[float] = None
    learned_best = False
    base, algorithm, algo_kwargs = (SAC, SAC_REWARD, {}) if sac else (PPO, PPO_REWARD, spec["ppo"])
    true_best = extra is not None and extra.get("true_best", False)
    if extra is None or true_best:  # the "ppo" arms: the same algorithm on the true reward (SAC on the SAC task)
        model: Any = base("MlpPolicy", env, seed=seed, verbose=0, **algo_kwargs)
        settings: dict[str, Any] = {"true_best": True} if true_best else {}
    else:
        settings = {"teacher": "oracle", "max_feed": spec["labels"]}
        model_kwargs: dict[str, Any] = {}
        learned_best = bool(extra.get("learned_best", False))
        if extra.get("handset"):
            handset = dict(spec["handset"])
            model_kwargs = handset.pop("model")
            settings.update(handset)
        elif extra.get("random_teacher"):
            # every label flipped with probability 0.5: answers independent of the segments
            settings["teacher"] = ScriptedTeacher(beta=-1, gamma=1, eps_mistake=0.5, eps_skip=0, eps_equal=0, seed=seed)
        else:
            extra = dict(extra)
            model_kwargs = extra.pop("model", {})
            extra.pop("learned_best", None)
            teacher_kwargs = extra.pop("teacher_kwargs", None)
            if teacher_kwargs is not None:  # a scripted teacher of these settings, seeded as the run
                settings["teacher"] = ScriptedTeacher(**teacher_kwargs, seed=seed)
            settings.update(extra)
        label_window = settings.pop("label_window", None)  # the plan's, not an algorithm option
        reward_model = RewardModel(env.observation_space, env.action_space, **model_kwargs)
        model = algorithm("MlpPolicy", env, reward_model=reward_model, seed=seed, verbose=0, **algo_kwargs, **settings)
        if label_window is not None:
            settings["label_window"] = label_window
    start = evaluate(model, eval_env, 5)
    curve: list[tuple[int, float]] = []
    every = spec["steps"] // 10
    curve_cpu = [0.0]

    class Every10Percent(BaseCallback):
        """A 5-episode deterministic evaluation every 10% of the run; its CPU seconds are kept out of training's."""

        def _on_step(self) -> bool:
            if self.num_timesteps // every > len(curve):
                t0 = time.process_time()
                curve.append((int(self.num_timesteps), evaluate(model, eval_env, 5)))
                curve_cpu[0] += time.process_time() - t0
            return True

    callbacks: list[Any] = [Every10Percent()]
    best_dir = None
    if learned_best or true_best:
        best_dir = tempfile.mkdtemp(prefix="kept_best_")
        callbacks.append(make_judge(task, spec, seed, learned_best, best_dir))
        if learned_best:
            settings["learned_best"] = True
    cpu, wall = time.process_time(), time.time()
    with plan_window(label_window):
        model.learn(spec["steps"], callback=callbacks)
    cpu, wall = time.process_time() - cpu - curve_cpu[0], time.time() - wall
    t0 = time.process_time()
    final = evaluate(model, eval_env, 20)
    eval_cpu = time.process_time() - t0 + curve_cpu[0]
    result: dict[str, Any] = dict(
        task=task, arm=arm, seed=seed, steps=spec["steps"], start=start, final=final, curve=curve,
        cpu_seconds=cpu, wall_seconds=wall, final_eval_cpu_seconds=eval_cpu,
        settings={k: (v if isinstance(v, (int, float, str)) else repr(v)) for k, v in settings.items()},
        ep_rew_mean=float(np.mean([ep["r"] for ep in model.ep_info_buffer])) if model.ep_info_buffer else None,
        commit=subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=HERE).stdout.strip(),
        cpu_model=cpu_name(),
    )  # fmt: skip
    if best_dir is not None:
        result.update(evaluate_kept(model, callbacks[1], task, seed, best_dir, env, eval_env, bool(spec.get("normalize_obs"))))
        shutil.rmtree(best_dir, ignore_errors=True)
    if extra is not None and not true_best:
        plan = model.feedback_plan
        result["plan"] = plan.to_dict()
        result["counters"] = model.pref_learner.counters()
        result["oracle_agreement"] = float(model.pref_learner.oracle_agreement(2000))
    write_json(path, result)
    return str(path)


@probe(
    "run",
    "a phase's runs not yet done (resumes: a run whose JSON exists is skipped)",
    Option("--phase", "which tasks, arms and seeds", choices=sorted(PHASES), required=True),
    shared("workers"),
)
def run_phase(args: argparse.Namespace) -> None:
    """
    Every arm on every task and seed of the phase, ``--workers`` at a time, each run's JSON written as it lands.

    :param args: the options
    """
    phase = PHASES[args.phase]
    jobs = [
        (task, arm, seed)
        for task in phase["tasks"]
        for seed in phase["seeds"]
        for arm in phase["arms"]
        if not (RESULTS / task / arm / f"seed{seed}.json").exists()
    ]
    run_jobs(run_one, jobs, args.workers)


def run_jobs(function: Any, jobs: list[tuple[str, str, int]], workers: int) -> None:
    """Run ``function(task, arm, seed)`` for each job, ``workers`` at a time, printing each result as it lands."""
    print(f"{len(jobs)} runs to do", flush=True)
    with ProcessPoolExecutor(workers) as pool:
        futures = [pool.submit(function, *job) for job in jobs]
        for job, future in zip(jobs, futures):
            try:
                print("done", future.result(), flush=True)
            except Exception as error:  # one failed run must not stop the others
                print("FAILED", job, repr(error), file=sys.stderr, flush=True)


if __name__ == "__main__":
    run_script(run_phase)
