"""
Train RL2 on a task family, evaluate how it adapts on held-out tasks, save everything.

    python examples/train_RL2.py --env darkroom --total-timesteps 8000000 --seed 0 --output-dir runs/rl2_darkroom
    python examples/train_RL2.py --env bandit --n-arms 5 --n-pulls 10 --total-timesteps 2000000 --output-dir runs/rl2_bandit
    python examples/train_RL2.py --env ml1-reach --total-timesteps 5000000 --output-dir runs/rl2_reach

``--env ml1-<task>`` takes any Meta-World v3 task (``ml1-push``, ``ml1-pick-place``, ...). Every
hyperparameter has a per-env default (the grid runner's, ``sb3_pref.experiments.task_defaults``) that
a flag overrides; the envs and the model are built by the grid runner's own functions, so a grid's
``rl2`` run and this script train the same thing. The output directory receives ``args.json``,
``model.zip`` (plus ``vecnormalize.pkl`` for Meta-World), ``adaptation.csv`` (one row per agent, trial
and episode) and ``adaptation.png`` (mean and 95% interval per episode index of RL2
and of a random policy, against the optimal return where known).
"""

import argparse
import json
import os
from typing import Any

import numpy as np
import torch as th
from stable_baselines3.common.vec_env import VecNormalize

from sb3_pref.experiments.defaults import task_defaults
from sb3_pref.experiments.rl2_runs import check_rl2_settings, make_rl2_envs, make_rl2_model
from sb3_pref.rl2.evaluation import RandomAgent, evaluate_adaptation, plot_adaptation, write_adaptation_csv

# Flags whose default is the grid runner's per-env preset (sb3_pref.experiments.defaults), under
# RecurrentPPO's argument names (the preset calls the learning rate ``lr``).
_PRESET_FLAGS = {
    "n_envs": int,
    "n_steps": int,
    "batch_size": int,
    "n_epochs": int,
    "learning_rate": float,
    "ent_coef": float,
    "gamma": float,
    "gae_lambda": float,
    "hidden_size": int,
    "episodes_per_trial": int,
    "n_arms": int,
    "n_pulls": int,
    "max_episode_steps": int,
}


def parse_args() -> tuple[argparse.Namespace, dict[str, Any]]:
    """:return: the flags, and the run's settings (the env's preset with the flags given on top)"""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", required=True, help="darkroom, bandit or ml1-<task> (e.g. ml1-reach)")
    parser.add_argument("--total-timesteps", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--cell", choices=["lstm", "gru"], default="gru")
    parser.add_argument("--eval-trials", type=int, default=500)
    parser.add_argument("--deterministic", action="store_true", help="evaluate with the most likely actions")
    parser.add_argument("--progress-bar", action="store_true")
    parser.add_argument("--verbose", type=int, default=1)
    for name, kind in _PRESET_FLAGS.items():
        parser.add_argument("--" + name.replace("_", "-"), type=kind, default=None, help="default: per-env preset")
    args = parser.parse_args()
    try:
        settings = task_defaults("rl2", args.env)
    except ValueError:
        parser.error(f"--env must be darkroom, bandit or ml1-<task>, got {args.env!r}")
    for name in _PRESET_FLAGS:
        value = getattr(args, name)
        if value is not None:
            settings["lr" if name == "learning_rate" else name] = value
    settings.update(
        total_timesteps=args.total_timesteps,
        cell=args.cell,
        eval_trials=args.eval_trials,
        deterministic_eval=args.deterministic,
    )
    try:
        settings = check_rl2_settings(args.env, settings)
    except ValueError as error:
        parser.error(str(error))
    return args, settings


def main() -> None:
    args, settings = parse_args()
    th.set_num_threads(1)
    os.makedirs(args.output_dir, exist_ok=True)
    with open(os.path.join(args.output_dir, "args.json"), "w") as handle:
        json.dump({**vars(args), "settings": settings}, handle, indent=1)
    train_env, test_env = make_rl2_envs(args.env, settings, args.seed, monitor_dir=None)
    model = make_rl2_model(settings, train_env, args.seed, verbose=args.verbose)
    model.learn(args.total_timesteps, progress_bar=args.progress_bar)
    model.save(os.path.join(args.output_dir, "model"))
    if isinstance(train_env, VecNormalize):
        train_env.save(os.path.join(args.output_dir, "vecnormalize.pkl"))
        test_env.obs_rms = train_env.obs_rms

    results = {
        "RL2": evaluate_adaptation(model, test_env, args.eval_trials, deterministic=args.deterministic, seed=args.seed),
        "random": evaluate_adaptation(
            RandomAgent(test_env.action_space, seed=args.seed), test_env, args.eval_trials, seed=args.seed
        ),
    }
    write_adaptation_csv(os.path.join(args.output_dir, "adaptation.csv"), results)
    plot_adaptation(results, os.path.join(args.output_dir, "adaptation.png"), title=f"RL2 on {args.env} (held-out tasks)")

    print(f"held-out tasks, {args.eval_trials} trials: mean return per episode in trial")
    for name, result in results.items():
        stats = result.summary("returns")
        cells = " ".join(f"{m:7.2f}" for m in stats["mean"])
        success = result.summary("successes")["mean"]
        extra = f"  success {' '.join(f'{s:.2f}' for s in success)}" if np.isfinite(success).any() else ""
        print(f"{name:>8}: {cells}{extra}")
    optimal = results["RL2"].optimal
    if np.isfinite(optimal).any():
        print(f" optimal: {np.nanmean(optimal):7.2f}")
    print(f"saved model, adaptation.csv and adaptation.png in {args.output_dir}")


if __name__ == "__main__":
    main()
