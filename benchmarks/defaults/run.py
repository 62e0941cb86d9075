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
from benchmarks.defaults.settings import ARMS, DMC_PPO, PENDULUM_PPO, PHASES, TASKS  # noqa: E402, F401
from benchmarks.machine import cpu_name  # noqa: E402
from benchmarks.study import Option, probe, run_script, shared, write_json  # noqa: E402  (the root is on the path from here)

#: gymnasium's MuJoCo tasks, by their own ids (a suffix after the version names a variant of the study's)
GYM_MUJOCO = ("Hopper-v5", "HalfCheetah-v5")


def make_env(task: str, n_envs: int, seed: int, env_kwargs: Optional[dict[str, Any]] = None) -> Any:
    """
    :param env_kwargs: passed to a gymnasium task's constructor (the training env of a variant, e.g. a fixed horizon)
    """
    from stable_baselines3.common.env_util import make_vec_env

    from sb3_pref.envs import make_vec_dmcontrol_env

    if task.startswith("Pendulum-v1"):
        return make_vec_env("Pendulum-v1", n_envs=n_envs, seed=seed)
    gym_id = next((name for name in GYM_MUJOCO if task.startswith(name)), None)
    if gym_id is not None:
        return make_vec_env(gym_id, n_envs=n_envs, seed=seed, env_kwargs=env_kwargs)
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
def plan_window(label_window: Optional[float], pretrain_cap: Optional[int] = None) -> Iterator[None]:
    """
    The feedback plan's label window (the share of the run by which every label is asked) set to ``label_window``,
    and its cap on pretraining steps to ``pretrain_cap``, for the ``learn`` call inside, restored after it: a
    candidate default, tried without changing the library. The plan is made by the first ``learn`` call and saved
    with the model, so the window holds for the whole run.

    :param label_window: the share (None: the library's own)
    :param pretrain_cap: the most pretraining steps (None: the library's own)
    """
    from sb3_pref.core import feedback_plan

    saved = feedback_plan.LABEL_WINDOW, feedback_plan.PRETRAIN_CAP
    if label_window is not None:
        feedback_plan.LABEL_WINDOW = float(label_window)
    if pretrain_cap is not None:
        feedback_plan.PRETRAIN_CAP = int(pretrain_cap)
    try:
        yield
    finally:
        feedback_plan.LABEL_WINDOW, feedback_plan.PRETRAIN_CAP = saved


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
    # a variant may train on another version of the env (train_env_kwargs); every evaluation is on the task's own
    env = make_env(task, spec["n_envs"], seed, spec.get("train_env_kwargs"))
    eval_env = make_env(task, 1, seed + 1000)
    if spec.get("normalize_obs"):  # observations only: the reward a PPO_REWARD run sees is its model's
        from stable_baselines3.common.vec_env import VecNormalize

        env = VecNormalize(env, norm_obs=True, norm_reward=False)
        eval_env = VecNormalize(eval_env, training=False, norm_obs=True, norm_reward=False)
    sac = spec.get("sac", False)
    label_window: Optional[float] = None
    pretrain_cap: Optional[int] = None
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
        # the plan's, not algorithm options
        label_window, pretrain_cap = settings.pop("label_window", None), settings.pop("pretrain_cap", None)
        reward_model = RewardModel(env.observation_space, env.action_space, **model_kwargs)
        model = algorithm("MlpPolicy", env, reward_model=reward_model, seed=seed, verbose=0, **algo_kwargs, **settings)
        settings.update({k: v for k, v in (("label_window", label_window), ("pretrain_cap", pretrain_cap)) if v is not None})
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
    with plan_window(label_window, pretrain_cap):
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
