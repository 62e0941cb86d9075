"""
The name-based dispatch between the dm_control and Meta-World factories and gymnasium's own tasks. Their
optional imports and headless OpenGL default live in :mod:`sb3_pref.envs.optional`.
"""

import re
from typing import Any, Optional

from stable_baselines3.common.vec_env import VecEnv

from sb3_pref.envs.registration import NAMESPACE

# gymnasium's id format, ``[namespace/]Name-vN`` (Meta-World's -v2 / -v3 names are told apart first).
_GYMNASIUM_ID = re.compile(r"^(?:[\w.-]+/)?[\w.:-]+-v\d+$")
#: how :func:`~sb3_pref.envs.registration.dmc_gym_id` starts
DMC_GYM_PREFIX = f"{NAMESPACE}/dmc-"


def is_gymnasium_env_name(name: str) -> bool:
    """
    Whether a benchmark name is a task of gymnasium's own registry (``"Pendulum-v1"``), rather than a
    dm_control ``domain_task`` or a Meta-World name.

    :param name: a task name
    :return: True for a versioned id that gymnasium has registered
    """
    from sb3_pref.envs.metaworld import is_metaworld_env_name

    # The project's own dm_control ids in gymnasium's form go to its dm_control factory like B-Pref's names, so
    # that both names of a task build the same env.
    if is_metaworld_env_name(name) or not _GYMNASIUM_ID.match(name) or name.startswith(DMC_GYM_PREFIX):
        return False
    import gymnasium

    return name in gymnasium.registry


def task_family(task: str) -> str:
    """
    :param task: a task name of the grid runner or the B-Pref scripts
    :return: ``"metaworld"``, ``"gym"`` (a gymnasium id such as ``Pendulum-v1``) or ``"dmc"`` (for ppo / prefppo),
        ``"darkroom"``, ``"bandit"`` or ``"ml1"`` (for rl2)
    """
    if task in ("darkroom", "bandit") or task.startswith("ml1-"):
        return "ml1" if task.startswith("ml1-") else task
    from sb3_pref.envs.metaworld import is_metaworld_env_name

    if is_metaworld_env_name(task):
        return "metaworld"
    return "gym" if is_gymnasium_env_name(task) else "dmc"


def gymnasium_episode_length(name: str) -> int:
    """
    :param name: a registered gymnasium id
    :return: its ``max_episode_steps``
    :raises ValueError: for a task without a time limit (segments and episodes need one)
    """
    import gymnasium

    steps = gymnasium.spec(name).max_episode_steps
    if steps is None:
        raise ValueError(f"{name} has no max_episode_steps: register it with a time limit to learn from its segments")
    return int(steps)


def make_benchmark_vec_env(name: str, n_envs: int = 1, seed: Optional[int] = 0, **kwargs: Any) -> VecEnv:
    """
    Dispatch a B-Pref style name to the matching factory, like B-Pref's ``metaworld_flag``:
    ``metaworld_*`` / ``*-v2`` / ``*-v3`` names go to Meta-World, other gymnasium ids (``Pendulum-v1``)
    to SB3's ``make_vec_env``, everything else to dm_control.

    :param name: e.g. ``"walker_walk"``, ``"metaworld_button-press-topdown-v2"`` or ``"Pendulum-v1"``
    :param n_envs: number of environments
    :param seed: base seed, env ``i`` uses ``seed + i``
    :param kwargs: passed on to ``make_vec_metaworld_env``, ``make_vec_dmcontrol_env`` or, for a
        gymnasium id, SB3's ``make_vec_env`` (e.g. ``monitor_dir``)
    :return: the VecEnv
    """
    # Imported here because both modules import this one.
    from sb3_pref.envs.dmc import make_vec_dmcontrol_env
    from sb3_pref.envs.metaworld import is_metaworld_env_name, make_vec_metaworld_env

    if is_metaworld_env_name(name):
        return make_vec_metaworld_env(name, n_envs=n_envs, seed=seed, **kwargs)
    if is_gymnasium_env_name(name):
        from stable_baselines3.common.env_util import make_vec_env

        return make_vec_env(name, n_envs=n_envs, seed=seed, **kwargs)
    return make_vec_dmcontrol_env(name, n_envs=n_envs, seed=seed, **kwargs)
