"""
What the defaults' first round of labels can tell the library about its task (issue 41's walker_stand gap).

A first round of 100 labels instead of the plan's 250, with the rest spread until six tenths of the run, ends above
the defaults on walker_stand and below them on swing-up and walker_walk (``README.md``): what the first round should
hold is a property of the task (how much the pretraining's states tell the teacher), which the budget does not say.
Could the library read it from what it has at the first round, the labels themselves? This runs the defaults on each
long task (and the demo's) up to the end of the first round, on development seeds, and records:

- the first round's own statistics: the members' accuracy on their held-out folds (labels only, no true reward: a
  quantity the library could act on), and their training accuracy;
- what only a benchmark knows: the agreement with the true returns on fresh pairs, and how far apart the labelled
  segments are in true return (per step), or how many pairs are near-ties.

    python -m benchmarks defaults first-round [--seeds 0 1 2 3 4]   # resumes: results/first_round/<task>/seed<N>.json
    python -m benchmarks defaults first-round-table

Nothing is chosen here: a look at a candidate signal, not a change of the plan.
"""

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.defaults.run import RESULTS, TASKS, make_env
from benchmarks.machine import cpu_name
from benchmarks.study import Option, probe, shared, write_json

FIRST_ROUND = RESULTS / "first_round"
#: the demo's task and the three long ones, whose first-round choice differs (README.md)
FIRST_ROUND_TASKS = ("cartpole_balance", "cartpole_swingup", "walker_stand", "walker_walk")
#: a labelled pair is a near-tie when its segments' true returns differ by less than this, per step
NEAR_TIE = 0.01
ROUND_KEYS = ("model_held_out_accuracy", "model_held_out_loss", "model_train_accuracy", "true_pref_accuracy")


def result_path(task: str, seed: int) -> Path:
    return FIRST_ROUND / task / f"seed{seed}.json"


def run_one(task: str, seed: int) -> str:
    """The defaults on ``task`` and ``seed`` (as ``run.py``'s ``defaults`` arm) until their first round has trained."""
    import torch as th
    from stable_baselines3.common.callbacks import BaseCallback

    from sb3_pref import PPO_REWARD, RewardModel

    th.set_num_threads(1)
    spec = TASKS[task]
    env = make_env(task, spec["n_envs"], seed)
    if spec.get("normalize_obs"):  # as run.py: observations only
        from stable_baselines3.common.vec_env import VecNormalize

        env = VecNormalize(env, norm_obs=True, norm_reward=False)
    model = PPO_REWARD(
        "MlpPolicy", env, reward_model=RewardModel(env.observation_space, env.action_space), teacher="oracle",
        max_feed=spec["labels"], seed=seed, verbose=0, **spec["ppo"],
    )  # fmt: skip
    learner = model.pref_learner
    assert learner is not None
    first: dict[str, float] = {}
    query_round = learner.query_round

    def recorded_round(*args: Any, **kwargs: Any) -> dict[str, float]:
        stats = query_round(*args, **kwargs)
        if not first and "true_pref_accuracy" in stats:
            first.update({key: float(stats[key]) for key in ROUND_KEYS if key in stats})
        return stats

    learner.query_round = recorded_round  # type: ignore[method-assign]  # this run's learner only

    class StopAfterFirstRound(BaseCallback):
        def _on_step(self) -> bool:
            return not first

    cpu = time.process_time()
    model.learn(spec["steps"], callback=StopAfterFirstRound())  # the plan of the whole run; stopped after round 1
    cpu = time.process_time() - cpu
    dataset = learner.dataset
    rewards_0, rewards_1 = np.asarray(dataset.rewards_0), np.asarray(dataset.rewards_1)
    gap = np.abs(rewards_0.sum(1) - rewards_1.sum(1)) / rewards_0.shape[1]
    record = dict(
        task=task, seed=seed, step=int(model.num_timesteps), labels=int(learner.total_feed),
        plan=model.feedback_plan.to_dict(), first_round=first, gap_per_step=float(gap.mean()),
        near_ties=float(np.mean(gap < NEAR_TIE)),
        true_reward_per_step=float(np.concatenate([rewards_0, rewards_1]).mean()), cpu_seconds=cpu, cpu_model=cpu_name(),
    )  # fmt: skip
    write_json(result_path(task, seed), record)
    return str(result_path(task, seed))


def table() -> str:
    """:return: per task, the first round's figures over the seeds run (mean, and the range) (Markdown)"""
    lines = [
        "| task | seeds | labels, step | held-out accuracy (labels only) | training accuracy | agreement with the true "
        "returns, fresh pairs | true-return gap per step | near-ties | true reward per step |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for task in FIRST_ROUND_TASKS:
        runs = [json.loads(path.read_text()) for path in sorted((FIRST_ROUND / task).glob("seed*.json"))]
        if not runs:
            continue

        def cell(values: list[float], digits: int = 3) -> str:
            return f"{np.mean(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"

        rounds = [run["first_round"] for run in runs]
        lines.append(
            f"| {task} | {', '.join(str(run['seed']) for run in runs)} | {runs[0]['labels']}, {runs[0]['step']} "
            f"| {cell([r['model_held_out_accuracy'] for r in rounds])} | {cell([r['model_train_accuracy'] for r in rounds])} "
            f"| {cell([r['true_pref_accuracy'] for r in rounds])} | {cell([run['gap_per_step'] for run in runs])} "
            f"| {cell([run['near_ties'] for run in runs], 2)} | {cell([run['true_reward_per_step'] for run in runs])} |"
        )
    return "\n".join(lines)


@probe(
    "first-round",
    "the defaults up to their first round on the long tasks: what the first round's labels say (development seeds)",
    shared("seeds", default=[0, 1, 2, 3, 4], help="development seeds"),
    Option("--tasks", "the tasks", nargs="+", choices=FIRST_ROUND_TASKS, default=list(FIRST_ROUND_TASKS)),
    shared("workers"),
    environ={"MUJOCO_GL": "osmesa"},
)
def run_first_round(args: argparse.Namespace) -> None:
    """
    Each task on each seed, ``--workers`` at a time; a run whose JSON exists is skipped.

    :param args: the options
    """
    from benchmarks.defaults.run import run_jobs

    jobs = [(task, seed) for task in args.tasks for seed in args.seeds if not result_path(task, seed).exists()]
    run_jobs(run_one, jobs, args.workers)


@probe("first-round-table", "the first-round runs' table, from their committed JSON files")
def print_table(args: argparse.Namespace) -> None:
    """
    Per task: the first round's figures.

    :param args: the options (none)
    """
    print(table())
