"""
What a B-Pref run is made of, given its flags (:mod:`sb3_pref.experiments.flags`): the environment
(dm_control or Meta-World, optionally ``VecNormalize``-d), the PPO keyword arguments, the model
(``PPO`` on the true reward, ``PPO`` after state-entropy pretraining, or ``PPO_REWARD``), the run
folder and the files written at the end. ``examples/train_PrefPPO.py``, ``examples/train_PPO.py``
and the grid runner all build their runs with these functions.
"""

import argparse
import json
import os
import sys
from dataclasses import dataclass
from typing import Any, Optional, cast

from stable_baselines3 import PPO
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.logger import configure
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.utils import LinearSchedule
from stable_baselines3.common.vec_env import VecEnv, VecNormalize
from stable_baselines3.ppo import MlpPolicy

from sb3_pref import PPO_REWARD, RewardModel
from sb3_pref.common.options import bpref_options
from sb3_pref.envs import make_benchmark_vec_env
from sb3_pref.experiments.training import has_tensorboard


@dataclass
class Run:
    """Where a run writes: the folder of its monitor files and logs, and the folder of its saved files."""

    run_dir: str
    output_dir: str
    tensorboard_log: Optional[str]


def make_run(args: argparse.Namespace, algo: str, tag: str = "") -> Run:
    """
    Create ``<tensorboard-log>/<algo>/<env>/<tag>seed<seed>`` (``runs/...`` without a log root) and
    write the flags to ``args.json`` there first, so that even a crashed run says how it was started.

    :param args: the parsed flags
    :param algo: e.g. ``"PrefPPO"``
    :param tag: what distinguishes runs of the same algorithm and env besides the seed
    :return: the run's folders
    """
    root = args.tensorboard_log or "runs"
    run_dir = os.path.join(root, algo, args.env, f"{tag}seed{args.seed}")
    output_dir = args.output_dir or run_dir
    os.makedirs(run_dir, exist_ok=True)
    os.makedirs(output_dir, exist_ok=True)
    with open(os.path.join(output_dir, "args.json"), "w") as file:
        json.dump({"algo": algo, **vars(args)}, file, indent=2, sort_keys=True)
    tensorboard_log = run_dir if args.tensorboard_log and has_tensorboard() else None
    return Run(run_dir=run_dir, output_dir=output_dir, tensorboard_log=tensorboard_log)


def prefppo_tag(args: argparse.Namespace) -> str:
    """The part of a PrefPPO run folder that tells its teacher, budget and query settings apart."""
    return (
        f"{args.teacher_name}/feed{args.re_max_feed}x{args.re_batch}_inter{args.re_num_interaction}"
        f"_{args.re_feed_type}_seg{args.re_segment}_envs{args.n_envs}_"
    )


def make_env(args: argparse.Namespace, monitor_dir: Optional[str]) -> VecEnv:
    """
    ``n_envs`` monitored copies of the task (env ``i`` seeded ``seed + i``), wrapped in
    ``VecNormalize(norm_reward=False)`` when ``--normalize``: B-Pref normalises the policy's
    observations only, the reward model sees raw observations.

    :param args: the parsed flags
    :param monitor_dir: folder of the ``Monitor`` CSV files (None: no files)
    :return: the VecEnv
    """
    env = make_raw_env(args, monitor_dir)
    if args.normalize:
        env = VecNormalize(env, norm_reward=False)
    return env


def make_raw_env(args: argparse.Namespace, monitor_dir: Optional[str]) -> VecEnv:
    """The monitored envs of :func:`make_env` without ``VecNormalize`` (to load saved statistics onto)."""
    return make_benchmark_vec_env(args.env, n_envs=args.n_envs, seed=args.seed, monitor_dir=monitor_dir)


def ppo_kwargs(
    args: argparse.Namespace, tensorboard_log: Optional[str] = None, verbose: int = 1, device: str = "auto"
) -> dict[str, Any]:
    """The PPO keyword arguments of every B-Pref run (``clip_range`` annealed linearly to 0)."""
    hidden = [args.hidden_dim] * args.num_layer
    return dict(
        tensorboard_log=tensorboard_log,
        seed=args.seed,
        learning_rate=args.lr,
        batch_size=args.batch_size,
        n_steps=args.n_steps,
        ent_coef=args.ent_coef,
        policy_kwargs=dict(net_arch=dict(pi=hidden, vf=list(hidden))),
        use_sde=args.use_sde,
        sde_sample_freq=args.sde_freq,
        gae_lambda=args.gae_lambda,
        gamma=args.gamma,
        # progress_remaining goes 1 -> 0, so this is clip_init * progress_remaining, B-Pref's schedule.
        clip_range=LinearSchedule(args.clip_init, 0.0, 1.0) if args.clip_anneal else args.clip_init,
        n_epochs=args.n_epochs,
        verbose=verbose,
        device=device,
    )


