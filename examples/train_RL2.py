"""
Train RL2 on a task family, evaluate how it adapts on held-out tasks, save everything.

    python examples/train_RL2.py --env darkroom --total-timesteps 8000000 --seed 0 --output-dir runs/rl2_darkroom
    python examples/train_RL2.py --env bandit --n-arms 5 --n-pulls 10 --total-timesteps 2000000 --output-dir runs/rl2_bandit
    python examples/train_RL2.py --env ml1-reach --total-timesteps 5000000 --output-dir runs/rl2_reach

``--env ml1-<task>`` takes any Meta-World v3 task (``ml1-push``, ``ml1-pick-place``, ...). Every
hyperparameter has a per-env default (``PRESETS``) that a flag overrides. The output directory
receives ``args.json``, ``model.zip`` (plus ``vecnormalize.pkl`` for Meta-World), ``adaptation.csv`` (one row per
agent, trial and episode) and ``adaptation.png`` (mean and 95% interval per episode index of RL2
and of a random policy, against the optimal return where known).
"""

import argparse
import json
import os
from typing import Any, Callable

import numpy as np
import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from sb3_pref.envs.bandit import bandit_trials
from sb3_pref.envs.darkroom import darkroom_trials
from sb3_pref.experiments.defaults import task_defaults
from sb3_pref.rl2 import RL2
from sb3_pref.rl2.evaluation import RandomAgent, evaluate_adaptation, plot_adaptation, write_adaptation_csv

# The grid runner's presets (sb3_pref.experiments.defaults), under RecurrentPPO's argument names.
_PRESET_KEYS = (
    "n_envs",
    "n_steps",
    "batch_size",
    "n_epochs",
    "learning_rate",
    "ent_coef",
    "hidden_size",
    "episodes_per_trial",
    "gamma",
)
PRESETS: dict[str, dict[str, Any]] = {}
for _family, _task in (("darkroom", "darkroom"), ("bandit", "bandit"), ("ml1", "ml1-reach")):
    _preset = task_defaults("rl2", _task)
    _preset["learning_rate"] = _preset.pop("lr")
    PRESETS[_family] = {key: _preset.get(key) for key in _PRESET_KEYS}


def parse_args() -> argparse.Namespace:
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
    for name in PRESETS["darkroom"]:
        kind = float if name in ("learning_rate", "ent_coef", "gamma") else int
        parser.add_argument("--" + name.replace("_", "-"), type=kind, default=None, help="default: per-env preset")
    parser.add_argument("--n-arms", type=int, default=5, help="bandit only")
    parser.add_argument("--n-pulls", type=int, default=10, help="bandit only: pulls (one-step episodes) per trial")
    parser.add_argument("--max-episode-steps", type=int, default=200, help="Meta-World only: inner episode length")
    args = parser.parse_args()
    family = "ml1" if args.env.startswith("ml1-") else args.env
    if family not in PRESETS:
        parser.error(f"--env must be darkroom, bandit or ml1-<task>, got {args.env!r}")
    for name, value in PRESETS[family].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    args.family = family
    return args


def env_factory(args: argparse.Namespace) -> tuple[Callable[..., Any], dict[str, Any]]:
    """The trial-env constructor and its arguments (without ``split``)."""
    if args.family == "darkroom":
        return darkroom_trials, dict(episodes_per_trial=args.episodes_per_trial)
    if args.family == "bandit":
        return bandit_trials, dict(n_arms=args.n_arms, n_pulls=args.n_pulls)
    from sb3_pref.envs.metaworld_ml1 import ml1_trials

    task = args.env[len("ml1-") :]
    task = task if task.endswith("-v3") else f"{task}-v3"
    return ml1_trials, dict(
        env_name=task, episodes_per_trial=args.episodes_per_trial, max_episode_steps=args.max_episode_steps
    )


def make_envs(args: argparse.Namespace) -> tuple[VecEnv, VecEnv]:
    factory, kwargs = env_factory(args)
    train = make_vec_env(factory, n_envs=args.n_envs, seed=args.seed, env_kwargs=dict(split="train", **kwargs))
    test = make_vec_env(
        factory, n_envs=min(args.eval_trials, 20), seed=args.seed + 10_000, env_kwargs=dict(split="test", **kwargs)
    )
    if args.family == "ml1":
        # Meta-World rewards reach 10 per step: normalize them, and the observations, for training;
        # the test env shares the observation statistics and reports raw rewards.
        train = VecNormalize(train, gamma=args.gamma)
        test = VecNormalize(test, training=False, norm_reward=False)
    return train, test


def main() -> None:
    args = parse_args()
    th.set_num_threads(1)
    os.makedirs(args.output_dir, exist_ok=True)
    with open(os.path.join(args.output_dir, "args.json"), "w") as handle:
        json.dump(vars(args), handle, indent=1)
    train_env, test_env = make_envs(args)
    model = RL2(
        "MlpGruPolicy" if args.cell == "gru" else "MlpLstmPolicy",
        train_env,
        n_steps=args.n_steps,
        batch_size=args.batch_size,
        n_epochs=args.n_epochs,
        learning_rate=args.learning_rate,
        ent_coef=args.ent_coef,
        gamma=args.gamma,
        policy_kwargs=dict(lstm_hidden_size=args.hidden_size, net_arch=dict(pi=[64], vf=[64])),
        seed=args.seed,
        verbose=args.verbose,
        device="cpu",
    )
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
