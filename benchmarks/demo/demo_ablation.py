"""
The README demo's settings (``examples/quickstart.py``) with one option changed at a time, against PPO on
the true reward at the same settings: where PPO_REWARD's learning delay comes from, and what removes it.

    python -m benchmarks demo ablation --variant ppo --seed 0
    python -m benchmarks demo ablation --variant base --seed 0 --set feed_type=uniform
    python -m benchmarks demo table

Each run writes ``results/demo_ablation/<variant>_<seed>.json``: the deterministic evaluation return before
and after, the training curve (mean true return of the episodes finished in each rollout), per-rollout
statistics of the reward PPO trained on, and CPU seconds. ``--set key=value`` passes PPO_REWARD keyword
arguments (values parsed as Python literals) on top of the demo's.
"""

import argparse
import ast
import glob
import json
import os
import statistics
import sys
import time
from typing import Any, Optional

import numpy as np
import torch as th
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecEnv

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
import quickstart

from benchmarks.study import Option, probe, shared
from sb3_pref import RewardModel
from sb3_pref.envs import make_vec_dmcontrol_env

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "demo_ablation")


class CurveRecorder(BaseCallback):
    """Per rollout: steps, mean true return of the episodes that ended in it, the rewards and value loss PPO saw."""

    def __init__(self, eval_env: Optional[VecEnv] = None, eval_every: int = 0) -> None:
        super().__init__()
        self.rows: list[dict[str, float]] = []
        self._returns: list[float] = []
        self.eval_env, self.eval_every = eval_env, eval_every
        self.eval_cpu = 0.0  # left out of the run's CPU time

    def _on_step(self) -> bool:
        for info in self.locals["infos"]:
            if "episode" in info:
                self._returns.append(float(info["episode"]["r"]))
        return True

    def _on_rollout_end(self) -> None:
        buffer = self.model.rollout_buffer
        row = {
            "step": float(self.num_timesteps),
            "return": statistics.mean(self._returns) if self._returns else float("nan"),
            "reward_mean": float(np.mean(buffer.rewards)),
            "reward_std": float(np.std(buffer.rewards)),
            "value_mean": float(np.mean(buffer.values)),
            "return_target_mean": float(np.mean(buffer.returns)),
        }
        logged = self.model.logger.name_to_value
        for key in ("reward/pred_true_corr", "reward/model_train_steps", "reward/true_pref_accuracy"):
            if key in logged:
                row[key.split("/")[1]] = float(logged[key])
        std = getattr(self.model.policy, "log_std", None)
        if std is not None:
            row["policy_std"] = float(th.exp(std.detach()).mean())
        previous = self.num_timesteps - buffer.buffer_size * buffer.n_envs
        if self.eval_every and self.num_timesteps // self.eval_every > previous // self.eval_every:
            start = time.process_time()
            row["eval"] = float(evaluate_policy(self.model, self.eval_env, n_eval_episodes=2)[0])
            self.eval_cpu += time.process_time() - start
        self.rows.append(row)
        self._returns = []


def run(
    variant: str, seed: int, options: dict[str, Any], total_timesteps: int, env_id: str, eval_every: int = 0
) -> dict[str, Any]:
    th.set_num_threads(1)
    env = make_vec_dmcontrol_env(env_id, n_envs=8, seed=seed)
    eval_env = make_vec_dmcontrol_env(env_id, n_envs=1, seed=seed + 1000)
    reward_options: dict[str, Any] = {}
    if variant.startswith("ppo"):
        model = PPO(env=env, seed=seed, verbose=0, **{**quickstart.PPO_SETTINGS, **options})
    else:
        options = dict(options)
        reward_options = {**quickstart.REWARD_MODEL_SETTINGS, **options.pop("reward_model_options", {})}
        reward_model = RewardModel(env.observation_space, env.action_space, **reward_options)
        model = quickstart.build(env, seed=seed, reward_model=reward_model, **options)
    before, _ = evaluate_policy(model, eval_env, n_eval_episodes=3)
    recorder = CurveRecorder(eval_env, eval_every)
    cpu, wall = time.process_time(), time.time()
    model.learn(total_timesteps, callback=recorder)
    cpu, wall = time.process_time() - cpu - recorder.eval_cpu, time.time() - wall
    after, after_std = evaluate_policy(model, eval_env, n_eval_episodes=5)
    result: dict[str, Any] = dict(
        variant=variant, seed=seed, env=env_id, options=repr(options), total_timesteps=total_timesteps,
        before=before, after=after, after_std=after_std, cpu=cpu, wall=wall, curve=recorder.rows,
    )  # fmt: skip
    # What the run was, in full: the demo's settings at the time plus the overrides.
    result["settings"] = (
        repr({**quickstart.PPO_SETTINGS, **options})
        if variant.startswith("ppo")
        else repr({"ppo_reward": {**quickstart.PPO_SETTINGS, **options}, "reward_model": reward_options})
    )
    if not variant.startswith("ppo"):
        result["feed"] = model.pref_learner.total_feed
        result["agreement"] = model.pref_learner.oracle_agreement(2000)
    return result


