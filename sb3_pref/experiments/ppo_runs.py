"""
``ppo`` and ``prefppo`` runs of a grid: B-Pref's PPO on the true reward and its PrefPPO
(:class:`~sb3_pref.PPO_REWARD`), with settings named as the flags of ``examples/train_PrefPPO.py``
(:mod:`sb3_pref.experiments.flags`), per-task defaults from :data:`~sb3_pref.experiments.defaults.BPREF_TASKS`,
and models built as the example scripts build them (:mod:`sb3_pref.experiments.bpref`). Each run closes with the
runner's deterministic evaluation on a fresh env.
"""

import argparse
from functools import cache
from typing import Any, Optional, cast

from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.vec_env import VecEnv

from sb3_pref.common.callbacks import Checkpoint
from sb3_pref.experiments.axes import RESERVED, Budget
from sb3_pref.experiments.bpref import make_env, make_ppo, make_prefppo, make_raw_env, save_outputs
from sb3_pref.experiments.defaults import bpref_settings, default_budgets, is_trial_task
from sb3_pref.experiments.flags import TEACHER_FLAGS, args_from_mapping, flag_names, typed_flags
from sb3_pref.experiments.registry import EVAL_SEED_OFFSET, RunKind, run_kind
from sb3_pref.experiments.spec import RunSpec

# Flags a PPO run on the true reward ignores: left out of its settings so that they cannot make it differ.
_PPO_IGNORED_PREFIXES = ("re_", "teacher", "unsuper_")


def bpref_task_defaults(algo: str, task: str) -> dict[str, Any]:
    """
    B-Pref's settings of a ``ppo`` or ``prefppo`` run on ``task`` (flag names).

    :param algo: ``"ppo"`` or ``"prefppo"`` (B-Pref's scripts differ a little between the two)
    :param task: a dm_control, gymnasium or Meta-World task
    :return: a new dict
    :raises ValueError: for a trial task
    """
    if is_trial_task(task):
        raise ValueError(f"{algo} does not run on {task!r}")
    return bpref_settings(algo, task)


@cache
def bpref_keys() -> frozenset:
    """The B-Pref flags a config may set (ppo / prefppo runs): every flag but those the axes or the runner set."""
    return frozenset(flag_names()) - set(RESERVED)


def bpref_args(run: RunSpec) -> argparse.Namespace:
    """
    The flags of a ppo / prefppo run, as ``examples/train_PrefPPO.py`` would parse them.

    :raises ValueError: for a setting the scripts would reject
    """
    values = dict(run.hyperparameters, env=run.task, seed=run.seed)
    learns_reward = run.budget is not None  # a prefppo run: the grid gave it a budget and a teacher
    if learns_reward:
        budget, teacher_params = cast(Budget, run.budget), cast(dict[str, float], run.teacher_params)
        values.update(re_max_feed=budget.max_feed, re_batch=budget.re_batch)
        values.update({option: teacher_params[key] for option, key in TEACHER_FLAGS.items()})
    return args_from_mapping(values, learns_reward=learns_reward)


def _check_ppo(task: str, settings: dict[str, Any]) -> dict[str, Any]:
    return typed_flags({key: value for key, value in settings.items() if not key.startswith(_PPO_IGNORED_PREFIXES)})


def _check_prefppo(task: str, settings: dict[str, Any]) -> dict[str, Any]:
    return typed_flags(settings)


def _load(spec: RunSpec, monitor_dir: str, checkpoint: Checkpoint, algorithm: type[BaseAlgorithm]) -> BaseAlgorithm:
    """A checkpoint's model on fresh envs carrying the checkpoint's ``VecNormalize`` statistics."""
    from stable_baselines3.common.vec_env import VecNormalize

    args = bpref_args(spec)
    env = make_raw_env(args, monitor_dir)
    if args.normalize:
        if checkpoint.vecnormalize is None:
            raise FileNotFoundError(f"{checkpoint.model} has no VecNormalize statistics next to it")
        env = VecNormalize.load(checkpoint.vecnormalize, env)
    return algorithm.load(checkpoint.model, env=env, device="cpu")


def build_ppo(spec: RunSpec, monitor_dir: str, checkpoint: Optional[Checkpoint]) -> BaseAlgorithm:
    """A new PPO on the true reward for the run, or the one in ``checkpoint``."""
    from stable_baselines3 import PPO

    if checkpoint is not None:
        return _load(spec, monitor_dir, checkpoint, PPO)
    args = bpref_args(spec)
    return make_ppo(args, make_env(args, monitor_dir), verbose=0, device="cpu")


def build_prefppo(spec: RunSpec, monitor_dir: str, checkpoint: Optional[Checkpoint]) -> BaseAlgorithm:
    """A new PrefPPO (``PPO_REWARD`` with its reward model and teacher) for the run, or the one in ``checkpoint``."""
    from sb3_pref import PPO_REWARD

    if checkpoint is not None:
        return _load(spec, monitor_dir, checkpoint, PPO_REWARD)
    args = bpref_args(spec)
    return make_prefppo(args, make_env(args, monitor_dir), verbose=0, device="cpu")


def build_bpref(spec: RunSpec, monitor_dir: str, checkpoint: Optional[Checkpoint]) -> BaseAlgorithm:
    """The model of a ppo or prefppo run, as its kind builds it (for scripts that hold a spec of either)."""
    return run_kind(spec.algo).build(spec, monitor_dir, checkpoint)


def finish_bpref(model: BaseAlgorithm, spec: RunSpec, run_dir: str) -> dict[str, Any]:
    """Save ``model.zip`` and the rest of :func:`~sb3_pref.experiments.bpref.save_outputs`; nothing to add to ``run.json``."""
    save_outputs(model, run_dir)
    return {}


def make_bpref_eval_env(spec: RunSpec) -> VecEnv:
    """One env of the run's task, built from its flags as the training envs are, seeded ``seed + EVAL_SEED_OFFSET``."""
    args = bpref_args(spec)
    return make_raw_env(argparse.Namespace(**{**vars(args), "n_envs": 1, "seed": args.seed + EVAL_SEED_OFFSET}), None)


def _why_not(algo: str, task: str) -> Optional[str]:
    if not is_trial_task(task):
        return None
    return f"{algo} runs on dm_control, gymnasium and Meta-World tasks, not the trial task {task!r}"


PPO = RunKind(
    name="ppo",
    keys=bpref_keys(),
    defaults=lambda task: bpref_task_defaults("ppo", task),
    check=_check_ppo,
    build=build_ppo,
    finish=finish_bpref,
    why_not=lambda task: _why_not("ppo", task),
    variant=lambda spec: "PPO (true reward)",
    validate=bpref_args,
    eval_env=make_bpref_eval_env,
    baseline="ppo",
)
PREFPPO = RunKind(
    name="prefppo",
    keys=bpref_keys(),
    defaults=lambda task: bpref_task_defaults("prefppo", task),
    check=_check_prefppo,
    build=build_prefppo,
    finish=finish_bpref,
    why_not=lambda task: _why_not("prefppo", task),
    variant=lambda spec: cast(str, spec.teacher),  # the teacher names PrefPPO's lines
    learns_preferences=True,
    budgets=default_budgets,
    validate=bpref_args,
    eval_env=make_bpref_eval_env,
    baseline="ppo",
)

__all__ = [
    "PPO",
    "PREFPPO",
    "bpref_args",
    "bpref_task_defaults",
    "build_bpref",
    "build_ppo",
    "build_prefppo",
    "finish_bpref",
    "make_bpref_eval_env",
]