def make_prefppo(
    args: argparse.Namespace, env: VecEnv, tensorboard_log: Optional[str] = None, verbose: int = 1, device: str = "auto"
) -> PPO_REWARD:
    """
    PrefPPO as B-Pref builds it: a reward model with the flags' teacher, then ``PPO_REWARD`` with
    state-entropy pretraining (train it with ``learn(total_timesteps, unsuper_flag=1)``).

    :param args: the parsed flags
    :param env: from :func:`make_env`
    :param tensorboard_log: tensorboard folder (None: none)
    :param verbose: SB3's verbosity
    :param device: torch device of the policy
    :return: the model
    """
    reward_model = RewardModel(
        env.observation_space,
        env.action_space,
        size_segment=args.re_segment,
        activation=args.re_act,
        lr=args.re_lr,
        mb_size=args.re_batch,
        initial_mb_size=args.re_initial_batch,
        teacher_beta=args.teacher_beta,
        teacher_gamma=args.teacher_gamma,
        teacher_eps_mistake=args.teacher_eps_mistake,
        teacher_eps_skip=args.teacher_eps_skip,
        teacher_eps_equal=args.teacher_eps_equal,
        large_batch=args.re_large_batch,
        hidden_dim=args.re_hidden_dim,
        n_layers=args.re_num_layer,
        train_dtype=args.re_train_dtype,
        input_norm=getattr(args, "re_input_norm", False),
    )
    return PPO_REWARD(
        MlpPolicy,
        env,
        reward_model=reward_model,
        **ppo_kwargs(args, tensorboard_log, verbose, device),
        # The preference options B-Pref's flags set (each option's flag is declared with it); without a
        # --re-schedule flag, B-Pref's exact training schedule, so published comparisons stay possible.
        **{"reward_schedule": "bpref", **bpref_options(args)},
        unsuper_flag=1,
    )


def make_ppo(
    args: argparse.Namespace,
    env: VecEnv,
    pretrain: bool = False,
    tensorboard_log: Optional[str] = None,
    verbose: int = 1,
    device: str = "auto",
) -> OnPolicyAlgorithm:
    """
    B-Pref's PPO baseline on the true reward; with ``pretrain``, its "PPO + unsupervised
    pre-training" baseline (``unsuper_step`` steps of state-entropy pretraining first).

    :param args: the parsed flags
    :param env: from :func:`make_env`
    :param pretrain: pretrain on state entropy first
    :param tensorboard_log: tensorboard folder (None: none)
    :param verbose: SB3's verbosity
    :param device: torch device of the policy
    :return: the model
    """
    if not pretrain:
        return PPO(MlpPolicy, env, **ppo_kwargs(args, tensorboard_log, verbose, device))
    # No reward model: PPO_REWARD only adds the pretraining phase, then trains on the env's reward.
    return PPO_REWARD(
        MlpPolicy,
        env,
        **ppo_kwargs(args, tensorboard_log, verbose, device),
        **bpref_options(args, model=False),
        unsuper_flag=2,
    )


def configure_logging(model: BaseAlgorithm, run: Run) -> None:
    """Without tensorboard installed, log to ``progress.csv`` in the run folder instead of failing."""
    if run.tensorboard_log is None:
        model.set_logger(configure(run.run_dir, ["stdout", "csv"]))


def save_outputs(model: BaseAlgorithm, output_dir: str) -> None:
    """
    Save ``model.zip``, the ``VecNormalize`` statistics (needed to run the policy again) and, for a
    model with a reward model, ``reward_model.pt`` and ``preferences.npz`` (the labelled pairs).
    """
    model.save(os.path.join(output_dir, "model.zip"))
    vec_normalize = model.get_vec_normalize_env()
    if vec_normalize is not None:
        vec_normalize.save(os.path.join(output_dir, "vecnormalize.pkl"))
    if getattr(model, "reward_model", None) is not None:
        learner = cast(Any, model)  # a PPO_REWARD / SAC_REWARD: it has a reward model (checked just above)
        learner.reward_model.save(os.path.join(output_dir, "reward_model.pt"))
        learner.pref_learner.dataset.save(os.path.join(output_dir, "preferences.npz"))


def learn_and_save(model: BaseAlgorithm, run: Run, total_timesteps: int, **learn_kwargs: Any) -> None:
    """Train, then :func:`save_outputs`, also after Ctrl-C so that a long run is never lost."""
    try:
        model.learn(total_timesteps=total_timesteps, **learn_kwargs)
    except KeyboardInterrupt:
        print(f"interrupted at {model.num_timesteps} steps: saving what was learned", file=sys.stderr)
    save_outputs(model, run.output_dir)
    print(f"saved to {run.output_dir}")