def table(env_id: str) -> str:
    results: dict[str, dict[int, dict[str, Any]]] = {}
    for path in sorted(glob.glob(os.path.join(RESULTS, "*.json"))):
        with open(path) as file:
            row = json.load(file)
        if row.get("env", "cartpole_balance") == env_id:
            results.setdefault(row["variant"], {})[row["seed"]] = row
    seeds = sorted({seed for rows in results.values() for seed in rows})
    lines = [
        f"{env_id}: deterministic return after training (5 episodes), per seed; mean; CPU s per run",
        "",
        "| variant | " + " | ".join(f"seed {s}" for s in seeds) + " | mean | CPU s |",
        "|---" * (len(seeds) + 3) + "|",
    ]
    for variant, rows in sorted(results.items()):
        cells = [f"{rows[s]['after']:.1f}" if s in rows else "" for s in seeds]
        mean = statistics.mean(r["after"] for r in rows.values())
        cpu = statistics.mean(r["cpu"] for r in rows.values())
        lines.append(f"| {variant} | " + " | ".join(cells) + f" | {mean:.1f} | {cpu:.0f} |")
    return "\n".join(lines)


def plot(env_id: str, variants: list[str], path: str) -> None:
    """Training curves (mean true return of the episodes of each rollout, mean over seeds) of ``variants``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for variant in variants:
        curves = []
        for path_in in sorted(glob.glob(os.path.join(RESULTS, f"{variant}_[0-9]*.json"))):
            with open(path_in) as file:
                row = json.load(file)
            if row.get("env", "cartpole_balance") == env_id:
                curves.append([(r["step"], r["eval"]) for r in row["curve"] if "eval" in r])
        if not curves or not all(curves):
            continue
        steps = [step for step, _ in curves[0]]
        values = np.array([[value for _, value in curve] for curve in curves])
        mean, low, high = values.mean(0), values.min(0), values.max(0)
        ax.plot(steps, mean, label=f"{variant} ({len(curves)} seeds)")
        ax.fill_between(steps, low, high, alpha=0.15)
    ax.set_xlabel("env steps")
    ax.set_ylabel("true return (deterministic, 2 episodes)")
    ax.set_title(f"{env_id}: mean over seeds, band = min..max")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


ENV = shared("env", default="cartpole_balance")


@probe("table", "the table of the committed results", ENV)
def print_table(args: argparse.Namespace) -> None:
    """
    Each variant's return before and after training, mean over its seeds, against PPO on the true reward.

    :param args: the options
    """
    print(table(args.env))


@probe(
    "plot",
    "these variants' evaluation curves, to results/demo_ablation/curves_<env>.png",
    ENV,
    Option("variants", "variant names", nargs="+"),
)
def plot_curves(args: argparse.Namespace) -> None:
    """
    The mean over seeds of each variant's deterministic evaluations (runs made with ``--eval-every``).

    :param args: the options
    """
    plot(args.env, args.variants, os.path.join(RESULTS, f"curves_{args.env}.png"))


@probe(
    "ablation",
    "one run of the demo's settings with options changed, to results/demo_ablation/<variant>_<seed>.json",
    Option("--variant", "run name (ppo...: PPO on the true reward)", default="base"),
    shared("seed"),
    ENV,
    shared("total_timesteps", default=120_000),
    Option("--set", "PPO_REWARD option as key=value (repeatable)", action="append", default=[]),
    Option("--rm", "RewardModel option as key=value (repeatable)", action="append", default=[]),
    Option("--eval-every", "also evaluate deterministically every this many steps", type=int, default=0),
)
def ablation(args: argparse.Namespace) -> None:
    """
    Train one variant on one seed; values of ``--set`` and ``--rm`` are read as Python literals.

    :param args: the options
    """
    options: dict[str, Any] = {}
    reward_options: dict[str, Any] = {}
    for item in args.set + [f"rm:{item}" for item in args.rm]:
        target = options
        if item.startswith("rm:"):
            item, target = item[3:], reward_options
        key, value = item.split("=", 1)
        try:
            target[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            target[key] = value
    if reward_options:
        options["reward_model_options"] = reward_options
    result = run(args.variant, args.seed, options, args.total_timesteps, args.env, args.eval_every)
    os.makedirs(RESULTS, exist_ok=True)
    suffix = "" if args.env == "cartpole_balance" else f"_{args.env}"
    with open(os.path.join(RESULTS, f"{args.variant}{suffix}_{args.seed}.json"), "w") as file:
        json.dump(result, file, indent=1)
    print(f"{args.variant} seed {args.seed}: {result['before']:.1f} -> {result['after']:.1f} in {result['cpu']:.0f} CPU s")
