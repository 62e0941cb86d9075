"""
RL Zoo (``rl_zoo3``) integration: ``ppo_reward`` and ``sac_reward`` as Zoo algorithms, with YAML hyperparameters,
``enjoy`` and Optuna samplers.

The Zoo reads its algorithms from ``rl_zoo3.ALGOS`` when it parses ``--algo``, and has no plugin
hook, so the registration has to run before its command line is parsed. Either use our entry points,
which take exactly the Zoo's flags::

    python -m sb3_pref.zoo.train --algo ppo_reward --env walker_walk
    python -m sb3_pref.zoo.enjoy --algo ppo_reward --env walker_walk -f logs
    python -m sb3_pref.zoo.train --algo sac_reward --env Pendulum-v1

or register from your own script (four lines)::

    import sb3_pref.zoo
    from rl_zoo3.train import train

    sb3_pref.zoo.register()
    train()

Without ``-conf``, our entry points read the algorithm's file of :data:`HYPERPARAMS_FILES` (the B-Pref tasks and
Pendulum-v1).
The reward model is configured by ``reward_model_kwargs`` (a plain dict), so each run and each Optuna
trial builds its own model from the env's spaces and ``config.yml`` holds no object.
"""

import os
from typing import Any

from stable_baselines3.common.base_class import BaseAlgorithm

from sb3_pref.ppo_reward import PPO_REWARD
from sb3_pref.sac_reward import SAC_REWARD

ALGO_NAME = "ppo_reward"
#: the Zoo's names of our algorithms
ALGOS: dict[str, type[BaseAlgorithm]] = {"ppo_reward": PPO_REWARD, "sac_reward": SAC_REWARD}
#: the hyperparameters shipped for the B-Pref tasks (and a small Pendulum-v1 entry), per algorithm
HYPERPARAMS_FILES = {name: os.path.join(os.path.dirname(__file__), "hyperparams", f"{name}.yml") for name in ALGOS}
HYPERPARAMS_FILE = HYPERPARAMS_FILES[ALGO_NAME]
#: query selection methods the Optuna sampler tries (B-Pref's uniform and ensemble disagreement, and entropy)
SAMPLED_FEED_TYPES = ("uniform", "disagreement", "entropy")


def sample_ppo_reward_params(trial: Any, n_actions: int, n_envs: int, additional_args: dict[str, Any]) -> dict[str, Any]:
    """
    Optuna sampler for ``ppo_reward``: the Zoo's PPO search space plus the preference schedule.

    The reward model's own arguments stay those of the YAML's ``reward_model_kwargs``; every trial
    builds a fresh model from them.

    :param trial: the Optuna trial
    :param n_actions: action dimension (unused, part of the Zoo's sampler interface)
    :param n_envs: number of envs of the trial
    :param additional_args: the Zoo's extra sampler arguments
    :return: constructor keyword arguments of :class:`~sb3_pref.ppo_reward.PPO_REWARD`
    """
    from rl_zoo3.hyperparams_opt import sample_ppo_params

    params = sample_ppo_params(trial, n_actions, n_envs, additional_args)
    params["feed_type"] = trial.suggest_categorical("feed_type", list(SAMPLED_FEED_TYPES))
    params["re_update"] = trial.suggest_categorical("re_update", [10, 50, 100])
    return params


def convert_ppo_reward_params(sampled_params: dict[str, Any]) -> dict[str, Any]:
    """
    The Zoo's converter (used when a run loads a trial's parameters): PPO's conversion, preference
    parameters passed through unchanged.

    :param sampled_params: the trial's raw parameters
    :return: constructor keyword arguments
    """
    from rl_zoo3.hyperparams_opt import convert_onpolicy_params

    preference: dict[str, Any] = {key: sampled_params[key] for key in ("feed_type", "re_update") if key in sampled_params}
    ppo = {key: value for key, value in sampled_params.items() if key not in preference}
    return {**convert_onpolicy_params(ppo), **preference}


def sample_sac_reward_params(trial: Any, n_actions: int, n_envs: int, additional_args: dict[str, Any]) -> dict[str, Any]:
    """
    Optuna sampler for ``sac_reward``: the Zoo's SAC search space plus the query selection.

    :param trial: the Optuna trial
    :param n_actions: action dimension
    :param n_envs: number of envs of the trial
    :param additional_args: the Zoo's extra sampler arguments
    :return: constructor keyword arguments of :class:`~sb3_pref.sac_reward.SAC_REWARD`
    """
    from rl_zoo3.hyperparams_opt import sample_sac_params

    params = sample_sac_params(trial, n_actions, n_envs, additional_args)
    params["feed_type"] = trial.suggest_categorical("feed_type", list(SAMPLED_FEED_TYPES))
    return params


def convert_sac_reward_params(sampled_params: dict[str, Any]) -> dict[str, Any]:
    """
    The Zoo's converter for ``sac_reward``: SAC's conversion, the query selection passed through unchanged.

    :param sampled_params: the trial's raw parameters
    :return: constructor keyword arguments
    """
    from rl_zoo3.hyperparams_opt import convert_offpolicy_params

    sac = {key: value for key, value in sampled_params.items() if key != "feed_type"}
    preference = {"feed_type": sampled_params["feed_type"]} if "feed_type" in sampled_params else {}
    return {**convert_offpolicy_params(sac), **preference}


def register() -> None:
    """Add ``ppo_reward`` and ``sac_reward`` to RL Zoo's algorithms, Optuna samplers and converters (idempotent)."""
    import rl_zoo3
    from rl_zoo3 import hyperparams_opt

    rl_zoo3.ALGOS.update(ALGOS)
    hyperparams_opt.HYPERPARAMS_SAMPLER.update(ppo_reward=sample_ppo_reward_params, sac_reward=sample_sac_reward_params)
    hyperparams_opt.HYPERPARAMS_CONVERTER.update(ppo_reward=convert_ppo_reward_params, sac_reward=convert_sac_reward_params)


def with_default_config(argv: list[str]) -> list[str]:
    """
    :param argv: the Zoo's command line (without the program name)
    :return: ``argv`` with ``--conf-file`` and the algorithm's shipped file added when it trains one of ours
        without a config
    """
    algo = argv[argv.index("--algo") + 1] if "--algo" in argv[:-1] else None
    if algo not in ALGOS or any(flag in argv for flag in ("-conf", "--conf-file")):
        return argv
    return [*argv, "--conf-file", HYPERPARAMS_FILES[algo]]


__all__ = [
    "ALGOS",
    "ALGO_NAME",
    "HYPERPARAMS_FILE",
    "HYPERPARAMS_FILES",
    "convert_ppo_reward_params",
    "convert_sac_reward_params",
    "register",
    "sample_ppo_reward_params",
    "sample_sac_reward_params",
    "with_default_config",
]
